package exec

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestRoundExp2Approx: the tabulated points move to the neighbour on the
// exact value's side; others are the correctly rounded value; the .ftz
// instruction's zero below −126.
func TestRoundExp2Approx(t *testing.T) {
	for f, flips := range ex2Flips() {
		if len(flips) == 0 {
			t.Fatalf("%v: no points", f)
		}
		for i, u := range flips {
			x := math.Float32frombits(u)
			if x > 0 || x < -128 || i > 0 && flips[i-1] >= u {
				t.Fatalf("%v: point %d (%v) out of range or order", f, i, x)
			}
			exact := float32(math.Exp2(float64(x)))
			r, got := f.Round(exact), RoundExp2Approx(x, f)
			if got == r || got < r != (exact < r) {
				t.Fatalf("%v: x %v: moved to %v away from exact %v (rounded %v)", f, x, got, exact, r)
			}
			// the next f32 below x is not a point unless listed
			if y := math.Float32frombits(u + 1); y >= -126 && (i+1 == len(flips) || flips[i+1] != u+1) {
				if RoundExp2Approx(y, f) != f.Round(float32(math.Exp2(float64(y)))) {
					t.Fatalf("%v: x %v not listed, yet moved", f, y)
				}
			}
		}
	}
	cases := []struct {
		x    float32
		want float32
	}{
		{0, 1}, {-1, 0.5}, {-126, float32(math.Ldexp(1, -126))}, {-126.5, 0}, {-127, 0}, {float32(math.Inf(-1)), 0},
	}
	for _, c := range cases {
		if got := Exp2Approx(c.x); got != c.want {
			t.Errorf("Exp2Approx(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if len(ex2Flips()[precision.BF16]) != 1015 || len(ex2Flips()[precision.F16]) != 8471 {
		t.Errorf("tables: %d bf16 and %d f16 points, want 1015 and 8471 (ex2approx/README.md)", len(ex2Flips()[precision.BF16]), len(ex2Flips()[precision.F16]))
	}
}
