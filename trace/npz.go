package trace

import (
	"archive/zip"
	"bytes"
	"cmp"
	"compress/flate"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
)

// openNpz indexes the archive: each entry's npy header is parsed, stored
// entries become offsets into the mapping, deflated ones are decoded later.
func (t *Trace) openNpz() error {
	zr, err := zip.NewReader(t.file, int64(len(t.data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return errf(t.Path, "", ErrFormat, "not a valid zip archive: %v", err)
	}
	if err := t.checkZipLayout(zr.File); err != nil {
		return err
	}
	var manifest *entry
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
			if manifest != nil {
				return errf(t.Path, f.Name, ErrManifest, "a second manifest entry (which one is meant?)")
			}
			if err := checkManifestEntry(t.Path, e); err != nil {
				return err
			}
			manifest = e
			continue
		}
		if err := t.add(e); err != nil {
			return err
		}
	}
	if manifest == nil && t.port {
		t.Manifest, t.bare = bareManifest(), true
		return nil
	}
	if manifest == nil {
		return errf(t.Path, ManifestKey+".npy", ErrManifest, "archive has no manifest entry (%s)", noManifestHint)
	}
	r, err := t.manifestReader(manifest)
	if err != nil {
		return err
	}
	m, err := parseManifest(r)
	var re *readError
	switch {
	case errors.As(err, &re):
		return errf(t.Path, ManifestKey+".npy", ErrFormat, "%v", re.err)
	case err != nil:
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
		if hdr, err = t.readAt(off, min(size, 4096)); err != nil {
			return nil, err
		}
		if _, err := parseNpyHeader(hdr, size); errors.Is(err, errNpyShort) {
			// A header longer than the usual page: read all it may be.
			if hdr, err = t.readAt(off, min(size, maxNpyHeader+12)); err != nil {
				return nil, err
			}
		}
		e.offset = off
		e.stored = &storedCRC{from: off, n: size, want: f.CRC32}
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
		off, err := f.DataOffset()
		if err != nil || off < 0 || off+int64(f.CompressedSize64) > int64(len(t.data)) {
			return nil, errf(t.Path, name, ErrFormat, "entry extends past the end of the file (truncated archive?)")
		}
		e.Compressed = true
		e.source = deflated{data: t.data[off : off+int64(f.CompressedSize64)], crc: f.CRC32}
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

// DecodedBudget is the default Options.MaxDecoded for a file of size bytes: 64
// times the file, and at least 1 GiB. Float data deflate by a few percent;
// a file that claims more is a decompression bomb or needs --max-decoded.
func DecodedBudget(size int64) int64 {
	if size > math.MaxInt64/64 {
		return math.MaxInt64
	}
	return max(64*size, 1<<30)
}

// checkZipLayout refuses an archive whose entries overlap (two names on
// one stream: a bomb's multiplier) and one whose deflated entries declare
// more decoded bytes, together, than the budget (Options.MaxDecoded), before
// anything is decoded.
func (t *Trace) checkZipLayout(files []*zip.File) error {
	type span struct {
		name       string
		start, end int64
	}
	spans := make([]span, 0, len(files))
	budget := t.opts.MaxDecoded
	if budget <= 0 {
		budget = DecodedBudget(int64(len(t.data)))
	}
	var decoded int64
	for _, f := range files {
		off, err := f.DataOffset()
		if err != nil {
			return errf(t.Path, f.Name, ErrFormat, "bad local header: %v", err)
		}
		n := int64(f.CompressedSize64)
		if n < 0 || off < 0 || off > int64(len(t.data))-n {
			return errf(t.Path, f.Name, ErrFormat, "entry extends past the end of the file (truncated archive?)")
		}
		spans = append(spans, span{f.Name, off, off + n})
		if f.Method == zip.Deflate {
			u := int64(f.UncompressedSize64)
			if u < 0 || u > budget-decoded {
				return errf(t.Path, f.Name, ErrFormat, "deflated entries would decode to more than %d bytes together (a decompression bomb? --max-decoded raises the budget)", budget)
			}
			decoded += u
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end || spans[i].start == spans[i-1].start {
			return errf(t.Path, spans[i].name, ErrFormat, "the entry's data overlap those of %q", spans[i-1].name)
		}
	}
	return nil
}

// maxDeflateRatio is deflate's best compression ratio (258-byte matches
// coded in one bit or so); a size claim beyond it is a lie.
const maxDeflateRatio = 1100

// maxManifest bounds the manifest; a million calls fit in far less.
const maxManifest = 1 << 30

// checkManifestEntry refuses a manifest entry that is not a byte array
// of a size a manifest may have.
func checkManifestEntry(file string, e *entry) error {
	if e.DType != Uint8 || len(e.Shape) != 1 {
		return errf(file, ManifestKey+".npy", ErrManifest, "manifest must be a 1-D uint8 array, got %s %v", e.DType, e.Shape)
	}
	if e.Bytes > maxManifest {
		return errf(file, ManifestKey+".npy", ErrManifest, "manifest of %d bytes is too large", e.Bytes)
	}
	if e.Bytes != e.Len() {
		return errf(file, ManifestKey+".npy", ErrFormat, "shape %v does not match the %d bytes stored", e.Shape, e.Bytes)
	}
	return nil
}

// manifestReader reads the manifest entry's bytes as a stream, so that a
// manifest is decoded as it is read, never held whole: a deflated entry
// through the inflater, a stored one from the mapping once its checksum
// holds.
func (t *Trace) manifestReader(e *entry) (io.Reader, error) {
	if d, ok := e.source.(deflated); ok {
		return d.open(e)
	}
	if e.stored != nil {
		if err := e.stored.check(t.data); err != nil {
			return nil, errf(t.Path, ManifestKey+".npy", ErrFormat, "%v", err)
		}
	}
	return bytes.NewReader(t.data[e.offset : e.offset+e.Bytes]), nil
}

// deflated decodes a compressed npz entry from the mapping in full,
// checking its length and CRC.
type deflated struct {
	data []byte // the compressed stream
	crc  uint32
}

func (d deflated) decode(e *entry) ([]byte, error) {
	r, err := d.open(e)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, e.Bytes)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, readErr(err)
	}
	if _, err := r.Read(nil); err != io.EOF {
		return nil, readErr(err)
	}
	return buf, nil
}

// open starts a decoder at the entry's data (past its npy header). The
// reader it gives checks, when a read reaches the end of the data, that
// the stream ends there and has the archive's CRC-32 (as zip.File.Open
// checks them at EOF); its errors are *readError.
func (d deflated) open(e *entry) (io.Reader, error) {
	sum := crc32.NewIEEE()
	r := io.TeeReader(flate.NewReader(bytes.NewReader(d.data)), sum)
	if _, err := io.CopyN(io.Discard, r, e.offset); err != nil {
		return nil, fmt.Errorf("cannot inflate: %v", err)
	}
	return &checkedReader{r: r, sum: sum, want: d.crc, left: e.Bytes}, nil
}

// checkedReader reads left bytes of an entry's stream and, on the read
// after the last of them, checks the stream's end and its checksum.
type checkedReader struct {
	r    io.Reader // the decoded entry, teed into sum
	sum  hash.Hash32
	want uint32
	left int64
	err  error // sticky: io.EOF once checked, else what failed
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		c.err = io.EOF
		if n, err := c.r.Read(make([]byte, 1)); n != 0 || (err != nil && err != io.EOF) {
			c.err = &readError{errors.New("entry is longer than its header says")}
		} else if c.sum.Sum32() != c.want {
			c.err = &readError{errors.New("checksum mismatch (corrupt data)")}
		}
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	switch {
	case err == io.EOF && c.left > 0:
		c.err = &readError{fmt.Errorf("cannot inflate: %v", io.ErrUnexpectedEOF)}
	case err != nil && err != io.EOF:
		c.err = &readError{fmt.Errorf("cannot inflate: %v", err)}
	}
	return n, c.err
}

// readError is a failure to read an entry's bytes (corrupt or truncated
// data), told apart from what the bytes say.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// readErr unwraps a *readError for the messages that name the entry.
func readErr(err error) error {
	if re, ok := errors.AsType[*readError](err); ok {
		return re.err
	}
	return err
}
