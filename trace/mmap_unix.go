//go:build unix

package trace

import (
	"os"
	"unsafe"

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

// releaseMapped drops the whole pages inside b, a part of the read-only
// file mapping, from the resident set (the page cache keeps them; a later
// touch faults them back unchanged). Advice only.
func releaseMapped(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi > lo {
		_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
	}
}
