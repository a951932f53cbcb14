package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// openAndReadAll opens b as a trace file and, if that works, reads every
// tensor as bytes and as float32: nothing may panic.
func openAndReadAll(t *testing.T, name string, b []byte) {
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(path)
	if err != nil {
		return
	}
	defer tr.Close()
	for _, k := range tr.Keys() {
		ten, err := tr.Tensor(k)
		if err != nil {
			continue
		}
		ten.Float32()
		ten.Float64()
	}
	tr.Tree().Select(Filter{Module: "*", MaxDepth: 2})
}

// seedTrace returns a small valid trace of the given kind as bytes.
func seedTrace(f *testing.F, file string, deflate bool) []byte {
	path := filepath.Join(f.TempDir(), file)
	w, err := Create(path)
	if err != nil {
		f.Fatal(err)
	}
	w.Deflate = deflate
	w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
	w.Add("s0/m/out", Float32, []int{2}, f32Bytes(3, 4))
	w.Add("b", BFloat16, []int{2, 1}, []byte{1, 2, 3, 4})
	if err := w.Close(smallManifest()); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// wrappedNpz is a trace whose param/w claims 2^62 f32 elements in no bytes.
func wrappedNpz(f *testing.F) []byte {
	p := writeZip(f, f.TempDir(), []zipEntry{
		npyEntry("param/w", "<f4", []int{1 << 31, 1 << 31}, nil),
		npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
		manifestEntry(f, smallManifest()),
	})
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func FuzzOpenNpz(f *testing.F) {
	f.Add(seedTrace(f, "s.npz", false))
	f.Add(seedTrace(f, "d.npz", true))
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Add(wrappedNpz(f))                    // a shape whose byte size wraps past 2^64
	flipped := seedTrace(f, "c.npz", false) // a stored data byte flipped: the CRC catches it
	i := bytes.Index(flipped, []byte("\x93NUMPY"))
	flipped[i+10+int(flipped[i+8])+int(flipped[i+9])<<8] ^= 1
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, b []byte) { openAndReadAll(t, "f.npz", b) })
}

func FuzzOpenSafetensors(f *testing.F) {
	f.Add(seedTrace(f, "s.safetensors", false))
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	hdr := `{"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}}`
	f.Add(append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...))
	f.Fuzz(func(t *testing.T, b []byte) { openAndReadAll(t, "f.safetensors", b) })
}

func FuzzNpyHeader(f *testing.F) {
	f.Add(encodeNpyHeader("<f4", []int{2, 3}))
	f.Add(encodeNpyHeader("|b1", []int{}))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape': (1,), }"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseNpyHeader(b, int64(len(b)))
		if err != nil {
			return
		}
		if h.size > len(b) {
			t.Fatalf("header size %d beyond %d input bytes", h.size, len(b))
		}
		for _, d := range h.shape {
			if d < 0 {
				t.Fatalf("negative dimension in %v", h.shape)
			}
		}
	})
}

// FuzzManifest: the manifest parser and validator on any bytes, against a
// trace holding the keys smallManifest names: no panic, and a manifest
// that validates builds a tree whose every call has a depth.
func FuzzManifest(f *testing.F) {
	b, _ := json.Marshal(smallManifest())
	f.Add(b)
	deep := smallManifest()
	for i := 1; i < 200; i++ {
		deep.Calls = append(deep.Calls, Call{ID: i, Step: intp(0), Module: "m", Parent: intp(i - 1)})
	}
	b, _ = json.Marshal(deep)
	f.Add(b)
	f.Add([]byte(`{"format":"zflow-trace","version":1,"calls":[{"id":0,"parent":0}]}`))
	f.Add([]byte(`{"format":"zflow-trace","version":1,"version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest(b)
		if err != nil {
			return
		}
		has := func(k string) bool { return k == "param/w" || k == "s0/m/out" }
		if m.validate(has) != nil {
			return
		}
		tree := newTree(m.Calls)
		for _, c := range m.Calls {
			if d := tree.Depth(c.ID); d < 0 || d >= len(m.Calls) {
				t.Fatalf("call %d: depth %d of %d calls", c.ID, d, len(m.Calls))
			}
		}
	})
}
