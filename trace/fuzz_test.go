package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
		// streamed, as diff and stats read a deflated entry
		if v, err := tr.Values(k); err == nil {
			buf := make([]float32, 3)
			for from := int64(0); from+3 <= v.Scalars() && from < 64; from += 3 {
				if v.ReadFloat32(buf, from) != nil {
					break
				}
			}
		}
	}
	tr.Tree().Select(Filter{Module: "*", MaxDepth: 2})
}

// seedTrace returns a small valid trace of the given kind as bytes.
func seedTrace(f testing.TB, file string, deflate bool) []byte {
	return seedTraceOf(f, file, deflate, smallManifest())
}

// deepManifest is smallManifest with n-1 more calls, each the child of
// the one before (a tree n deep).
func deepManifest(n int) *Manifest {
	m := smallManifest()
	for i := 1; i < n; i++ {
		m.Calls = append(m.Calls, Call{ID: i, Step: intp(0), Module: "m", Ordinal: i, Parent: intp(i - 1)})
	}
	return m
}

// overlapNpz is a trace whose central directory names one local entry
// twice (param/w and param/v on one stream).
func overlapNpz(f testing.TB, deflate bool) []byte {
	a := npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2))
	a.deflate = deflate
	b := a
	b.name = "param/v.npy"
	p := writeZip(f, f.TempDir(), []zipEntry{a, b, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(f, smallManifest())})
	raw, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	first := bytes.Index(raw, []byte("PK\x01\x02"))
	second := first + 1 + bytes.Index(raw[first+1:], []byte("PK\x01\x02"))
	copy(raw[second+42:second+46], raw[first+42:first+46])
	return raw
}

// seedTraceOf is seedTrace with manifest m.
func seedTraceOf(f testing.TB, file string, deflate bool, m *Manifest) []byte {
	path := filepath.Join(f.TempDir(), file)
	w, err := Create(path)
	if err != nil {
		f.Fatal(err)
	}
	w.Deflate = deflate
	w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
	w.Add("s0/m/out", Float32, []int{2}, f32Bytes(3, 4))
	w.Add("b", BFloat16, []int{2, 1}, []byte{1, 2, 3, 4})
	if err := w.Close(m); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// wrappedNpz is a trace whose param/w claims 2^62 f32 elements in no bytes.
func wrappedNpz(f testing.TB) []byte {
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
	crc := seedTrace(f, "e.npz", true) // a deflated entry's CRC-32 flipped in the central directory
	cd := bytes.Index(crc, []byte("PK\x01\x02"))
	crc[cd+16] ^= 1
	f.Add(crc)
	f.Add(seedTraceOf(f, "deep.npz", false, deepManifest(300))) // a deep call tree
	f.Add(overlapNpz(f, false))                                 // two names on one stored entry
	f.Add(overlapNpz(f, true))                                  // two names on one deflated stream
	f.Fuzz(func(t *testing.T, b []byte) { openAndReadAll(t, "f.npz", b) })
}

func FuzzOpenSafetensors(f *testing.F) {
	f.Add(seedTrace(f, "s.safetensors", false))
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	hdr := `{"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}}`
	f.Add(append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...))
	f.Add(seedTraceOf(f, "deep.safetensors", false, deepManifest(300))) // a deep call tree
	over := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	f.Add(append(append([]byte{byte(len(over)), 0, 0, 0, 0, 0, 0, 0}, over...), make([]byte, 8)...)) // overlapping data
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
		m, err := parseManifest(bytes.NewReader(b))
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

// TestFuzzSeedsReachChecks: the hostile seeds of FuzzOpenNpz and
// FuzzOpenSafetensors are each refused by the check they are there for
// (so the fuzzers start at those checks), and the deep tree opens.
func TestFuzzSeedsReachChecks(t *testing.T) {
	crc := seedTrace(t, "e.npz", true)
	cd := bytes.Index(crc, []byte("PK\x01\x02"))
	crc[cd+16] ^= 1
	over := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	for _, c := range []struct {
		name, file string
		b          []byte
		want       string // "" opens
	}{
		{"wrapped shape", "w.npz", wrappedNpz(t), "overflows"},
		{"deflated CRC flip", "e.npz", crc, "checksum"},
		{"overlap, stored", "o.npz", overlapNpz(t, false), "overlap"},
		{"overlap, deflated", "o.npz", overlapNpz(t, true), "overlap"},
		{"overlap, safetensors", "o.safetensors", append(append([]byte{byte(len(over)), 0, 0, 0, 0, 0, 0, 0}, over...), make([]byte, 8)...), "overlap"},
		{"deep tree", "deep.npz", seedTraceOf(t, "deep.npz", false, deepManifest(300)), ""},
		{"deep tree, safetensors", "deep.safetensors", seedTraceOf(t, "deep.safetensors", false, deepManifest(300)), ""},
	} {
		p := filepath.Join(t.TempDir(), c.file)
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		tr, err := Open(p)
		if err == nil && c.want != "" {
			// the CRC of a deflated entry is checked as it is read
			_, err = tr.Tensor("param/w")
			if err == nil {
				_, err = tr.Tensor("b")
			}
			tr.Close()
		} else if err == nil {
			if d := tr.Tree().Depth(299); d != 299 {
				t.Errorf("%s: depth %d", c.name, d)
			}
			tr.Close()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
