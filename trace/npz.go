package trace

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// openNpz indexes the archive: each entry's npy header is parsed, stored
// entries become offsets into the mapping, deflated ones are decoded later.
func (t *Trace) openNpz() error {
	zr, err := zip.NewReader(bytes.NewReader(t.data), int64(len(t.data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return errf(t.Path, "", ErrFormat, "not a valid zip archive: %v", err)
	}
	var manifest []byte
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".npy") {
			return errf(t.Path, f.Name, ErrFormat, "entry is not an .npy array")
		}
		key := strings.TrimSuffix(f.Name, ".npy")
		e, err := t.npzEntry(f, key)
		if err != nil {
			return err
		}
		if key == ManifestKey {
			if manifest, err = t.readManifestEntry(e); err != nil {
				return err
			}
			continue
		}
		if err := t.add(e); err != nil {
			return err
		}
	}
	if manifest == nil {
		return errf(t.Path, ManifestKey+".npy", ErrManifest, "archive has no manifest entry")
	}
	m, err := parseManifest(manifest)
	if err != nil {
		return errf(t.Path, ManifestKey+".npy", ErrManifest, "%v", err)
	}
	t.Manifest = m
	return nil
}

func (t *Trace) npzEntry(f *zip.File, key string) (*entry, error) {
	name := f.Name
	size := int64(f.UncompressedSize64)
	if size < 0 {
		return nil, errf(t.Path, name, ErrFormat, "entry size overflows")
	}
	var hdr []byte
	e := &entry{Info: Info{Key: key}}
	switch f.Method {
	case zip.Store:
		off, err := f.DataOffset()
		if err != nil {
			return nil, errf(t.Path, name, ErrFormat, "bad local header: %v", err)
		}
		if f.CompressedSize64 != f.UncompressedSize64 || off < 0 || off+size > int64(len(t.data)) || off+size < off {
			return nil, errf(t.Path, name, ErrFormat, "entry extends past the end of the file (truncated archive?)")
		}
		hdr = t.data[off : off+min(size, maxNpyHeader+12)]
		e.offset = off
	case zip.Deflate:
		if size/maxDeflateRatio > int64(f.CompressedSize64)+1 {
			return nil, errf(t.Path, name, ErrFormat, "claims %d bytes from %d compressed, more than deflate can give", size, f.CompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, errf(t.Path, name, ErrFormat, "%v", err)
		}
		hdr, err = io.ReadAll(io.LimitReader(rc, min(size, maxNpyHeader+12)))
		rc.Close()
		if err != nil {
			return nil, errf(t.Path, name, ErrFormat, "cannot inflate: %v", err)
		}
		e.Compressed = true
		e.source = deflated{f}
	default:
		return nil, errf(t.Path, name, ErrFormat, "unsupported compression method %d", f.Method)
	}
	h, err := parseNpyHeader(hdr, size)
	if err != nil {
		return nil, errf(t.Path, name, ErrFormat, "%v", err)
	}
	dt, err := dtypeFromNpy(h.descr)
	if err != nil {
		return nil, errf(t.Path, name, ErrFormat, "%v", err)
	}
	e.DType, e.Shape, e.Bytes = dt, h.shape, size-int64(h.size)
	e.offset += int64(h.size)
	if e.Compressed {
		e.offset = int64(h.size) // where data starts in the decoded entry
	}
	return e, nil
}

// maxDeflateRatio is deflate's best compression ratio (258-byte matches
// coded in one bit or so); a size claim beyond it is a lie.
const maxDeflateRatio = 1100

// maxManifest bounds the manifest; a million calls fit in far less.
const maxManifest = 1 << 30

func (t *Trace) readManifestEntry(e *entry) ([]byte, error) {
	if e.DType != Uint8 || len(e.Shape) != 1 {
		return nil, errf(t.Path, ManifestKey+".npy", ErrManifest, "manifest must be a 1-D uint8 array, got %s %v", e.DType, e.Shape)
	}
	if e.Bytes > maxManifest {
		return nil, errf(t.Path, ManifestKey+".npy", ErrManifest, "manifest of %d bytes is too large", e.Bytes)
	}
	if e.Bytes != e.Len() {
		return nil, errf(t.Path, ManifestKey+".npy", ErrFormat, "shape %v does not match the %d bytes stored", e.Shape, e.Bytes)
	}
	if e.source != nil {
		return e.source.decode(e)
	}
	return t.data[e.offset : e.offset+e.Bytes], nil
}

// deflated decodes a compressed npz entry in full, checking its length and
// CRC (archive/zip verifies the CRC when the stream reaches EOF).
type deflated struct{ f *zip.File }

func (d deflated) decode(e *entry) ([]byte, error) {
	rc, err := d.f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, e.offset); err != nil {
		return nil, fmt.Errorf("cannot inflate: %v", err)
	}
	buf := make([]byte, e.Bytes)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("cannot inflate: %v", err)
	}
	if n, err := rc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errors.New("entry is longer than its header says")
		}
		return nil, fmt.Errorf("cannot inflate: %v", err)
	}
	return buf, nil
}
