//go:build !unix

package trace

import (
	"io"
	"os"
)

// mapFile reads f whole where mmap is unavailable.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	_, err := io.ReadFull(f, b)
	return b, err
}

func unmapFile([]byte) error { return nil }

// releaseMapped does nothing here: the data are ordinary memory, which
// the advice would zero.
func releaseMapped([]byte) {}
