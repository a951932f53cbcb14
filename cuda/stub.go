//go:build !linux

package cuda

import "github.com/zflow/zflow/exec"

// Backend is not available on this platform.
type Backend struct{ exec.Fallback }

// New reports that the CUDA backend runs on Linux only.
func New() (*Backend, error) {
	return nil, exec.Unsupported("cuda", "new", "the CUDA backend is built for Linux only")
}

// Open is New as an exec.Backend (for --backend selection).
func Open() (exec.Backend, error) {
	return nil, exec.Unsupported("cuda", "new", "the CUDA backend is built for Linux only")
}
