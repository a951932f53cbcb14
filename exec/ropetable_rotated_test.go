package exec

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestRopeTablesRotated: with Rotated, the leading frequencies keep the
// whole width's exponent (f_i = θ^(−2i/d), d the axis's width) and the
// rest are 0 (cos 1, sin 0), in both layouts; a count beyond d/2 or one
// per axis missing is refused.
func TestRopeTablesRotated(t *testing.T) {
	const d, r, theta = 16, 3, 1e6
	pos := []float32{0, 1, 5}
	for _, layout := range []RopeLayout{RopeHalf, RopeInterleaved} {
		cos, sin, err := RopeTables(pos, len(pos), RopeTableParams{Theta: theta, AxesDims: []int{d}, Layout: layout, FreqFormat: precision.F64, AngleFormat: precision.F64, Rotated: []int{r}}, MathPrecise)
		if err != nil {
			t.Fatal(err)
		}
		for s, p := range pos {
			for i := range d / 2 {
				f := 0.0
				if i < r {
					f = 1 / math.Pow(theta, float64(2*i)/d)
				}
				at := []int{s*d + i, s*d + d/2 + i}
				if layout == RopeInterleaved {
					at = []int{s*d + 2*i, s*d + 2*i + 1}
				}
				for _, j := range at {
					if c, sn := float64(cos[j]), float64(sin[j]); math.Abs(c-math.Cos(float64(p)*f)) > 1e-7 || math.Abs(sn-math.Sin(float64(p)*f)) > 1e-7 {
						t.Fatalf("%v row %d pair %d: cos %v sin %v, want the angle %v", layout, s, i, c, sn, float64(p)*f)
					}
				}
			}
		}
	}
	for _, bad := range [][]int{{d/2 + 1}, {1, 1}, {-1}} {
		if _, _, err := RopeTables(pos, len(pos), RopeTableParams{Theta: theta, AxesDims: []int{d}, Layout: RopeHalf, FreqFormat: precision.F64, AngleFormat: precision.F64, Rotated: bad}, MathPrecise); err == nil {
			t.Errorf("Rotated %v: no error", bad)
		}
	}
}
