//go:build !darwin

package metal

import "github.com/zflow/zflow/exec"

// Backend is not available on this platform.
type Backend struct{ exec.Fallback }

// New reports that the Metal backend runs on macOS only.
func New() (*Backend, error) {
	return nil, exec.Unsupported("metal", "new", "the Metal backend is built for macOS (darwin) only")
}

// Open is New as an exec.Backend (for --backend selection).
func Open() (exec.Backend, error) {
	return nil, exec.Unsupported("metal", "new", "the Metal backend is built for macOS (darwin) only")
}
