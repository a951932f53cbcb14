// Command hostile writes the hostile traces of issue 12 and, beside each,
// a normal trace of the same size, so that BENCHMARKS.md's time and peak
// RSS of reading them can be measured again:
//
//	go run ./bench/hostile -o /tmp/hostile
//
// deep.npz      10^4 calls, each the parent of the next (a 10^4-deep tree)
// flat.npz      10^4 calls, each a child of the first (the same manifest size)
// bomb.npz      a call's uint8 output: an entry of 1 GiB of zeros, deflated (about 1 MiB)
// bomb4.npz     the same with 4 GiB (over the default budget: refused)
// overlap.npz   16 central-directory names on one deflated 32 MiB stream
// stored.npz    the normal 1 GiB: the same entry, stored
// calls1e6.npz  10^6 calls (one port each, all on one tensor), the manifest deflated
// calls1e4.npz  a normal trace of the same file size: 10^4 calls, each with its own tensor
//
// Every file is valid but for overlap.npz (and bomb4.npz is valid only
// under --max-decoded 5000000000); each opens as the issue describes.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", os.TempDir(), "output folder")
	only := flag.String("only", "", "comma-separated file names to write (default: all)")
	flag.Parse()
	want := func(name string) bool {
		return *only == "" || strings.Contains(","+*only+",", ","+name+",")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	steps := []struct {
		name string
		fn   func(string) error
	}{
		{"deep.npz", func(p string) error { return tree(p, 10_000, true) }},
		{"flat.npz", func(p string) error { return tree(p, 10_000, false) }},
		{"bomb.npz", func(p string) error { return zeros(p, 1<<30, true, 1) }},
		{"bomb4.npz", func(p string) error { return zeros(p, 4<<30, true, 1) }},
		{"overlap.npz", func(p string) error { return zeros(p, 32<<20, true, 16) }},
		{"stored.npz", func(p string) error { return zeros(p, 1<<30, false, 1) }},
		{"calls1e6.npz", func(p string) error { return manyCalls(p, 1_000_000) }},
		{"calls1e4.npz", func(p string) error { return paddedCalls(p, 10_000, filepath.Join(filepath.Dir(p), "calls1e6.npz")) }},
	}
	for _, s := range steps {
		if !want(s.name) {
			continue
		}
		p := filepath.Join(*out, s.name)
		if err := s.fn(p); err != nil {
			fail(fmt.Errorf("%s: %w", p, err))
		}
		st, _ := os.Stat(p)
		fmt.Printf("%s  %d bytes\n", p, st.Size())
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "hostile:", err)
	os.Exit(1)
}

// npyHeader is a version 1.0 .npy header for a C-ordered array.
func npyHeader(descr string, shape []int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	pad := (64 - (10+len(dict)+1)%64) % 64
	dict += strings.Repeat(" ", pad) + "\n"
	h := make([]byte, 10, 10+len(dict))
	copy(h, "\x93NUMPY\x01\x00")
	binary.LittleEndian.PutUint16(h[8:], uint16(len(dict)))
	return append(h, dict...)
}

// manifest is the JSON of a trace manifest (the parts these files use).
type manifest struct {
	Format   string            `json:"format"`
	Version  int               `json:"version"`
	Producer map[string]any    `json:"producer"`
	DTypes   map[string]string `json:"dtypes"`
	Params   map[string]string `json:"params"`
	Inputs   map[string]string `json:"inputs"`
	Outputs  map[string]string `json:"outputs"`
	Calls    []call            `json:"calls"`
}

type call struct {
	ID      int               `json:"id"`
	Step    int               `json:"step"`
	Module  string            `json:"module"`
	Ordinal int               `json:"ordinal"`
	Parent  *int              `json:"parent"`
	Type    string            `json:"type"`
	Params  []string          `json:"params"`
	Tensors map[string]string `json:"tensors"`
}

func newManifest() *manifest {
	return &manifest{Format: "zflow-trace", Version: 1, Producer: map[string]any{"framework": "bench/hostile"},
		DTypes: map[string]string{}, Params: map[string]string{}, Inputs: map[string]string{}, Outputs: map[string]string{}}
}

// archive writes entries (name → npy bytes, in order) and the manifest;
// deflate picks the method of each entry by name.
type archive struct {
	zw *zip.Writer
	f  *os.File
}

func create(path string) (*archive, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &archive{zw: zip.NewWriter(f), f: f}, nil
}

func (a *archive) add(name string, deflate bool, parts ...[]byte) error {
	method := zip.Store
	if deflate {
		method = zip.Deflate
	}
	w, err := a.zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: method})
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (a *archive) close(m *manifest, deflate bool) error {
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := a.add("__zflow__", deflate, npyHeader("|u1", []int{len(doc)}), doc); err != nil {
		return err
	}
	if err := a.zw.Close(); err != nil {
		return err
	}
	return a.f.Close()
}

// tree writes n calls on one small tensor: nested (each call the parent
// of the next) or flat (each a child of call 0).
func tree(path string, n int, nested bool) error {
	a, err := create(path)
	if err != nil {
		return err
	}
	const key = "s0/m/out"
	if err := a.add(key, false, npyHeader("<f4", []int{4}), make([]byte, 16)); err != nil {
		return err
	}
	m := newManifest()
	for i := range n {
		c := call{ID: i, Module: "m" + strconv.Itoa(i), Type: "Module", Params: []string{}, Tensors: map[string]string{}}
		switch {
		case i == 0:
			c.Module, c.Tensors = "m", map[string]string{"out": key}
		case nested:
			c.Parent = intp(i - 1)
		default:
			c.Parent = intp(0)
		}
		m.Calls = append(m.Calls, c)
	}
	return a.close(m, false)
}

func intp(i int) *int { return &i }

// zeros writes a uint8 parameter of size zero bytes, deflated or stored;
// names > 1 adds that many central-directory records of the one entry
// (overlapping entries: each name decodes the whole stream).
func zeros(path string, size int64, deflate bool, names int) error {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if names == 1 {
		a := &archive{zw: zw}
		if err := writeZeros(a, "s0/m/out", size, deflate); err != nil {
			return err
		}
		m := newManifest()
		m.Calls = []call{{ID: 0, Module: "m", Type: "Module", Params: []string{}, Tensors: map[string]string{"out": "s0/m/out"}}}
		doc, _ := json.Marshal(m)
		if err := a.add("__zflow__", false, npyHeader("|u1", []int{len(doc)}), doc); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		return os.WriteFile(path, buf.Bytes(), 0o644)
	}
	// Overlap: write the one entry, then copy its central record names-1
	// times under other names, all pointing at the same local header.
	a := &archive{zw: zw}
	if err := writeZeros(a, "param/w0", size, deflate); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	raw := buf.Bytes()
	cd := bytes.Index(raw, []byte("PK\x01\x02"))
	eocd := bytes.LastIndex(raw, []byte("PK\x05\x06"))
	rec := raw[cd:eocd]
	var out bytes.Buffer
	out.Write(raw[:cd])
	for i := range names {
		r := bytes.Clone(rec)
		name := fmt.Sprintf("param/w%x.npy", i%16) // same length as param/w0.npy
		copy(r[46:], name)
		out.Write(r)
	}
	end := bytes.Clone(raw[eocd:])
	binary.LittleEndian.PutUint16(end[8:], uint16(names))
	binary.LittleEndian.PutUint16(end[10:], uint16(names))
	binary.LittleEndian.PutUint32(end[12:], uint32(names*len(rec)))
	binary.LittleEndian.PutUint32(end[16:], uint32(cd))
	out.Write(end)
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// writeZeros writes an entry of size bytes in all, its npy header included
// (so that 1 GiB is exactly the default decode budget's floor).
func writeZeros(a *archive, key string, size int64, deflate bool) error {
	h := npyHeader("|u1", []int{int(size) - 128})
	if len(h) != 128 {
		return fmt.Errorf("npy header of %d bytes, want 128", len(h))
	}
	size -= 128
	method := zip.Store
	if deflate {
		method = zip.Deflate
	}
	w, err := a.zw.CreateHeader(&zip.FileHeader{Name: key + ".npy", Method: method})
	if err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	_, err = io.CopyN(w, zeroReader{}, size)
	return err
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// manyCalls writes n flat calls, each with one port on one shared tensor,
// the manifest deflated (10^6 calls: a few MB on disk).
func manyCalls(path string, n int) error {
	a, err := create(path)
	if err != nil {
		return err
	}
	const key = "s0/m/out"
	if err := a.add(key, false, npyHeader("<f4", []int{4}), make([]byte, 16)); err != nil {
		return err
	}
	m := newManifest()
	for i := range n {
		c := call{ID: i, Module: "m." + strconv.Itoa(i), Type: "Module", Params: []string{}, Tensors: map[string]string{"out": key}}
		if i > 0 {
			c.Parent = intp(0)
		}
		m.Calls = append(m.Calls, c)
	}
	return a.close(m, true)
}

// paddedCalls writes n calls, each with its own f32 tensor, the tensors
// sized so that the file is as large as the one at like.
func paddedCalls(path string, n int, like string) error {
	st, err := os.Stat(like)
	if err != nil {
		return fmt.Errorf("the file to match (write it first): %w", err)
	}
	per := max(1, (int(st.Size())/n-400)/4) // f32 values per tensor, less its headers and its call's JSON
	a, err := create(path)
	if err != nil {
		return err
	}
	m := newManifest()
	data := make([]byte, 4*per)
	for i := range data {
		data[i] = byte(i * 7)
	}
	hdr := npyHeader("<f4", []int{per})
	for i := range n {
		mod := "m." + strconv.Itoa(i)
		key := "s0/" + mod + "/out"
		if err := a.add(key, false, hdr, data); err != nil {
			return err
		}
		c := call{ID: i, Module: mod, Type: "Module", Params: []string{}, Tensors: map[string]string{"out": key}}
		if i > 0 {
			c.Parent = intp(0)
		}
		m.Calls = append(m.Calls, c)
	}
	return a.close(m, false)
}
