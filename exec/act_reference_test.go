package exec

import (
	"math"
	"testing"
)

// softplus and sqrt: torch's definitions at hand-computed points, and
// kinds the GPU kernels lack (Kernel false: CUDA and Metal refuse them).
func TestSoftplusSqrt(t *testing.T) {
	for _, c := range []struct {
		f    ActKind
		x    float32
		want float64
	}{
		{ActSoftplus, 0, math.Ln2},
		{ActSoftplus, -3, math.Log1p(math.Exp(-3))},
		{ActSoftplus, 2, math.Log1p(math.Exp(2))},
		{ActSoftplus, 25, 25}, // past torch's threshold 20: x itself
		{ActSoftplus, -30, math.Exp(-30)},
		{ActSqrt, 4, 2},
		{ActSqrt, 2, math.Sqrt2},
	} {
		got := Activate(c.f, c.x, 0)
		if got != float32(c.want) {
			t.Errorf("%v(%v) = %v, want %v", c.f, c.x, got, float32(c.want))
		}
	}
	if v := Activate(ActSqrt, -1, 0); v == v {
		t.Errorf("sqrt(-1) = %v, want NaN", v)
	}
	for _, f := range []ActKind{ActSoftplus, ActSqrt} {
		if !f.Valid() || f.Kernel() != (f == ActSqrt) {
			t.Errorf("%v: valid %v kernel %v, want a valid kind, with a GPU kernel only for sqrt", f, f.Valid(), f.Kernel())
		}
		if g, err := ParseAct(f.String()); err != nil || g != f {
			t.Errorf("ParseAct(%q) = %v, %v", f.String(), g, err)
		}
	}
	if !ActExpm1.Kernel() || !ActSiLU.Kernel() {
		t.Error("the kinds before softplus have GPU kernels")
	}
	if ActKind(actEnd).Kernel() {
		t.Error("an invalid kind has no GPU kernel")
	}
}

// hardswish and hardsigmoid: torch's x·min(max(x + 3, 0), 6)/6 and
// min(max(x + 3, 0), 6)/6 at points on each side of the clamp, NaN kept;
// the GPU kernels have both.
func TestHardActivations(t *testing.T) {
	for _, c := range []struct {
		f    ActKind
		x    float32
		want float32
	}{
		{ActHardswish, -4, 0}, {ActHardswish, -3, 0}, {ActHardswish, 1, 1 * 4 / float32(6)},
		{ActHardswish, 0.5, 0.5 * 3.5 / 6}, {ActHardswish, 3, 3}, {ActHardswish, 7, 7},
		{ActHardsigmoid, -4, 0}, {ActHardsigmoid, 0, 0.5}, {ActHardsigmoid, 1.5, 4.5 / float32(6)}, {ActHardsigmoid, 5, 1},
		{ActAbs, -1.5, 1.5}, {ActAbs, 2, 2}, {ActAbs, 0, 0},
	} {
		if got := Activate(c.f, c.x, 0); got != c.want {
			t.Errorf("%v(%v) = %v, want %v", c.f, c.x, got, c.want)
		}
	}
	nan := float32(math.NaN())
	for _, f := range []ActKind{ActHardswish, ActHardsigmoid, ActAbs} {
		if v := Activate(f, nan, 0); v == v {
			t.Errorf("%v(NaN) = %v, want NaN", f, v)
		}
		if !f.Valid() || !f.Kernel() {
			t.Errorf("%v: valid %v kernel %v, want both", f, f.Valid(), f.Kernel())
		}
		if g, err := ParseAct(f.String()); err != nil || g != f {
			t.Errorf("ParseAct(%q) = %v, %v", f.String(), g, err)
		}
	}
}
