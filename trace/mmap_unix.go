//go:build unix

package trace

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps f read-only. The mapping stays valid after f is closed.
// Access is random (one tensor at a time, headers scattered over the file),
// so readahead and fault-around would only pull untouched data into RSS.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(b, unix.MADV_RANDOM) // advice only: failure changes nothing
	return b, nil
}

func unmapFile(b []byte) error { return unix.Munmap(b) }
