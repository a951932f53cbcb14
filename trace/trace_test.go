package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// allDTypes is one tensor of every dtype, for round trips.
func allDTypes() []struct {
	key   string
	dt    DType
	shape []int
	data  []byte
} {
	type tc = struct {
		key   string
		dt    DType
		shape []int
		data  []byte
	}
	var out []tc
	for d := Bool; d <= Float64; d++ {
		n := 3 * 5
		data := make([]byte, n*d.Size())
		for i := range data {
			data[i] = byte(i*7 + int(d))
		}
		if d == Bool {
			for i := range data {
				data[i] &= 1
			}
		}
		out = append(out, tc{"t/" + d.String(), d, []int{3, 5}, data})
	}
	out = append(out, tc{"t/scalar", Float32, []int{}, f32Bytes(2.5)}, tc{"t/empty", Float32, []int{0, 4}, nil})
	return out
}

func TestRoundTripAllContainers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		deflate bool
	}{
		{"npz stored", "a.npz", false},
		{"npz deflated", "b.npz", true},
		{"safetensors", "c.safetensors", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			w, err := Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w.Deflate = tc.deflate
			m := smallManifest()
			w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
			w.Add("s0/m/out", Float32, []int{2}, f32Bytes(3, 4))
			for _, x := range allDTypes() {
				if err := w.Add(x.key, x.dt, x.shape, x.data); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(m); err != nil {
				t.Fatal(err)
			}
			tr, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			for _, x := range allDTypes() {
				in, err := tr.Info(x.key)
				if err != nil {
					t.Fatal(err)
				}
				if in.DType != x.dt || !slices.Equal(in.Shape, x.shape) || in.Compressed != tc.deflate {
					t.Errorf("%s: got %v %v compressed=%v", x.key, in.DType, in.Shape, in.Compressed)
				}
				ten, err := tr.Tensor(x.key)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(ten.Bytes(), x.data) {
					t.Errorf("%s: bytes differ", x.key)
				}
			}
			if got := tr.Manifest.DTypes["t/bfloat16"]; got != "bfloat16" {
				t.Errorf("bf16 not named in dtypes: %q", got)
			}
			if c := tr.Manifest.Calls[0]; c.Module != "m" || c.Tensors[0].Key != "s0/m/out" {
				t.Errorf("calls did not round-trip: %+v", c)
			}
		})
	}
}

func TestStoredF32IsAlignedView(t *testing.T) {
	for _, file := range []string{"v.npz", "v.safetensors"} {
		path := filepath.Join(t.TempDir(), file)
		w, _ := Create(path)
		w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
		w.Add("s0/m/out", Float32, []int{3}, f32Bytes(3, 4, 5))
		if err := w.Close(smallManifest()); err != nil {
			t.Fatal(err)
		}
		tr, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ten, _ := tr.Tensor("s0/m/out")
		v, ok := ten.Float32View()
		if !ok || !ten.IsView() {
			t.Fatalf("%s: stored f32 is not a view (ok=%v view=%v)", file, ok, ten.IsView())
		}
		start := uintptr(unsafe.Pointer(&tr.data[0]))
		p := uintptr(unsafe.Pointer(&v[0]))
		if p < start || p >= start+uintptr(len(tr.data)) {
			t.Errorf("%s: view does not point into the mapping", file)
		}
		if !slices.Equal(v, []float32{3, 4, 5}) {
			t.Errorf("%s: got %v", file, v)
		}
		tr.Close()
	}
}

func TestWriterLeavesNothingOnAbortOrBadManifest(t *testing.T) {
	dir := t.TempDir()
	w, _ := Create(filepath.Join(dir, "x.npz"))
	w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
	// The manifest names s0/m/out, which was never added.
	if err := w.Close(smallManifest()); err == nil || !strings.Contains(err.Error(), "s0/m/out") {
		t.Fatalf("want a missing-tensor error, got %v", err)
	}
	w2, _ := Create(filepath.Join(dir, "y.safetensors"))
	w2.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
	w2.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestWriterRefusesBadTensors(t *testing.T) {
	w, _ := Create(filepath.Join(t.TempDir(), "x.npz"))
	defer w.Abort()
	for _, tc := range []struct {
		key   string
		dt    DType
		shape []int
		n     int
	}{
		{"a", Float32, []int{3}, 8},  // size lie
		{"", Float32, []int{2}, 8},   // empty key
		{"b", BFloat16, []int{2}, 3}, // odd bf16 bytes
		{"c", Invalid, []int{1}, 1},  // no dtype
		{ManifestKey, Uint8, []int{1}, 1},
	} {
		if err := w.Add(tc.key, tc.dt, tc.shape, make([]byte, tc.n)); err == nil {
			t.Errorf("Add(%q, %v, %v, %d bytes) accepted", tc.key, tc.dt, tc.shape, tc.n)
		}
	}
	w.Add("d", Float32, []int{1}, make([]byte, 4))
	if err := w.Add("d", Float32, []int{1}, make([]byte, 4)); err == nil {
		t.Error("duplicate key accepted")
	}
}

func TestReadFloatConversions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.npz")
	w, _ := Create(path)
	w.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
	w.Add("s0/m/out", Float32, []int{2}, f32Bytes(3, 4))
	// bf16 0x3FC0 = 1.5, 0xC000 = -2; f16 0x3C00 = 1, 0x7BFF = 65504.
	w.Add("bf", BFloat16, []int{2}, []byte{0xC0, 0x3F, 0x00, 0xC0})
	w.Add("h", Float16, []int{2}, []byte{0x00, 0x3C, 0xFF, 0x7B})
	w.Add("i", Int32, []int{2}, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00, 0x00, 0x01}) // -1, 2^24+1
	w.Add("d", Float64, []int{1}, []byte{0, 0, 0, 0, 0, 0, 0xF0, 0x3F})                 // 1.0
	if err := w.Close(smallManifest()); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	get := func(k string) *Tensor { ten, _ := tr.Tensor(k); return ten }
	if v, err := get("bf").Float32(); err != nil || !slices.Equal(v, []float32{1.5, -2}) {
		t.Errorf("bf16: %v %v", v, err)
	}
	if v, err := get("h").Float32(); err != nil || !slices.Equal(v, []float32{1, 65504}) {
		t.Errorf("f16: %v %v", v, err)
	}
	if _, err := get("i").Float32(); !errors.Is(err, ErrInexact) {
		t.Errorf("int32 2^24+1 → f32: want ErrInexact, got %v", err)
	}
	if v, err := get("i").Float64(); err != nil || !slices.Equal(v, []float64{-1, 1<<24 + 1}) {
		t.Errorf("int32 → f64: %v %v", v, err)
	}
	if v, err := get("d").Float32(); err != nil || !slices.Equal(v, []float32{1}) {
		t.Errorf("f64 → f32: %v %v", v, err)
	}
}

// TestNoDuplicateKeys: keys compared as JSON reads them (escapes
// decoded); strings that hold braces, quotes or commas are not keys.
func TestNoDuplicateKeys(t *testing.T) {
	for _, c := range []struct {
		doc string
		dup string // "" for none
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"a":"x\",\"a\":{","b":1}`, ""},
		{`{"version":1,"vers\u0069on":2}`, "version"},
		{`{"c":[{"k":1,"k":2}]}`, "k"},
		{`[{"a":1},{"a":1}]`, ""},
		{`{"a":{"x":1},"b":{"x":1},"a2":[1,{"y":1,"y":0}]}`, "y"},
	} {
		err := noDuplicateKeys([]byte(c.doc))
		// The scanner is fed what the decoder reads, in any pieces: a byte
		// at a time must give the same verdict as the whole.
		bytewise := &dupScanner{}
		for i := range len(c.doc) {
			bytewise.Write([]byte{c.doc[i]})
		}
		if (err == nil) != (bytewise.err == nil) {
			t.Errorf("%s: whole %v, a byte at a time %v", c.doc, err, bytewise.err)
		}
		switch {
		case c.dup == "" && err != nil:
			t.Errorf("%s: %v", c.doc, err)
		case c.dup != "" && (err == nil || !strings.Contains(err.Error(), `key "`+c.dup+`" appears twice`)):
			t.Errorf("%s: %v, want %q twice", c.doc, err, c.dup)
		}
	}
}

// TestOnePass: a trace without a sampler loop (no call has a step) reads as
// step 0; a trace with steps keeps its calls outside the loop unstepped.
func TestOnePass(t *testing.T) {
	head := `{"format":"zflow-trace","version":1,"calls":[`
	for _, c := range []struct {
		calls string
		want  []string // each call's step, "nil" for none
	}{
		{`{"id":0,"step":null,"module":"m"},{"id":1,"step":null,"module":"m.a","parent":0}`, []string{"0", "0"}},
		{`{"id":0,"step":null,"module":"te"},{"id":1,"step":0,"module":"m"}`, []string{"nil", "0"}},
		{`{"id":0,"step":2,"module":"m"}`, []string{"2"}},
	} {
		m, err := parseManifest(strings.NewReader(head + c.calls + `]}`))
		if err != nil {
			t.Fatalf("%s: %v", c.calls, err)
		}
		var got []string
		for _, call := range m.Calls {
			if call.Step == nil {
				got = append(got, "nil")
			} else {
				got = append(got, strconv.Itoa(*call.Step))
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: steps %v, want %v", c.calls, got, c.want)
		}
	}
}

// TestCanonicalKeys: a call tensor stored under a key of the writer's
// choosing is found by the format's name too (a one-pass trace's "pre/"
// keys read as step 0's), and Keys still lists each entry once.
func TestCanonicalKeys(t *testing.T) {
	m := smallManifest()
	m.Calls = []Call{
		{ID: 0, Module: "m", Params: []string{"m.w"}, Tensors: Ports{{"out", "pre/m/out"}}},
		{ID: 1, Module: "m", Ordinal: 1, Tensors: Ports{{"out", "anything"}}},
	}
	path := writeZip(t, t.TempDir(), []zipEntry{
		manifestEntry(t, m),
		npyEntry("param/w", "<f4", []int{1}, f32Bytes(1)),
		npyEntry("pre/m/out", "<f4", []int{1}, f32Bytes(2)),
		npyEntry("anything", "<f4", []int{1}, f32Bytes(3)),
	})
	tr, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for key, want := range map[string]float32{"s0/m/out": 2, "pre/m/out": 2, "s0/m#1/out": 3, "anything": 3} {
		x, err := tr.Tensor(key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if v, _ := x.Float32(); len(v) != 1 || v[0] != want {
			t.Errorf("%s = %v, want %v", key, v, want)
		}
	}
	if _, err := tr.Tensor("s1/m/out"); err == nil {
		t.Error("s1/m/out found; no call of step 1 exists")
	}
	if got := len(tr.Keys()); got != 3 {
		t.Errorf("Keys lists %d entries, want 3", got)
	}
}
