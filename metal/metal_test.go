package metal

import (
	"errors"
	"runtime"
	"testing"

	"github.com/zflow/zflow/exec"
)

// TestOpen: off macOS, or on a Mac without a Metal device, Open fails with
// an error wrapping exec.ErrUnsupported; on a Mac with one it opens.
func TestOpen(t *testing.T) {
	b, err := Open()
	if err != nil {
		if !errors.Is(err, exec.ErrUnsupported) {
			t.Fatalf("Open: %v, want an error wrapping exec.ErrUnsupported", err)
		}
		t.Skipf("no Metal backend here (%s): %v", runtime.GOOS, err)
	}
	if b.Name() != "metal" {
		t.Errorf("Name() = %q", b.Name())
	}
}
