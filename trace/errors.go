package trace

import (
	"errors"
	"fmt"
)

// Sentinel errors, wrapped by every *Error this package returns.
var (
	// ErrFormat: the file or an entry is not a valid npz, npy or safetensors.
	ErrFormat = errors.New("malformed trace")
	// ErrManifest: the manifest is missing, unparsable or inconsistent.
	ErrManifest = errors.New("invalid manifest")
	// ErrNotFound: a key, call or port that the trace does not hold.
	ErrNotFound = errors.New("not found")
	// ErrInexact: a conversion that would change a value (int64 → f32, say).
	ErrInexact = errors.New("inexact conversion")
)

// Error locates a problem: the file, the entry inside it (may be empty) and
// what is wrong. Err wraps one of the sentinels above.
type Error struct {
	File  string
	Entry string
	Err   error
}

func (e *Error) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: entry %q: %v", e.File, e.Entry, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// errf builds an *Error whose message is formatted and which wraps kind.
func errf(file, entry string, kind error, format string, args ...any) error {
	return &Error{File: file, Entry: entry, Err: fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))}
}
