package semantics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zflow/zflow/internal/tempfiles"
)

// maxDocBytes bounds what Read accepts: a document is a few hundred KiB
// even for a model of hundreds of blocks.
const maxDocBytes = 64 << 20

// Read reads and validates a document. Unknown fields are refused (they are
// typos in version 1); the error names the file and the field.
func Read(path string) (*Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("semantics: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("semantics: %s: %w", path, err)
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("semantics: %s: %w: larger than %d bytes", path, ErrInvalid, maxDocBytes)
	}
	d, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("semantics: %s: %w", path, err)
	}
	return d, nil
}

// Parse decodes and validates a document held in memory.
func Parse(b []byte) (*Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the document", ErrInvalid)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Write validates d and writes it to path atomically: a temporary file in
// the same directory, synced, then renamed over path. On error nothing is
// left behind.
func (d *Document) Write(path string) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("semantics: %s: %w", path, err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("semantics: %s: %w", path, err)
	}
	b = append(b, '\n')
	tmp, err := tempfiles.Create(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("semantics: %w", err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("semantics: %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	defer tempfiles.Done(tmp.Name())
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("semantics: %s: %w", path, err)
	}
	return nil
}
