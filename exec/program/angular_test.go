package program

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestAngularHost: one head, q = (1, 0) (unnormalised: (3, 0)) over keys
// (1, 0), (0, 2) and (−1, 0) with values e₀, e₁, (5, 5): weights 1,
// 1 − ½ = ½ and 0 at power 1 (¼ at power 2), the sum L2-normalised; bad
// shapes and powers refused.
func TestAngularHost(t *testing.T) {
	b := cpu.New(1)
	up := func(v []float32, shape ...int) exec.Tensor {
		x, err := b.Upload(v, shape, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	q := up([]float32{3, 0}, 1, 1, 2)
	k := up([]float32{1, 0, 0, 2, -1, 0}, 1, 3, 2)
	v := up([]float32{1, 0, 0, 1, 5, 5}, 1, 3, 2)
	for _, tc := range []struct {
		power int
		w     float64
	}{{1, 0.5}, {2, 0.25}} {
		y, err := angularHost(b, q, k, v, AngularParams{Heads: 1, Power: tc.power}, exec.Out(precision.F32))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := b.Download(y)
		n := math.Hypot(1, tc.w)
		if want := []float64{1 / n, tc.w / n}; math.Abs(float64(got[0])-want[0]) > 1e-6 || math.Abs(float64(got[1])-want[1]) > 1e-6 {
			t.Errorf("power %d: %v, want %v", tc.power, got, want)
		}
	}
	if _, err := angularHost(b, q, k, v, AngularParams{Heads: 1, Power: 0}, exec.Out(precision.F32)); err == nil {
		t.Error("power 0: no error")
	}
	if _, err := angularHost(b, q, k, up([]float32{1, 2}, 1, 1, 2), AngularParams{Heads: 1, Power: 1}, exec.Out(precision.F32)); err == nil {
		t.Error("3 keys, 1 value row: no error")
	}
}
