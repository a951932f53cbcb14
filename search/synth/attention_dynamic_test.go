package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestSoftplus: the softplus written in the backend's ops is log(1 + e^x)
// to within one f32 step of the larger of the value and 1 (the composed
// log(1 + e^−|x|) loses what lies under 1's last bit), and exactly x far
// right of 0, where torch's threshold returns x.
func TestSoftplus(t *testing.T) {
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	xs := []float32{-100, -20, -3, -0.5, 0, 1e-3, 0.5, 3, 19.5, 30, 100}
	got := s.softplus(&val{shape: []int{len(xs)}, data: xs, format: precision.F32})
	if got == nil {
		t.Fatal("softplus did not derive")
	}
	for i, x := range xs {
		want := math.Log1p(math.Exp(float64(x)))
		if d := math.Abs(float64(got.data[i]) - want); d > 0x1p-23*math.Max(math.Abs(want), 1) {
			t.Errorf("softplus(%g) = %g, want %g", x, got.data[i], want)
		}
		if x >= 20 && got.data[i] != x {
			t.Errorf("softplus(%g) = %g, want %g itself", x, got.data[i], x)
		}
	}
}

// TestPerHead: a bias of one column per key head [B, Sk, KV] laid out for
// H query heads: query head h reads key head h·KV/H's column, every key
// in order.
func TestPerHead(t *testing.T) {
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	// B = 1, Sk = 3, KV = 2: key j's columns are (10 + j, 20 + j)
	b := &val{shape: []int{1, 3, 2}, data: []float32{10, 20, 11, 21, 12, 22}, format: precision.F32}
	got := s.perHead(b, 4)
	if got == nil {
		t.Fatal("perHead did not derive")
	}
	want := []float32{10, 11, 12, 10, 11, 12, 20, 21, 22, 20, 21, 22}
	if len(got.shape) != 4 || got.shape[0] != 1 || got.shape[1] != 4 || got.shape[2] != 1 || got.shape[3] != 3 {
		t.Fatalf("shape %v, want [1 4 1 3]", got.shape)
	}
	for i := range want {
		if got.data[i] != want[i] {
			t.Fatalf("data %v, want %v", got.data, want)
		}
	}
}
