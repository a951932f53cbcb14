package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"
)

// ManifestKey is the npz entry (without ".npy") that holds the manifest.
const ManifestKey = "__zflow__"

// Info describes one stored tensor without reading its data.
type Info struct {
	Key        string
	DType      DType
	Shape      []int
	Bytes      int64 // data size in bytes
	Compressed bool  // a deflated npz entry: reading it decodes a copy
}

// Len is the number of elements.
func (i Info) Len() int64 { return numElems(i.Shape) }

// entry is where one tensor's data lives in the file.
type entry struct {
	Info
	offset int64 // data offset in the mapping (stored data only)
	source source
	stored *storedCRC // a stored npz entry's checksum, checked on first read
}

// storedCRC checks a stored zip entry's CRC-32 once, on the first read of
// the entry, over the mapped bytes in place (as zip.File.Open checks it
// at the end of the stream; nothing is copied).
type storedCRC struct {
	from, n int64 // the zip entry's bytes in the mapping: npy header and data
	want    uint32
	once    sync.Once
	err     error
}

// check reports whether data[from:from+n] has the CRC the archive gives.
func (s *storedCRC) check(data []byte) error {
	s.once.Do(func() {
		const chunk = 1 << 20
		var sum uint32
		for at := s.from; at < s.from+s.n; at += chunk {
			b := data[at:min(at+chunk, s.from+s.n)]
			sum = crc32.Update(sum, crc32.IEEETable, b)
			releaseMapped(b) // the check does not grow the resident set by the entry's size
		}
		if sum != s.want {
			s.err = fmt.Errorf("checksum mismatch: the stored bytes have CRC-32 %08x, the archive says %08x (corrupt data)", sum, s.want)
		}
	})
	return s.err
}

// source decodes the data of a compressed entry.
type source interface {
	decode(e *entry) ([]byte, error)
}

// Trace is an open trace file. It is safe for concurrent reads; Close
// releases the mapping, after which views from it must not be used.
type Trace struct {
	Path     string
	Kind     string // "npz" or "safetensors"
	Manifest *Manifest

	data []byte   // the mapping: touched only to read tensor data
	file *os.File // open while indexing: headers are read with pread so
	// that indexing does not fault file pages into RSS
	entries  map[string]*entry
	alias    map[string]string // a call tensor's canonical key → the key it is stored under, where they differ
	aliased  sync.Once         // alias is built on the first key not stored (most readers never ask)
	order    []string          // keys in file order
	tree     *Tree
	port     bool // OpenPort: a missing manifest is allowed
	opts     Options
	bare     bool // read as a port trace: no manifest, or one without a call tree
	treeless bool // bare, with a manifest (dtypes only, say)
}

// Options are the limits of one Open; the zero value is the defaults.
type Options struct {
	// MaxDecoded bounds the bytes that the deflated entries of an npz
	// trace may decode to, all entries together (their sizes as the
	// archive declares them; decoding checks each size exactly). 0:
	// DecodedBudget of the file's size.
	MaxDecoded int64
}

// Open opens and validates a trace with the default Options. It reads the
// archive directory, the tensor headers and the manifest, never the
// tensor data.
func Open(path string) (*Trace, error) { return open(path, false, Options{}) }

// OpenWith is Open with the limits of o.
func OpenWith(path string, o Options) (*Trace, error) { return open(path, false, o) }

func open(path string, port bool, o Options) (*Trace, error) {
	if o.MaxDecoded < 0 {
		return nil, &Error{File: path, Err: fmt.Errorf("MaxDecoded %d: want a number of bytes, 0 for the default", o.MaxDecoded)}
	}
	st, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{File: path, Err: fmt.Errorf("%w: %v", ErrNotFound, err)}
	}
	if st.IsDir() {
		return nil, errf(path, "", ErrFormat, "is a directory, not a trace file")
	}
	if st.Size() == 0 {
		return nil, errf(path, "", ErrFormat, "empty file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	defer f.Close()
	data, err := mapFile(f, st.Size())
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("mmap: %w", err)}
	}
	t := &Trace{Path: path, data: data, file: f, entries: map[string]*entry{}, port: port, opts: o}
	defer func() { t.file = nil }()
	head, err := t.readAt(0, 16)
	if err != nil {
		unmapFile(data)
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")):
		t.Kind = "npz"
		err = t.openNpz()
	case looksLikeSafetensors(head):
		t.Kind = "safetensors"
		err = t.openSafetensors()
	default:
		err = errf(path, "", ErrFormat, "neither an npz archive nor a safetensors file")
	}
	if err == nil {
		err = t.check()
	}
	if err == nil && port && !t.bare {
		t.bare = t.Manifest.noCallTree()
		t.treeless = t.bare
	}
	if err != nil {
		unmapFile(data)
		return nil, err
	}
	return t, nil
}

// readAt reads up to n bytes at off (fewer at the end of the file) without
// touching the mapping.
func (t *Trace) readAt(off, n int64) ([]byte, error) {
	n = max(0, min(n, int64(len(t.data))-off))
	b := make([]byte, n)
	if _, err := t.file.ReadAt(b, off); err != nil && err != io.EOF {
		return nil, &Error{File: t.Path, Err: err}
	}
	return b, nil
}

// check applies the manifest's dtypes and validates it against the entries.
func (t *Trace) check() error {
	m := t.Manifest
	for _, k := range sortedKeys(m.DTypes) {
		e, ok := t.entries[k]
		if !ok {
			continue // validate names it
		}
		want, err := ParseDType(m.DTypes[k])
		if err != nil {
			return errf(t.Path, k, ErrManifest, "dtypes: %v", err)
		}
		switch {
		case e.DType == want:
		case want == BFloat16 && e.DType == Uint16:
			e.DType = BFloat16
		default:
			return errf(t.Path, k, ErrManifest, "manifest says %s but the entry stores %s", want, e.DType)
		}
	}
	if err := m.validate(func(k string) bool { _, ok := t.entries[k]; return ok }); err != nil {
		return &Error{File: t.Path, Entry: ManifestKey, Err: fmt.Errorf("%w: %v", ErrManifest, err)}
	}
	t.tree = newTree(m.Calls)
	return nil
}

// CallKey is the key the format names a call's tensor by:
// s<step>/<module>[#<ordinal>]/<port>, scope "pre" outside the loop.
func CallKey(step *int, module string, ordinal int, port string) string {
	scope := "pre"
	if step != nil {
		scope = "s" + strconv.Itoa(*step)
	}
	if ordinal > 0 {
		module += "#" + strconv.Itoa(ordinal)
	}
	return scope + "/" + module + "/" + port
}

// canonicalAliases maps the format's name of each call tensor to the key
// it is stored under where a writer chose another (a one-pass trace keeps
// "pre/..." keys for calls read as step 0), so readers may ask by the
// format's name.
func canonicalAliases(calls []Call, entries map[string]*entry) map[string]string {
	alias := map[string]string{}
	for _, c := range calls {
		for _, p := range c.Tensors {
			ck := CallKey(c.Step, c.Module, c.Ordinal, p.Name)
			if _, stored := entries[ck]; ck != p.Key && !stored {
				alias[ck] = p.Key
			}
		}
	}
	return alias
}

// entry finds the entry of key, stored under it or under the key a call's
// canonical name aliases.
func (t *Trace) entry(key string) (*entry, bool) {
	if e, ok := t.entries[key]; ok {
		return e, true
	}
	t.aliased.Do(func() {
		if t.Manifest != nil {
			t.alias = canonicalAliases(t.Manifest.Calls, t.entries)
		}
	})
	if k, ok := t.alias[key]; ok {
		e, ok := t.entries[k]
		return e, ok
	}
	return nil, false
}

// add registers a tensor entry, refusing duplicates and size lies.
func (t *Trace) add(e *entry) error {
	if _, dup := t.entries[e.Key]; dup {
		return errf(t.Path, e.Key, ErrFormat, "duplicate entry")
	}
	want, ok := byteSize(e.Shape, e.DType)
	if !ok {
		return errf(t.Path, e.Key, ErrFormat, "shape %v of %s: its size in bytes overflows (no file holds it; the entry holds %d)", e.Shape, e.DType, e.Bytes)
	}
	if want != e.Bytes {
		return errf(t.Path, e.Key, ErrFormat, "shape %v of %s needs %d bytes but the entry holds %d", e.Shape, e.DType, want, e.Bytes)
	}
	t.entries[e.Key] = e
	t.order = append(t.order, e.Key)
	return nil
}

// Close releases the file mapping.
func (t *Trace) Close() error {
	if t.data == nil {
		return nil
	}
	err := unmapFile(t.data)
	t.data = nil
	return err
}

// Size is the file size in bytes.
func (t *Trace) Size() int64 { return int64(len(t.data)) }

// Keys lists the tensor keys in file order (the manifest excluded).
func (t *Trace) Keys() []string { return append([]string(nil), t.order...) }

// Info describes the tensor stored under key.
func (t *Trace) Info(key string) (Info, error) {
	e, ok := t.entry(key)
	if !ok {
		return Info{}, errf(t.Path, key, ErrNotFound, "no such tensor")
	}
	return e.Info, nil
}

// Uint16AsBFloat16 reads every uint16 tensor of the trace as bf16 bit
// patterns, as if the manifest's dtypes named each one bfloat16 (a port
// that wrote bf16 without the dtypes entry), and returns how many it
// changed. Call it before reading; it is not safe concurrently with reads.
func (t *Trace) Uint16AsBFloat16() int {
	n := 0
	for _, e := range t.entries {
		if e.DType == Uint16 {
			e.DType = BFloat16
			n++
		}
	}
	return n
}

// Tree is the call tree.
func (t *Trace) Tree() *Tree { return t.tree }

// Steps lists the distinct sampler steps, ascending.
func (t *Trace) Steps() []int { return t.tree.Steps() }

// Tensor returns the tensor stored under key: a view into the mapping for
// stored data, a decoded copy for a compressed entry.
func (t *Trace) Tensor(key string) (*Tensor, error) {
	e, ok := t.entry(key)
	if !ok {
		return nil, errf(t.Path, key, ErrNotFound, "no such tensor")
	}
	if e.source != nil {
		b, err := e.source.decode(e)
		if err != nil {
			return nil, errf(t.Path, key+".npy", ErrFormat, "%v", err)
		}
		return &Tensor{Info: e.Info, data: b, file: t.Path}, nil
	}
	if e.stored != nil {
		if err := e.stored.check(t.data); err != nil {
			return nil, errf(t.Path, key+".npy", ErrFormat, "%v", err)
		}
	}
	return &Tensor{Info: e.Info, data: t.data[e.offset : e.offset+e.Bytes], view: true, file: t.Path}, nil
}

// Param returns the tensor of a parameter by its name.
func (t *Trace) Param(name string) (*Tensor, error) {
	k, ok := t.Manifest.Params[name]
	if !ok {
		return nil, errf(t.Path, name, ErrNotFound, "no such parameter")
	}
	return t.Tensor(k)
}

// TotalBytes is the sum of all tensors' data sizes.
func (t *Trace) TotalBytes() int64 {
	var n int64
	for _, e := range t.entries {
		n += e.Bytes
	}
	return n
}

// SortedKeys lists the tensor keys sorted by name.
func (t *Trace) SortedKeys() []string {
	k := t.Keys()
	sort.Strings(k)
	return k
}

// numElems is the number of elements of shape: 0 when a dimension is 0,
// -1 when one is negative or the product passes 2^62 (no file holds that
// many).
func numElems(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0
	}
	for _, d := range shape {
		if n > (1<<62)/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// byteSize is the size in bytes of shape's elements of dt; ok is false
// when a dimension is negative or the product overflows int64 (every
// multiplication is checked, so a shape cannot wrap round to a small size).
func byteSize(shape []int, dt DType) (int64, bool) {
	n, s := numElems(shape), int64(dt.Size())
	if n < 0 || s <= 0 || n > math.MaxInt64/s {
		return 0, false
	}
	return n * s, true
}

// SHA256 is the lower-case hex SHA-256 of the trace file (what a document
// made from it records as its source).
func (t *Trace) SHA256() (string, error) {
	f, err := os.Open(t.Path)
	if err != nil {
		return "", fmt.Errorf("trace: hashing %s: %w", t.Path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("trace: hashing %s: %w", t.Path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
