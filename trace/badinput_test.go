package trace

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput: every malformed file gives an error naming the file (and
// the entry, where there is one) and wrapping the right sentinel; none
// panics.
func TestBadInput(t *testing.T) {
	good := func(t *testing.T, dir string) string {
		path := filepath.Join(dir, "good.npz")
		w, _ := Create(path)
		w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
		w.Add("s0/m/out", Float32, []int{2}, f32Bytes(3, 4))
		if err := w.Close(smallManifest()); err != nil {
			t.Fatal(err)
		}
		return path
	}
	withManifest := func(mut func(m *Manifest)) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			m := smallManifest()
			mut(m)
			return writeZip(t, dir, []zipEntry{
				npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2)),
				npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
				npyEntry("s0/m/in", "<f4", []int{2}, f32Bytes(3, 4)),
				manifestEntry(t, m),
			})
		}
	}
	cases := []struct {
		name  string
		make  func(t *testing.T, dir string) string
		kind  error
		entry string // substring the message must hold
	}{
		{"missing file", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope.npz") }, ErrNotFound, "no such file"},
		{"directory", func(t *testing.T, dir string) string { return dir }, ErrFormat, "is a directory"},
		{"empty file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "e.npz")
			os.WriteFile(p, nil, 0o644)
			return p
		}, ErrFormat, "empty file"},
		{"not a trace", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "x.npz")
			os.WriteFile(p, []byte("hello, this is text"), 0o644)
			return p
		}, ErrFormat, "neither an npz"},
		{"truncated archive", func(t *testing.T, dir string) string {
			p := good(t, dir)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)*2/3], 0o644)
			return p
		}, ErrFormat, "not a valid zip"},
		{"corrupt central directory", func(t *testing.T, dir string) string {
			p := good(t, dir)
			b, _ := os.ReadFile(p)
			i := strings.LastIndex(string(b), "PK\x01\x02")
			copy(b[i+28:], []byte{0xFF, 0xFF}) // name length of the last directory record
			os.WriteFile(p, b, 0o644)
			return p
		}, ErrFormat, ""},
		{"npy header lies about shape", func(t *testing.T, dir string) string {
			m := smallManifest()
			return writeZip(t, dir, []zipEntry{
				npyEntry("param/w", "<f4", []int{100}, f32Bytes(1, 2)),
				npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
				manifestEntry(t, m),
			})
		}, ErrFormat, `entry "param/w"`},
		{"npy header length past the entry", func(t *testing.T, dir string) string {
			e := npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2))
			e.data[8], e.data[9] = 0xFF, 0x7F
			return writeZip(t, dir, []zipEntry{e, manifestEntry(t, smallManifest())})
		}, ErrFormat, "exceeds the entry"},
		{"bad npy magic", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{{name: "param/w.npy", data: []byte("garbage garbage garbage")}})
		}, ErrFormat, "bad magic"},
		{"big-endian dtype", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{npyEntry("param/w", ">f4", []int{2}, f32Bytes(1, 2))})
		}, ErrFormat, "big-endian"},
		{"fortran order", func(t *testing.T, dir string) string {
			e := npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2))
			s := strings.Replace(string(e.data), "False", "True ", 1)
			return writeZip(t, dir, []zipEntry{{name: e.name, data: []byte(s)}})
		}, ErrFormat, "fortran"},
		{"entry that is not npy", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{{name: "readme.txt", data: []byte("hi")}})
		}, ErrFormat, "readme.txt"},
		{"no manifest", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2))})
		}, ErrManifest, "no manifest"},
		{"manifest not JSON", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{npyEntry(ManifestKey, "|u1", []int{3}, []byte("{{{"))})
		}, ErrManifest, "not valid JSON"},
		{"manifest wrong version", withManifest(func(m *Manifest) { m.Version = 7 }), ErrManifest, "version 7"},
		{"manifest names a missing key", withManifest(func(m *Manifest) { m.Inputs["x"] = "input/x" }), ErrManifest, `"input/x"`},
		{"port names a missing key", withManifest(func(m *Manifest) {
			m.Calls[0].Tensors = append(m.Calls[0].Tensors, Port{"arg0", "s0/m/arg0"})
		}), ErrManifest, "s0/m/arg0"},
		{"cycle in parent", withManifest(func(m *Manifest) {
			m.Calls = append(m.Calls, Call{ID: 1, Module: "a", Parent: intp(2)}, Call{ID: 2, Module: "b", Parent: intp(1)})
		}), ErrManifest, "cycle"},
		{"self parent", withManifest(func(m *Manifest) { m.Calls[0].Parent = intp(0) }), ErrManifest, "cycle"},
		{"parent missing", withManifest(func(m *Manifest) { m.Calls[0].Parent = intp(9) }), ErrManifest, "parent 9 does not exist"},
		{"parent after child", withManifest(func(m *Manifest) {
			m.Calls[0].Parent = intp(1)
			m.Calls = append(m.Calls, Call{ID: 1, Module: "p"})
		}), ErrManifest, "listed after"},
		{"duplicate id", withManifest(func(m *Manifest) { m.Calls = append(m.Calls, m.Calls[0]) }), ErrManifest, "twice"},
		{"unknown param", withManifest(func(m *Manifest) { m.Calls[0].Params = []string{"zz"} }), ErrManifest, `"zz"`},
		{"dtype disagrees", withManifest(func(m *Manifest) { m.DTypes = map[string]string{"param/w": "bfloat16"} }), ErrManifest, "manifest says bfloat16"},
		{"bf16 with an odd byte count", func(t *testing.T, dir string) string {
			m := smallManifest()
			m.DTypes = map[string]string{"param/w": "bfloat16"}
			e := npyEntry("param/w", "<u2", []int{2}, []byte{1, 2, 3})
			return writeZip(t, dir, []zipEntry{e, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, m)})
		}, ErrFormat, "needs 4 bytes but the entry holds 3"},
		{"deflated size lie", func(t *testing.T, dir string) string {
			e := npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2))
			e.deflate = true
			p := writeZip(t, dir, []zipEntry{e, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, smallManifest())})
			b, _ := os.ReadFile(p)
			// Raise the uncompressed size in the central directory record.
			i := strings.Index(string(b), "PK\x01\x02")
			b[i+24], b[i+25], b[i+26] = 0xFF, 0xFF, 0xFF
			os.WriteFile(p, b, 0o644)
			return p
		}, ErrFormat, `"param/w.npy"`},
		{"safetensors header past the end", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "s.safetensors")
			os.WriteFile(p, []byte{0xF0, 0, 0, 0, 0, 0, 0, 0, '{', '}'}, 0o644)
			return p
		}, ErrFormat, "past the end"},
		{"safetensors offsets past the end", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "s.safetensors")
			hdr := `{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`
			b := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
			os.WriteFile(p, append(b, 1, 2, 3, 4), 0o644)
			return p
		}, ErrFormat, `entry "a"`},
		// issue 12, item 6: 2^31 · 2^31 f32 elements are 2^64 bytes, which
		// wrapped to 0 in int64 and matched an empty entry.
		{"npz shape whose byte size wraps", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{
				npyEntry("param/w", "<f4", []int{1 << 31, 1 << 31}, nil),
				npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
				manifestEntry(t, smallManifest()),
			})
		}, ErrFormat, `entry "param/w": malformed trace: shape [2147483648 2147483648] of float32: its size in bytes overflows`},
		{"npz shape of 2^63 elements", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{
				npyEntry("param/w", "|u1", []int{1 << 32, 1 << 31}, f32Bytes(1, 2)),
				npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
				manifestEntry(t, smallManifest()),
			})
		}, ErrFormat, "overflows"},
		{"safetensors shape whose byte size wraps", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "s.safetensors")
			hdr := `{"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}}`
			b := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
			os.WriteFile(p, append(b, 1, 2, 3, 4), 0o644)
			return p
		}, ErrFormat, `entry "a": malformed trace: shape [2147483648 2147483648] of float32: its size in bytes overflows`},
		// issue 12, item 14: what the readers of record refuse.
		{"data after the manifest JSON", rawManifest(func(b []byte) []byte { return append(b, []byte(` {"format": "x"}`)...) }),
			ErrManifest, "data after its JSON value"},
		{"a duplicate key in the manifest", rawManifest(func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"version":1`, `"version":1,"version":1`, 1))
		}), ErrManifest, `key "version" appears twice`},
		{"a duplicate key deep in the manifest", rawManifest(func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"module":"m"`, `"module":"m","module":"evil"`, 1))
		}), ErrManifest, `key "module" appears twice`},
		{"a second manifest entry", func(t *testing.T, dir string) string {
			return writeZip(t, dir, []zipEntry{
				npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2)),
				npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
				manifestEntry(t, smallManifest()),
				manifestEntry(t, smallManifest()),
			})
		}, ErrManifest, "a second manifest entry"},
		{"safetensors bytes after the last tensor", safetensorsWith(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8),
			ErrFormat, "data bytes [4, 8) at the end belong to no tensor"},
		{"safetensors bytes between tensors", safetensorsWith(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 12),
			ErrFormat, `entry "b": malformed trace: data bytes [4, 8) before it belong to no tensor`},
		{"safetensors duplicate key", safetensorsWith(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4),
			ErrFormat, `key "a" appears twice`},
		{"safetensors without manifest", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "s.safetensors")
			hdr := `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
			b := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
			os.WriteFile(p, append(b, 1, 2, 3, 4), 0o644)
			return p
		}, ErrManifest, "manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.make(t, t.TempDir())
			tr, err := Open(path)
			if err == nil {
				tr.Close()
				t.Fatal("opened without error")
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %q does not wrap %v", err, tc.kind)
			}
			var te *Error
			if !errors.As(err, &te) || te.File != path {
				t.Errorf("error %q does not name the file", err)
			}
			if !strings.Contains(err.Error(), tc.entry) {
				t.Errorf("error %q does not mention %q", err, tc.entry)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// rawManifest writes the small trace with its manifest's JSON bytes edited.
func rawManifest(edit func(b []byte) []byte) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		b, err := json.Marshal(smallManifest())
		if err != nil {
			t.Fatal(err)
		}
		b = edit(b)
		return writeZip(t, dir, []zipEntry{
			npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2)),
			npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
			npyEntry(ManifestKey, "|u1", []int{len(b)}, b),
		})
	}
}

// safetensorsWith writes a safetensors file of header hdr and n data bytes.
func safetensorsWith(hdr string, n int) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "s.safetensors")
		b := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
		os.WriteFile(p, append(b, make([]byte, n)...), 0o644)
		return p
	}
}

// TestDeflatedCorruptionIsCaughtOnRead: a deflated entry whose data is
// damaged after a valid header opens, and fails (not panics) on read.
func TestDeflatedCorruptionIsCaughtOnRead(t *testing.T) {
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i % 251)
	}
	e := npyEntry("param/w", "|u1", []int{len(data)}, data)
	e.deflate = true
	m := smallManifest()
	p := writeZip(t, t.TempDir(), []zipEntry{e, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, m)})
	b, _ := os.ReadFile(p)
	// Flip bytes late in the compressed stream of the first entry.
	i := strings.Index(string(b), "PK\x03\x04") + 30 + len("param/w.npy") + 200
	for j := 0; j < 8; j++ {
		b[i+j] ^= 0x5A
	}
	os.WriteFile(p, b, 0o644)
	tr, err := Open(p)
	if err != nil {
		return // caught already at open: also fine
	}
	defer tr.Close()
	if _, err := tr.Tensor("param/w"); err == nil {
		t.Fatal("corrupt deflated data read without error")
	} else if !errors.Is(err, ErrFormat) {
		t.Errorf("want ErrFormat, got %v", err)
	}
}

// TestReadStaysInsideTheEntry: issue 12, item 6: a tensor whose shape
// claims more values than its data holds reads none past the data (the
// next entry's bytes), whatever the header says.
func TestReadStaysInsideTheEntry(t *testing.T) {
	next := f32Bytes(1, 2, 3, 4)
	ten := &Tensor{Info: Info{Key: "k", DType: Float32, Shape: []int{4}, Bytes: 16}, data: next[:8], file: "f.npz"}
	for _, c := range []struct {
		n    int
		from int64
		ok   bool
	}{{2, 0, true}, {1, 1, true}, {4, 0, false}, {1, 2, false}, {1, -1, false}, {0, 3, false}} {
		err := ten.ReadFloat32(make([]float32, c.n), c.from)
		if (err == nil) != c.ok {
			t.Errorf("%d values from %d: %v, want ok %v", c.n, c.from, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"k"`)) {
			t.Errorf("%d values from %d: %v", c.n, c.from, err)
		}
	}
}

// TestStoredCRC: issue 12, item 9. A flipped byte in a stored entry's
// data opens (the data are not read at open) and is refused on the first
// read of the entry, naming it; a flipped byte in the stored manifest is
// refused at open. The other entries still read.
func TestStoredCRC(t *testing.T) {
	entries := func() []zipEntry {
		return []zipEntry{
			npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2)),
			npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
			manifestEntry(t, smallManifest()),
		}
	}
	flip := func(t *testing.T, p string, at func(b []byte) int) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[at(b)] ^= 0x01
		os.WriteFile(p, b, 0o644)
	}
	p := writeZip(t, t.TempDir(), entries())
	// the first data byte of param/w, the first entry: past its npy header
	flip(t, p, func(b []byte) int {
		i := strings.Index(string(b), "\x93NUMPY")
		return i + 10 + int(b[i+8]) + int(b[i+9])<<8
	})
	tr, err := Open(p)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer tr.Close()
	for range 2 { // the first read checks; a later one gives the same error
		_, err = tr.Tensor("param/w")
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `entry "param/w.npy"`) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Errorf("flipped data byte: %v", err)
		}
	}
	if x, err := tr.Tensor("s0/m/out"); err != nil || len(x.Bytes()) != 8 {
		t.Errorf("the intact entry: %v", err)
	}

	p = writeZip(t, t.TempDir(), entries())
	flip(t, p, func(b []byte) int { return strings.Index(string(b), `"zflow-trace"`) + 3 })
	if _, err := Open(p); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "__zflow__.npy") || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("flipped manifest byte: %v", err)
	}

	// A deflated manifest is decoded as it is read; its checksum is still
	// checked (at the stream's end) and named, not read as bad JSON.
	// (Padded past what open reads of each entry's header, so that the
	// manifest's own reader is what meets the end.)
	m := smallManifest()
	m.Producer = map[string]any{"pad": strings.Repeat("x", 1<<18)}
	me := manifestEntry(t, m)
	me.deflate = true
	p = writeZip(t, t.TempDir(), append(entries()[:2], me))
	if tr, err := Open(p); err != nil {
		t.Errorf("the intact deflated manifest: %v", err)
	} else {
		tr.Close()
	}
	raw, _ := os.ReadFile(p)
	last := strings.LastIndex(string(raw), "PK\x01\x02") // the manifest's central-directory record
	raw[last+16] ^= 0x01                                 // its CRC-32
	os.WriteFile(p, raw, 0o644)
	if _, err := Open(p); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "__zflow__.npy") || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("deflated manifest with a wrong CRC: %v", err)
	}
}

// TestDecodeBudget: issue 12, item 8. Deflated entries that declare more
// decoded bytes, together, than the budget are refused at open, before
// anything is decoded; entries whose data overlap (two names on one
// stream, a bomb's multiplier) are refused whatever their method.
func TestDecodeBudget(t *testing.T) {
	zeros := npyEntry("param/w", "|u1", []int{1 << 16}, make([]byte, 1<<16))
	zeros.deflate = true
	p := writeZip(t, t.TempDir(), []zipEntry{zeros, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, smallManifest())})
	for _, c := range []struct {
		budget int64
		ok     bool
	}{{0, true}, {1 << 20, true}, {1 << 16, false}, {1000, false}} {
		tr, err := OpenWith(p, Options{MaxDecoded: c.budget})
		if err == nil {
			tr.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("budget %d: %v, want ok %v", c.budget, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"param/w.npy"`) || !strings.Contains(err.Error(), "--max-decoded")) {
			t.Errorf("budget %d: %v", c.budget, err)
		}
	}
	if _, err := OpenWith(p, Options{MaxDecoded: -1}); err == nil {
		t.Errorf("a negative budget was accepted")
	}
	// The budget is the open's own: a small one does not outlive it.
	if _, err := OpenWith(p, Options{MaxDecoded: 1000}); err == nil {
		t.Fatalf("budget 1000 accepted the 64 KiB entry")
	}
	if tr, err := Open(p); err != nil {
		t.Errorf("after a small budget's open, the default: %v", err)
	} else {
		tr.Close()
	}
	if got := DecodedBudget(1 << 20); got != 1<<30 {
		t.Errorf("DecodedBudget(1 MiB) = %d, want the 1 GiB floor", got)
	}
	if got := DecodedBudget(1 << 30); got != 64<<30 {
		t.Errorf("DecodedBudget(1 GiB) = %d, want 64 GiB", got)
	}

	// Two central-directory records on one local entry.
	for _, deflate := range []bool{false, true} {
		a := npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2))
		a.deflate = deflate
		b := a
		b.name = "param/v.npy"
		p = writeZip(t, t.TempDir(), []zipEntry{a, b, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, smallManifest())})
		raw, _ := os.ReadFile(p)
		first := strings.Index(string(raw), "PK\x01\x02")
		second := first + 1 + strings.Index(string(raw[first+1:]), "PK\x01\x02")
		copy(raw[second+42:second+46], raw[first+42:first+46]) // the second record's local header offset := the first's
		os.WriteFile(p, raw, 0o644)
		if _, err := Open(p); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "overlap") {
			t.Errorf("deflate %v: overlapping entries: %v", deflate, err)
		}
	}
}
