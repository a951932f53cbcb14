package exec

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by every error a backend returns for a request
// it cannot run (an op, a format, a shape, a parameter value).
var ErrUnsupported = errors.New("unsupported")

// Unsupported returns an error wrapping ErrUnsupported that names the
// backend, the op and the reason.
func Unsupported(backend, op, format string, args ...any) error {
	return fmt.Errorf("exec: %s backend: %s: %w: %s", backend, op, ErrUnsupported, fmt.Sprintf(format, args...))
}
