package trace

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

// streamTrace writes a trace whose param/w is n float32s, deflated.
func streamTrace(t *testing.T, n int) (path string, want []float32) {
	t.Helper()
	want = make([]float32, n)
	for i := range want {
		want[i] = float32(i%1000) * 0.5
	}
	w := npyEntry("param/w", "<f4", []int{n}, f32Bytes(want...))
	w.deflate = true
	path = writeZip(t, t.TempDir(), []zipEntry{w, npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, smallManifest())})
	return path, want
}

// TestValuesStreams: issue 12, item 8. A deflated entry read through
// Values is decoded segment by segment: the values are those Tensor
// decodes whole, in order or not, and reading all of them allocates far
// less than the entry's size.
func TestValuesStreams(t *testing.T) {
	const n = 1 << 20 // 4 MiB of data
	p, want := streamTrace(t, n)
	tr, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	v, err := tr.Values("param/w")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Streamed() || v.Bytes() != nil {
		t.Fatalf("Values of a deflated entry: streamed %v, %d bytes held", v.Streamed(), len(v.Bytes()))
	}
	if _, ok := v.Float32View(); ok {
		t.Fatalf("a streamed tensor gave a view")
	}
	chunk := make([]float32, 1<<14)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for from := 0; from < n; from += len(chunk) {
		if err := v.ReadFloat32(chunk, int64(from)); err != nil {
			t.Fatalf("values at %d: %v", from, err)
		}
		for i, x := range chunk {
			if x != want[from+i] {
				t.Fatalf("value %d = %v, want %v", from+i, x, want[from+i])
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > n*4/8 {
		t.Errorf("reading %d bytes in chunks allocated %d bytes: the entry was not streamed", n*4, got)
	}
	// Backwards: the decoder starts again and gives the same values.
	for _, from := range []int64{n - 10, 5, 0, 1 << 19} {
		got := make([]float32, 10)
		if err := v.ReadFloat32(got, from); err != nil {
			t.Fatalf("values at %d: %v", from, err)
		}
		for i, x := range got {
			if x != want[int(from)+i] {
				t.Fatalf("value %d = %v after a seek, want %v", int(from)+i, x, want[int(from)+i])
			}
		}
	}
	if err := v.ReadFloat32(make([]float32, 2), n-1); !errors.Is(err, ErrNotFound) {
		t.Errorf("a read past the end: %v", err)
	}
	all, err := v.Float32()
	if err != nil || len(all) != n || all[n-1] != want[n-1] {
		t.Errorf("Float32 of a streamed tensor: %d values, %v", len(all), err)
	}
	w, err := tr.Tensor("param/w")
	if err != nil {
		t.Fatal(err)
	}
	d64, err := v.Float64()
	if err != nil || len(d64) != n || float32(d64[123]) != want[123] || w.Len() != n {
		t.Errorf("Float64 of a streamed tensor: %d values, %v", len(d64), err)
	}
	// A stored entry's Values is Tensor's view.
	if s, err := tr.Values("s0/m/out"); err != nil || s.Streamed() || !s.IsView() {
		t.Errorf("Values of a stored entry: %v", err)
	}
}

// TestValuesChecksum: a streamed read that reaches the end of an entry
// whose CRC-32 the archive gives wrongly fails, naming the entry.
func TestValuesChecksum(t *testing.T) {
	p, _ := streamTrace(t, 100000) // longer than the header read at open
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	name := []byte("param/w.npy")
	cd := bytes.Index(raw, []byte("PK\x01\x02"))
	for cd >= 0 && !bytes.Equal(raw[cd+46:cd+46+len(name)], name) {
		next := bytes.Index(raw[cd+1:], []byte("PK\x01\x02"))
		if next < 0 {
			t.Fatal("no central record for param/w.npy")
		}
		cd += 1 + next
	}
	raw[cd+16] ^= 0xff // the central directory's CRC-32
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	v, err := tr.Values("param/w")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ReadFloat32(make([]float32, 50000), 0); err != nil {
		t.Errorf("the first half (not yet at the end): %v", err)
	}
	err = v.ReadFloat32(make([]float32, 50000), 50000)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "param/w.npy") || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("the end of a corrupt entry: %v", err)
	}
}
