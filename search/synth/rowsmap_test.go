package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestRowsAsMapPlusPositions plants EdgeNeXt's split transposed block's
// input: a map [1, 8, 4, 4] whose first four channels went through a
// convolution (a value of the scope) and whose last four are the block's
// input's, joined along the channels, its cells read as rows [1, 16, 8],
// plus a position map [1, 8, 4, 4] read as rows the same way. glue
// explains it: the position map's cells as the known term, the rest as
// the join read as a map. The rows in the map's raw order (a reshape, no
// permute) of the same join are no such sum of cells.
func TestRowsAsMapPlusPositions(t *testing.T) {
	const c, h, w = 8, 4, 4
	f := precision.F32
	r := rand.New(rand.NewPCG(9, 2))
	fill := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64())
		}
		return out
	}
	x, conv, pos := fill(c*h*w), fill(c/2*h*w), fill(c*h*w)
	joined := make([]float32, c*h*w) // [C, H·W]: the conv's channels, then x's last half
	copy(joined, conv)
	copy(joined[c/2*h*w:], x[c/2*h*w:])
	rows := make([]float32, c*h*w)
	for ch := range c {
		for p := range h * w {
			rows[p*c+ch] = joined[ch*h*w+p] + pos[ch*h*w+p]
		}
	}
	vx := &val{shape: []int{1, c, h, w}, data: x, format: f, origin: "x", seq: 1}
	vc := &val{shape: []int{1, c / 2, h, w}, data: conv, format: f, origin: "conv", seq: 2}
	vp := &val{shape: []int{1, c, h, w}, data: pos, format: f, origin: "pos", seq: 3}
	s, sc, target := planted(t, f, []int{1, h * w, c}, rows, vx, vc, vp)
	got := s.glueIn(target, sc)
	if got == nil || relRMS(f, got.data, target.data) > 1e-6 {
		t.Fatalf("the join read as rows plus the positions not explained (%v)", got != nil)
	}
	raw := make([]float32, len(rows)) // the join plus positions, reshaped without the permute
	for i := range raw {
		raw[i] = joined[i] + pos[i]
	}
	s2, sc2, t2 := planted(t, f, []int{1, h * w, c}, raw, vx, vc, vp)
	if got := s2.rowsAsMap(t2, sc2, recentFirst(sc2.vals)); got != nil && relRMS(f, got.data, t2.data) <= tolerance(f) {
		t.Error("rows in the map's raw order read as its cells")
	}
}
