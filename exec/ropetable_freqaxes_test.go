package exec

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestRopeTablesFreqAxes: with FreqAxes, frequency i of the one axis
// (f_i = θ^(−2i/d), the whole width's exponent) turns by the position
// column FreqAxes[i], in both layouts, for an interleaved, a sectioned
// and a mixed map; maps that do not fit the widths or the columns are
// refused.
func TestRopeTablesFreqAxes(t *testing.T) {
	const d, theta = 8, 100
	pos := []float32{ // [3 rows, 3 columns]: t, h, w
		0, 0, 0,
		1, 2, 3,
		7, 5, 4,
	}
	maps := map[string][]int{"interleaved": {0, 1, 2, 0}, "sectioned": {0, 0, 1, 2}, "mixed": {2, 0, 2, 1}}
	for name, fa := range maps {
		for _, layout := range []RopeLayout{RopeHalf, RopeInterleaved} {
			cos, sin, err := RopeTables(pos, 3, RopeTableParams{Theta: theta, AxesDims: []int{d}, Layout: layout, FreqFormat: precision.F64, AngleFormat: precision.F64, FreqAxes: fa}, MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			for s := range 3 {
				for i, a := range fa {
					ang := float64(pos[s*3+a]) / math.Pow(theta, float64(2*i)/d)
					at := []int{s*d + i, s*d + d/2 + i}
					if layout == RopeInterleaved {
						at = []int{s*d + 2*i, s*d + 2*i + 1}
					}
					for _, j := range at {
						if math.Abs(float64(cos[j])-math.Cos(ang)) > 1e-7 || math.Abs(float64(sin[j])-math.Sin(ang)) > 1e-7 {
							t.Fatalf("%s %v row %d frequency %d: cos %v sin %v, want the angle %v", name, layout, s, i, cos[j], sin[j], ang)
						}
					}
				}
			}
		}
	}
	bad := []struct {
		name string
		axes []int
		fa   []int
	}{
		{"too few entries", []int{d}, []int{0, 1, 2}},
		{"a column beyond the positions", []int{d}, []int{0, 1, 3, 0}},
		{"a negative column", []int{d}, []int{0, -1, 2, 0}},
		{"two axes", []int{4, 4}, []int{0, 1}},
	}
	for _, b := range bad {
		if _, _, err := RopeTables(pos, 3, RopeTableParams{Theta: theta, AxesDims: b.axes, Layout: RopeHalf, FreqFormat: precision.F64, AngleFormat: precision.F64, FreqAxes: b.fa}, MathPrecise); err == nil {
			t.Errorf("%s: no error", b.name)
		}
	}
}
