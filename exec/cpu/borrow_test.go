package cpu

import (
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestBorrow: an f32 tensor borrowed reads the caller's values without a
// copy, and an op on it leaves them as they were; a narrower format is
// rounded into a copy, as Upload rounds it; a shape that does not hold
// the values is refused.
func TestBorrow(t *testing.T) {
	b := New(1)
	data := []float32{1, -2.5, 3.0000002, 4}
	x, err := exec.Borrow(b, data, []int{2, 2}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	if &x.(*Tensor).data[0] != &data[0] {
		t.Error("an f32 tensor borrowed is a copy")
	}
	y, err := b.Permute(x, []int{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := b.Download(y)
	if !slices.Equal(got, []float32{1, 3.0000002, -2.5, 4}) || !slices.Equal(data, []float32{1, -2.5, 3.0000002, 4}) {
		t.Errorf("permuted %v from %v", got, data)
	}
	b.Free(x)
	if data[2] != 3.0000002 {
		t.Error("Free changed the caller's values")
	}
	z, err := exec.Borrow(b, data, []int{4}, precision.BF16)
	if err != nil {
		t.Fatal(err)
	}
	if zd := z.(*Tensor).data; &zd[0] == &data[0] || zd[2] != precision.BF16.Round(3.0000002) || data[2] != 3.0000002 {
		t.Errorf("bf16: %v (caller's %v)", zd, data)
	}
	// values bf16 holds already are read where they lie
	held := []float32{1, -2.5, 3, 0.15625}
	if w, err := exec.Borrow(b, held, []int{4}, precision.BF16); err != nil || &w.(*Tensor).data[0] != &held[0] {
		t.Errorf("bf16 values borrowed as a copy (%v)", err)
	}
	if _, err := exec.Borrow(b, data, []int{3}, precision.F32); err == nil {
		t.Error("4 values borrowed as shape [3]")
	}
}
