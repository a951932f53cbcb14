//go:build unix

package trace

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps f read-only. The mapping stays valid after f is closed.
func mapFile(f *os.File, size int64) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }
