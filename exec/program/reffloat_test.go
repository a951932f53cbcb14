package program_test

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// TestRefFloat32: a float64 reference tensor (a sinusoid the reference
// computed in f64) reads rounded to the nearest float32; an int64 that
// float32 cannot hold is still refused.
func TestRefFloat32(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ref.safetensors")
	w, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f64 := []float64{0.5623790762907029, -1.0 / 3}
	b := make([]byte, 8*len(f64))
	for i, v := range f64 {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	i64 := make([]byte, 8)
	binary.LittleEndian.PutUint64(i64, uint64(1<<24+1))
	if err := w.Add("s0/a/out", trace.Float64, []int{2}, b); err != nil {
		t.Fatal(err)
	}
	if err := w.Add("s0/b/out", trace.Int64, []int{1}, i64); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(&trace.Manifest{}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.OpenPort(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	a, _ := tr.Tensor("s0/a/out")
	got, err := program.RefFloat32(a)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range f64 {
		if got[i] != float32(v) {
			t.Errorf("element %d: %v, want %v", i, got[i], float32(v))
		}
	}
	bt, _ := tr.Tensor("s0/b/out")
	if _, err := program.RefFloat32(bt); !errors.Is(err, trace.ErrInexact) {
		t.Errorf("int64 2^24+1: err %v, want ErrInexact", err)
	}
}
