package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestRankUnderModuleBias plants BoTNet's attention over a map: q, k and
// v cut from one projection [1, 3C, 4, 4] (4 heads of 8), q and k so
// small that the scores alone leave the attention near uniform, and the
// logits a position module of the scope made [4, 16, 16] added to them.
// Without the bias every triple sharing the values scores alike, and
// decoy maps of the scope make more such triples; ranked under the
// module's bias the right one reaches the refinement. A map no bias
// explains is not read as attention.
func TestRankUnderModuleBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 13))
	const heads, d, g = 4, 8, 4
	s, c := g*g, heads*d
	qkv := randVal(rng, 1, 3*c, g, g)
	for i := range 2 * c * s {
		qkv.data[i] *= 0.05
	}
	bias := randVal(rng, heads, s, s)
	for i := range bias.data {
		bias.data[i] *= 1.5
	}
	want := make([]float32, c*s)
	at := func(off, h int) func(r, e int) float64 {
		return func(r, e int) float64 { return float64(qkv.data[(off+h*d+e)*s+r]) }
	}
	for h := range heads {
		bh := func(i, j int) float64 { return float64(bias.data[(h*s+i)*s+j]) }
		plantedAttentionBias(s, s, d, d, at(0, h), at(c, h), at(2*c, h), bh, func(r, e int, y float64) { want[(h*d+e)*s+r] = float32(y) })
	}
	for _, tc := range []struct {
		name string
		data []float32
		ok   bool
	}{{"attention under the module's bias", want, true}, {"noise", randVal(rng, 1, c, g, g).data, false}} {
		sx, sco, target := planted(t, precision.F32, []int{1, c, g, g}, tc.data)
		for range 3 {
			decoy := randVal(rng, 1, 3*c, g, g)
			for i := range 2 * c * s {
				decoy.data[i] *= 0.05
			}
			copy(decoy.data[2*c*s:], qkv.data[2*c*s:]) // the same values
			sco.add(decoy, true)
		}
		sco.add(qkv, true)
		sco.add(bias, true)
		got := sx.mapsAttention(target, sco, false)
		if !tc.ok {
			if got != nil {
				t.Errorf("%s explained as attention", tc.name)
			}
			continue
		}
		explainedWithin(t, got, target)
	}
}
