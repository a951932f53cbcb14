package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
)

func f32val(shape []int, data ...float32) *val {
	return &val{shape: shape, data: data, format: precision.F32}
}

// TestReachBound: the bound is 0 for targets inside the values' range
// (per channel, with 0 in it), the distance outside it otherwise, read
// through the heads mapping, and no bound where the shapes do not read as
// an attention's target and values.
func TestReachBound(t *testing.T) {
	// values [1, 2 keys, 2 channels]: channel 0 in [−1, 2], channel 1 in
	// [0, 3] (0 joins every range: a sink, an emptied row)
	v := f32val([]int{1, 2, 2}, -1, 1, 2, 3)
	for _, tc := range []struct {
		name           string
		t              *val
		v              *val
		heads, kvHeads int
		want           float64
	}{
		{"inside", f32val([]int{1, 2, 2}, 0.5, 2, -1, 0), v, 2, 2, 0},
		{"zero joins the range", f32val([]int{1, 1, 2}, 0, 0.1), f32val([]int{1, 2, 2}, 1, 1, 2, 3), 1, 1, 0},
		// −3 is 2 under channel 0's least −1, 4 is 1 past channel 1's
		// greatest 3: excess √(4+1), norm √(9+16)
		{"outside", f32val([]int{1, 1, 2}, -3, 4), v, 1, 1, math.Sqrt(5.0 / 25)},
		// two query heads of width 1 over one value head (channel 0):
		// channel 1 of the target reads value channel 0, range [−1, 2]
		{"grouped heads", f32val([]int{1, 1, 2}, 2, 3), f32val([]int{1, 2, 1}, -1, 2), 2, 1, math.Sqrt(1.0 / 13)},
		{"batch differs", f32val([]int{2, 1, 2}, 9, 9, 9, 9), v, 2, 2, 0},
		{"head widths differ", f32val([]int{1, 1, 2}, 9, 9), f32val([]int{1, 2, 4}, 0, 0, 0, 0, 0, 0, 0, 0), 1, 1, 0},
		{"no heads", f32val([]int{1, 1, 2}, 9, 9), v, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reachBound(tc.t, tc.v, tc.heads, tc.kvHeads); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("bound %g, want %g", got, tc.want)
			}
		})
	}
}

// TestReachBoundHoldsForAttention: softmax means of random values, with a
// sink logit beside the keys, lie within the bound's range: the bound of
// an attention's own output over its own values is 0.
func TestReachBoundHoldsForAttention(t *testing.T) {
	const keys, rows, width = 5, 4, 6
	v := make([]float32, keys*width)
	for i := range v {
		v[i] = float32(math.Sin(float64(13*i + 3)))
	}
	out := make([]float32, rows*width)
	for r := range rows {
		w := make([]float64, keys)
		sum := math.Exp(float64(r) - 1) // the sink
		for j := range w {
			w[j] = math.Exp(3 * math.Cos(float64(7*r+5*j)))
			sum += w[j]
		}
		for c := range width {
			var acc float64
			for j := range keys {
				acc += w[j] / sum * float64(v[j*width+c])
			}
			out[r*width+c] = float32(acc)
		}
	}
	if b := reachBound(f32val([]int{1, rows, width}, out...), f32val([]int{1, keys, width}, v...), 2, 2); b != 0 {
		t.Errorf("an attention's own output is %g outside its values' range", b)
	}
}
