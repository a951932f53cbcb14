package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestSegmentedRows: a block modulated per run of rows, as torch.where over
// a 0/1 row mask picks between two conditionings' modulation chunks (the
// first rows clean context at t = 0, the rest noisy rows at t): the scale
// x·(1 + where(mask, a, b)) and the tanh gate x + y·tanh(where(mask, c,
// d)), with a and c chunks of one modulation linear's output and b and d
// of the same linear called again. No one vector serves every row, so the
// plain per-sample forms cannot explain either; each is explained bit for
// bit from the two modulations' chunks repeated over their runs of rows.
func TestSegmentedRows(t *testing.T) {
	const n, c, k, split = 7, 16, 4, 3
	rng := rand.New(rand.NewPCG(31, 32))
	fill := func(m int, sd float64) []float32 {
		out := make([]float32, m)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * sd)
		}
		return out
	}
	noisy, clean := fill(k*c, 0.5), fill(k*c, 0.5) // [1, k·C] each: the modulation linear's two calls
	x, y := fill(n*c, 1), fill(n*c, 1)
	scale := make([]float32, n*c)
	gated := make([]float32, n*c)
	for r := range n {
		src := noisy
		if r < split {
			src = clean
		}
		for ch := range c {
			i := r*c + ch
			scale[i] = x[i] * (1 + src[0*c+ch])                             // chunk 0: the scale
			gated[i] = x[i] + y[i]*float32(math.Tanh(float64(src[1*c+ch]))) // chunk 1: the gate
		}
	}
	vals := func() []*val {
		return []*val{
			{shape: []int{1, k * c}, data: noisy, format: precision.F32, origin: "modulation (t)"},
			{shape: []int{1, k * c}, data: clean, format: precision.F32, origin: "modulation (t = 0)"},
			{shape: []int{1, n, c}, data: x, format: precision.F32, origin: "x"},
			{shape: []int{1, n, c}, data: y, format: precision.F32, origin: "y"},
		}
	}
	for _, tc := range []struct {
		name string
		want []float32
	}{{"scale", scale}, {"tanh gate", gated}} {
		s, sc, target := planted(t, precision.F32, []int{1, n, c}, tc.want, vals()...)
		if got := s.modulatedRows(target, sc, recentFirst(sc.vals)); got != nil {
			t.Errorf("%s: explained per token already (%s): the plant does not need runs of rows", tc.name, got.from.label)
		}
		got := s.segmentedRows(target, sc, recentFirst(sc.vals))
		if got == nil {
			t.Fatalf("%s: not explained", tc.name)
		}
		if e := relRMS(precision.F32, got.data, tc.want); e > 1e-6 {
			t.Errorf("%s: rel-RMS %.3g (%s)", tc.name, e, got.from.label)
		}
	}
}
