//go:build unix

package reports

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// releasePages tells the kernel that this process is done with the whole
// pages inside b, a read-only view into a trace's file mapping: they leave
// the process's resident set (the page cache keeps them; touching them
// again faults them back in, unchanged). Diff calls it after each segment
// so that streaming a large trace does not grow RSS by the trace's size.
// Advice only: an error changes nothing.
func releasePages(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + pageSize - 1) &^ (pageSize - 1)
	hi := (start + uintptr(len(b))) &^ (pageSize - 1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
