package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestGRN plants ConvNeXt V2's global response normalisation over x
// [1, 3, 4, C] (channels last) with γ, β [1, 1, 1, C], computed in
// float64 from its formula: explained to f32 rounding as a global
// response norm. A per-cell norm with the same parameters (each cell's
// channels scaled by their own L2 norm, not the image's) is not.
func TestGRN(t *testing.T) {
	const h, w, c = 3, 4, 5
	rng := rand.New(rand.NewPCG(4, 4))
	x := randVal(rng, 1, h, w, c)
	gamma, beta := randVal(rng, 1, 1, 1, c), randVal(rng, 1, 1, 1, c)
	gamma.param, beta.param = true, true
	grn := func(perCell bool) []float32 {
		out := make([]float32, len(x.data))
		norms := make([]float64, c)
		for ch := range c {
			for p := range h * w {
				v := float64(x.data[p*c+ch])
				norms[ch] += v * v
			}
			norms[ch] = math.Sqrt(norms[ch])
		}
		var mean float64
		for _, g := range norms {
			mean += g / c
		}
		for p := range h * w {
			var cell float64
			for ch := range c {
				cell += float64(x.data[p*c+ch]) * float64(x.data[p*c+ch])
			}
			for ch := range c {
				n := norms[ch] / (mean + 1e-6)
				if perCell {
					n = math.Sqrt(cell)
				}
				v := float64(x.data[p*c+ch])
				out[p*c+ch] = float32(float64(gamma.data[ch])*(v*n) + float64(beta.data[ch]) + v)
			}
		}
		return out
	}
	for _, perCell := range []bool{false, true} {
		s, _, target := planted(t, precision.F32, []int{1, h, w, c}, grn(perCell))
		v := s.fitGRN([]*val{x}, []*val{gamma, beta}, target)
		if perCell {
			if v != nil {
				t.Errorf("a per-cell norm explained as a global response norm: %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
		if v != nil && !strings.Contains(describe(v), "global response norm") {
			t.Errorf("explained as %s", describe(v))
		}
	}
}
