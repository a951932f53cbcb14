package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// strideTables makes cos and sin tables the way a vision encoder does
// whose two axes interleave one ladder f_i = 1/θ^(2i/d) (in f32): the row
// axis takes the even-indexed frequencies, the column axis the odd, the
// row's pairs laid out before the column's, over the ids (row, col) of a
// grid; in layout (half: the pairs then again; interleaved: each twice).
func strideTables(grid []int, d int, theta float32, layout exec.RopeLayout) (ids, cosT, sinT *val) {
	np := d / 2
	lad := make([]float32, np)
	for i := range lad {
		lad[i] = 1 / float32(math.Pow(float64(theta), float64(float32(2*i)/float32(d))))
	}
	rows := grid[0] * grid[1]
	ids = &val{shape: []int{rows, 2}, data: make([]float32, 2*rows), format: precision.F32, origin: "rope/arg1", intType: true}
	cosT = &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: precision.F32, origin: "rope/out.0"}
	sinT = &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: precision.F32, origin: "rope/out.1"}
	for r := range rows {
		h, w := r/grid[1], r%grid[1]
		ids.data[2*r], ids.data[2*r+1] = float32(h), float32(w)
		for j := range np {
			var f, p float32
			if j < np/2 {
				f, p = lad[2*j], float32(h)
			} else {
				f, p = lad[2*(j-np/2)+1], float32(w)
			}
			ang := float64(p * f)
			chs := []int{j, np + j}
			if layout == exec.RopeInterleaved {
				chs = []int{2 * j, 2*j + 1}
			}
			for _, c := range chs {
				cosT.data[r*d+c], sinT.data[r*d+c] = float32(math.Cos(ang)), float32(math.Sin(ang))
			}
		}
	}
	return ids, cosT, sinT
}

// TestPairOrderRope: tables whose pairs take one ladder's frequencies in
// another order than the ladder's (two axes interleaving it, laid out
// axis by axis) are recomputed from the ids by rope_table with each
// frequency's column, the pairs put back in their order; the map read in
// the ladder's own order (fitAxisMapRope) does not explain them.
func TestPairOrderRope(t *testing.T) {
	for _, c := range []struct {
		grid   []int
		d      int
		theta  float32
		layout exec.RopeLayout
	}{
		{[]int{4, 4}, 16, 1e4, exec.RopeHalf},
		{[]int{3, 5}, 24, 1e4, exec.RopeHalf},
		{[]int{5, 3}, 16, 1e5, exec.RopeInterleaved},
	} {
		ids, cosT, sinT := strideTables(c.grid, c.d, c.theta, c.layout)
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		if cv, _ := s.fitAxisMapRope([]*val{ids}, cosT, sinT); cv != nil {
			t.Errorf("%v d %d %v: explained in the ladder's own order", c.grid, c.d, c.layout)
		}
		cv, sv := s.fitPairOrderRope([]*val{ids}, cosT, sinT)
		if cv == nil || sv == nil {
			t.Fatalf("%v d %d %v: no fit", c.grid, c.d, c.layout)
		}
		if e := max(relRMS(precision.F32, cv.data, cosT.data), relRMS(precision.F32, sv.data, sinT.data)); e > 1e-6 || !slices.Equal(cv.shape, cosT.shape) {
			t.Errorf("%v d %d %v: tables not reproduced: rel-RMS %g", c.grid, c.d, c.layout, e)
		}
		if cv.fit == nil || cv.fit.rope.Theta != float64(c.theta) {
			t.Errorf("%v d %d %v: θ not read as %g: %+v", c.grid, c.d, c.layout, c.theta, cv.fit)
		}
	}
}
