package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec/program"
)

// absOffsetBiases are score biases [1, H, S, S] made from the scope's
// parameter tables [H, L] over the absolute offsets of a square grid of
// S = g·g cells (L = S): each query and key read the entry |Δrow|·g +
// |Δcol| of their head's row (the attention biases of LeViT, TinyViT,
// EfficientFormer, indexed by a buffer their forward never records: a
// constant of the grid's shape).
func (s *synth) absOffsetBiases(sc *scope, heads, rows int) []*val {
	g := int(math.Round(math.Sqrt(float64(rows))))
	if g*g != rows {
		return nil
	}
	var out []*val
	for _, tb := range sc.vals {
		if !tb.param || tb.opaque || len(tb.shape) != 2 || tb.shape[0] != heads || tb.shape[1] != rows {
			continue
		}
		// gathered along the table's columns: rows of its transpose
		cols := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{tb}, out: tb.format, label: "the table's offsets as rows"})
		gth := s.derive(&expr{op: program.OpGather, args: []*val{cols, s.absOffsets(g)}, out: tb.format, label: "table entries at the grid's absolute offsets"})
		gth = s.reshape(gth, []int{rows, rows, heads})
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1}}, args: []*val{gth}, out: tb.format, label: "heads first"})
		if b := s.reshape(p, []int{1, heads, rows, rows}); b != nil {
			out = append(out, b)
		}
	}
	return out
}

// absOffsets is |Δrow|·g + |Δcol| for each (query, key) pair of a g×g
// grid's cells, row-major, [S·S].
func (s *synth) absOffsets(g int) *val {
	n := g * g
	ids := make([]float32, n*n)
	for i := range n {
		for j := range n {
			dr, dc := i/g-j/g, i%g-j%g
			ids[i*n+j] = float32(abs(dr)*g + abs(dc))
		}
	}
	v := s.relConst(fmt.Sprintf("absoffsets[%d]", g), []int{n * n}, ids, fmt.Sprintf("each query and key's absolute offset on a %d×%d grid, |Δrow|·%d + |Δcol| (made from the grid's shape)", g, g, g))
	v.intType = true
	return v
}
