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

// TestFrameBlockedAttention plants a two-head attention whose query rows
// [1, 6, 8] fall into three frames of two rows, frame f attending to the
// four rows of frame f of keys and values [1, 3, 4, 8] (Wan Animate's
// face adapter), and reads it; the same keys attended by every row
// together are not read as per frame.
func TestFrameBlockedAttention(t *testing.T) {
	const T, per, n, heads, d = 3, 2, 4, 2, 4
	c := heads * d
	rng := rand.New(rand.NewPCG(8, 5))
	q, k, v := randVal(rng, 1, T*per, c), randVal(rng, 1, T, n, c), randVal(rng, 1, T, n, c)
	want := make([]float32, T*per*c)
	for f := range T {
		for h := range heads {
			from := func(x *val, rows int) func(r, e int) float64 {
				return func(r, e int) float64 { return float64(x.data[(f*rows+r)*c+h*d+e]) }
			}
			plantedAttentionBias(per, n, d, d, from(q, per), from(k, n), from(v, n), func(int, int) float64 { return 0 }, func(r, e int, y float64) {
				want[(f*per+r)*c+h*d+e] = float32(y)
			})
		}
	}
	s, sc, target := planted(t, precision.F32, q.shape, want)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	explainedWithin(t, s.frameBlockedAttention(target, sc), target)

	// every query row over all T·n keys: not within frames
	all := make([]float32, T*per*c)
	for h := range heads {
		at := func(x *val) func(r, e int) float64 {
			return func(r, e int) float64 { return float64(x.data[r*c+h*d+e]) }
		}
		plantedAttentionBias(T*per, T*n, d, d, at(q), at(k), at(v), func(int, int) float64 { return 0 }, func(r, e int, y float64) {
			all[r*c+h*d+e] = float32(y)
		})
	}
	s, sc, target = planted(t, precision.F32, q.shape, all)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	if got := s.frameBlockedAttention(target, sc); got != nil && relRMS(precision.F32, got.data, all) <= tolerance(precision.F32) {
		t.Error("attention over every frame's keys read as per frame")
	}
}
