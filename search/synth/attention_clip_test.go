package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestClipMapsAttention plants single-head attentions over a clip's
// cells: q, k and v are clips [1, 4, 2, 2, 3] (made by 1×1×1
// convolutions), the result laid back out as a clip. Every frame's cells
// as one sequence under a frame-causal mask (HunyuanVideo 1.5's VAE), and
// each cell's frames under a causal one (Cosmos's temporal attention),
// are read; a random clip is not.
func TestClipMapsAttention(t *testing.T) {
	const c, T, h, w = 4, 2, 2, 3
	cells := h * w
	for _, tc := range []struct {
		name string
		// the sequence of row r of group g: its flat (frame, cell) index
		groups, rows int
		at           func(g, r int) (f, cell int)
		visible      func(i, j int) bool
	}{
		{"every frame's cells, frame-causal", 1, T * cells, func(_, r int) (int, int) { return r / cells, r % cells }, func(i, j int) bool { return j/cells <= i/cells }},
		{"each cell's frames, causal", cells, T, func(g, r int) (int, int) { return r, g }, func(i, j int) bool { return j <= i }},
	} {
		rng := rand.New(rand.NewPCG(8, 3))
		q, k, v := randVal(rng, 1, c, T, h, w), randVal(rng, 1, c, T, h, w), randVal(rng, 1, c, T, h, w)
		want := make([]float32, c*T*cells)
		for g := range tc.groups {
			at := func(x *val) func(r, e int) float64 {
				return func(r, e int) float64 {
					f, cell := tc.at(g, r)
					return float64(x.data[(e*T+f)*cells+cell])
				}
			}
			bias := func(i, j int) float64 {
				if tc.visible(i, j) {
					return 0
				}
				return math.Inf(-1)
			}
			plantedAttentionBias(tc.rows, tc.rows, c, c, at(q), at(k), at(v), bias, func(r, e int, y float64) {
				f, cell := tc.at(g, r)
				want[(e*T+f)*cells+cell] = float32(y)
			})
		}
		s, sc, target := planted(t, precision.F32, q.shape, want)
		for _, x := range []*val{q, k, v} {
			sc.add(x, true)
		}
		explainedWithin(t, s.clipMapsAttention(target, sc), target)

		noise := randVal(rng, 1, c, T, h, w)
		s, sc, target = planted(t, precision.F32, q.shape, noise.data)
		for _, x := range []*val{q, k, v} {
			sc.add(x, true)
		}
		if got := s.clipMapsAttention(target, sc); got != nil {
			t.Errorf("%s: a random clip read as an attention of the scope's clips", tc.name)
		}
	}
}
