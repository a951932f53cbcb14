package trace

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"codeberg.org/sbinet/npyio/npz"
)

// TestInteropWithNpyio checks both directions against an independent npy
// implementation: an archive written by npyio (deflated entries, version
// 2.0 headers) opens here, and an archive written here reads in npyio.
func TestInteropWithNpyio(t *testing.T) {
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs.npz")
	w, err := npz.Create(theirs)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(smallManifest())
	w.Write("param/w.npy", []float32{1, 2})
	w.Write("s0/m/out.npy", []float32{3, 4})
	w.Write("ids.npy", []int64{7, -8, 9})
	w.Write(ManifestKey+".npy", doc)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(theirs)
	if err != nil {
		t.Fatal(err)
	}
	ten, _ := tr.Tensor("s0/m/out")
	if v, err := ten.Float32(); err != nil || !slices.Equal(v, []float32{3, 4}) || !ten.Compressed {
		t.Errorf("npyio-written f32: %v %v compressed=%v", v, err, ten.Compressed)
	}
	ids, _ := tr.Tensor("ids")
	if v, err := ids.Float64(); err != nil || !slices.Equal(v, []float64{7, -8, 9}) {
		t.Errorf("npyio-written int64: %v %v", v, err)
	}
	tr.Close()

	ours := filepath.Join(dir, "ours.npz")
	ow, _ := Create(ours)
	ow.Add("param/w", Float32, []int{2}, f32Bytes(1, 2))
	ow.Add("s0/m/out", Float32, []int{2}, f32Bytes(5, 6))
	if err := ow.Close(smallManifest()); err != nil {
		t.Fatal(err)
	}
	r, err := npz.Open(ours)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []float32
	if err := r.Read("s0/m/out.npy", &got); err != nil || !slices.Equal(got, []float32{5, 6}) {
		t.Errorf("npyio reading ours: %v %v", got, err)
	}
}
