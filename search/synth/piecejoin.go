package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxPieces bounds the pieces piecewiseJoin reads one target as.
const maxPieces = 256

// piecewiseJoin explains t [.., W] as values joined along the last axis,
// more pieces than the joins' enumeration takes (MarkupLM's xpath input:
// fifty embeddings of tag ids and fifty of subscripts, the depth-i pair
// summed, the fifty sums joined): each of K = W/w equal runs of t's
// channels read as a value of the scope of that shape, or the sum of
// two, w taken from the values' widths (the widest that reads first).
// Tried once every other form has failed.
func (s *synth) piecewiseJoin(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.integral() {
		return nil
	}
	lead, width := t.shape[:len(t.shape)-1], t.shape[len(t.shape)-1]
	byWidth := map[int][]*val{}
	var widths []int
	for _, v := range vals {
		if v.opaque || v.param || v.data == nil || len(v.shape) != len(t.shape) || !slices.Equal(v.shape[:len(lead)], lead) {
			continue
		}
		w := v.shape[len(lead)]
		if w <= 0 || w >= width || width%w != 0 || width/w > maxPieces {
			continue
		}
		if byWidth[w] == nil {
			widths = append(widths, w)
		}
		byWidth[w] = append(byWidth[w], v)
	}
	slices.Sort(widths)
	slices.Reverse(widths)
	for _, w := range widths {
		if v := s.piecesOf(t, w, byWidth[w]); v != nil {
			return v
		}
	}
	return nil
}

// piecesOf reads t as runs of w channels, each one of ops or the sum of
// two (in the order they were made); nil where a run reads as neither.
func (s *synth) piecesOf(t *val, w int, ops []*val) *val {
	width := t.shape[len(t.shape)-1]
	rows, k := t.numel()/width, width/w
	slices.SortStableFunc(ops, func(a, b *val) int { return a.seq - b.seq })
	tol := tolerance(t.format)
	run := make([]float32, rows*w)
	sum := make([]float32, rows*w)
	var pieces []*val
	for p := range k {
		for r := range rows {
			copy(run[r*w:(r+1)*w], t.data[r*width+p*w:r*width+(p+1)*w])
		}
		var piece *val
		for _, a := range ops {
			if relRMS(t.format, a.data, run) <= tol {
				piece = a
				break
			}
		}
		for i := 0; piece == nil && i < len(ops); i++ {
			for j := i + 1; j < len(ops); j++ {
				for e := range sum {
					sum[e] = ops[i].data[e] + ops[j].data[e]
				}
				if relRMS(t.format, sum, run) <= tol {
					piece = s.derive(&expr{op: program.OpAdd, args: []*val{ops[i], ops[j]}, out: t.format, label: "piece sum"})
					break
				}
			}
		}
		if piece == nil {
			return nil
		}
		pieces = append(pieces, piece)
	}
	v, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: len(t.shape) - 1}, args: pieces, out: t.format,
		label: fmt.Sprintf("%d pieces of %d channels joined", k, w)}})
	return v
}

// filled explains t as one number but 0 everywhere (ids a model fills in
// when the request gives none: MarkupLM's padding tag at every depth): the
// scalar repeated along each axis of t's shape. Tried once every other
// form has failed, where the program would otherwise take t from the
// trace.
func (s *synth) filled(t *val) *val {
	if t.numel() < 2 || len(t.shape) == 0 {
		return nil
	}
	c := t.data[0]
	if c == 0 {
		return nil // zeros are a constant of the request's shape already
	}
	for _, x := range t.data {
		if x != c {
			return nil
		}
	}
	ones := make([]int, len(t.shape))
	for i := range ones {
		ones[i] = 1
	}
	v := s.reshape(s.constant(float64(c)), ones)
	for ax, n := range t.shape {
		if v == nil || n == 1 {
			continue
		}
		v = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: ax}, args: []*val{v}, out: t.format, label: fmt.Sprintf("%g everywhere", c)})
	}
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	return v
}
