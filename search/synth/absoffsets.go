package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec/program"
)

// absOffsetBiases are score biases [1, H, Sq, Sk] made from the scope's
// parameter tables [H, L] over the absolute offsets between the cells of
// a square grid of queries and a square grid of keys: the queries' grid
// the keys' own (Sq = Sk) or every s-th of its cells on each axis (a
// subsampled attention's queries), each offset (|s·qr − kr|, |s·qc − kc|)
// numbered in the order the pairs, queries then keys row-major, first
// meet it (LeViT's, TinyViT's and EfficientFormer's attention biases,
// indexed by a buffer their forward never records: a constant of the
// grids' shapes). L must be the number of offsets.
func (s *synth) absOffsetBiases(sc *scope, heads, qrows, krows int) []*val {
	gq, gk := isqrt(qrows), isqrt(krows)
	if gq*gq != qrows || gk*gk != krows || gq > gk {
		return nil
	}
	var out []*val
	for stride := 1; stride <= gk; stride++ {
		// the queries every stride-th key cell: ⌈gk/stride⌉ = gq
		if (gk+stride-1)/stride != gq {
			continue
		}
		ids, n := absOffsets(gq, gk, stride)
		for _, tb := range s.headTables(sc, heads, n) {
			idx := s.relConst(fmt.Sprintf("absoffsets[%d,%d,%d]", gq, gk, stride), []int{qrows * krows}, ids,
				fmt.Sprintf("each query and key's absolute offset, queries every %d-th cell of a %d×%d grid of keys, numbered in the order the pairs first meet it (made from the grids' shapes)", stride, gk, gk))
			idx.intType = true
			// gathered along the table's columns: rows of its transpose
			cols := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{tb}, out: tb.format, label: "the table's offsets as rows"})
			gth := s.derive(&expr{op: program.OpGather, args: []*val{cols, idx}, out: tb.format, label: "table entries at the grids' absolute offsets"})
			gth = s.reshape(gth, []int{qrows, krows, heads})
			p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1}}, args: []*val{gth}, out: tb.format, label: "heads first"})
			if b := s.reshape(p, []int{1, heads, qrows, krows}); b != nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// absOffsets numbers the absolute offsets between a gq×gq grid of
// queries, every stride-th cell of a gk×gk grid of keys, and the keys:
// the index of each (query, key) pair's offset in first-met order,
// queries then keys row-major, and how many offsets there are.
func absOffsets(gq, gk, stride int) ([]float32, int) {
	ids := make([]float32, gq*gq*gk*gk)
	seen := map[[2]int]int{}
	for i := range gq * gq {
		for j := range gk * gk {
			off := [2]int{abs(i/gq*stride - j/gk), abs(i%gq*stride - j%gk)}
			id, ok := seen[off]
			if !ok {
				id = len(seen)
				seen[off] = id
			}
			ids[i*gk*gk+j] = float32(id)
		}
	}
	return ids, len(seen)
}

func isqrt(n int) int { return int(math.Round(math.Sqrt(float64(n)))) }

// maxTableRows bounds how many rows of a table headTables offers apart.
const maxTableRows = 16

// headTables are the scope's parameter tables [heads, n], and where one
// head attends apart (heads 1) each row of a table [H, n] (EfficientViT-M's
// cascaded heads, each its own attention reading its row of the bias).
func (s *synth) headTables(sc *scope, heads, n int) []*val {
	var out []*val
	for _, tb := range sc.vals {
		if !tb.param || tb.opaque || len(tb.shape) != 2 || tb.shape[1] != n {
			continue
		}
		switch {
		case tb.shape[0] == heads:
			out = append(out, tb)
		case heads == 1 && tb.shape[0] <= maxTableRows:
			for r := range tb.shape[0] {
				if row := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: r, End: r + 1}, args: []*val{tb}, out: tb.format, label: fmt.Sprintf("row %d of a table of heads", r)}); row != nil {
					out = append(out, row)
				}
			}
		}
	}
	return out
}
