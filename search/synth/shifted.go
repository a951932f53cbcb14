package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// shiftedJoin explains t [.., S, C] as values of t's shape but for the
// last axis joined along it, some of them shifted along the rows by a
// few positions with zero rows filling what the shift empties (MobileBERT's
// trigram input: [x shifted up one row, x, x shifted down one row], each
// shift a pad of the cut rows with a zero row). Each piece is a value of
// the scope at a shift δ in {0, ±1, ±2} (row i reads row i + δ); at
// least one piece is shifted (joined explains the rest). Tried once every
// other form has failed.
func (s *synth) shiftedJoin(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.integral() {
		return nil
	}
	rows := len(t.shape) - 2
	S, C := t.shape[rows], t.shape[rows+1]
	if S < 3 {
		return nil
	}
	tol := tolerance(t.format)
	type piece struct {
		v     *val
		shift int
	}
	var pieces []piece
	shifted := false
	for off := 0; off < C && len(pieces) < 4; {
		var found *piece
		for _, v := range vals {
			if v.opaque || v.param || len(v.shape) != len(t.shape) || !slices.Equal(v.shape[:rows+1], t.shape[:rows+1]) {
				continue
			}
			n := v.shape[rows+1]
			if n > C-off || n == C {
				continue
			}
			sub := s.part(t, rows+1, off, off+n)
			for _, d := range []int{0, 1, -1, 2, -2} {
				if relRMS(t.format, shiftRows(v, rows, d), sub.data) <= tol {
					found = &piece{v, d}
					break
				}
			}
			if found != nil {
				break
			}
		}
		if found == nil {
			return nil
		}
		pieces = append(pieces, *found)
		shifted = shifted || found.shift != 0
		off += found.v.shape[rows+1]
	}
	if !shifted || len(pieces) < 2 {
		return nil
	}
	args := make([]*val, len(pieces))
	var desc []string
	for i, p := range pieces {
		args[i] = s.shiftedValue(p.v, rows, p.shift)
		if args[i] == nil {
			return nil
		}
		desc = append(desc, fmt.Sprintf("%s shifted %+d", p.v, p.shift))
	}
	w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: rows + 1}, args: args, out: t.format,
		label: fmt.Sprintf("rows shifted with zero rows, joined: %v", desc)}})
	return w
}

// shiftRows is v with row i along axis ax reading row i + d, zero where
// that is outside.
func shiftRows(v *val, ax, d int) []float32 {
	S := v.shape[ax]
	inner := 1
	for _, n := range v.shape[ax+1:] {
		inner *= n
	}
	out := make([]float32, len(v.data))
	for b := 0; b < len(v.data)/(S*inner); b++ {
		for i := range S {
			j := i + d
			if j < 0 || j >= S {
				continue
			}
			copy(out[(b*S+i)*inner:(b*S+i+1)*inner], v.data[(b*S+j)*inner:(b*S+j+1)*inner])
		}
	}
	return out
}

// shiftedValue makes v shifted by d rows along ax in the vocabulary: the
// rows kept (a slice) joined with |d| zero rows (a slice of v times 0)
// on the side the shift empties.
func (s *synth) shiftedValue(v *val, ax, d int) *val {
	if d == 0 {
		return v
	}
	S, k := v.shape[ax], max(d, -d)
	lo, hi := d, S
	if d < 0 {
		lo, hi = 0, S+d
	}
	kept := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: lo, End: hi}, args: []*val{v}, out: v.format, label: "rows kept"})
	edge := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: k}, args: []*val{v}, out: v.format, label: "rows"})
	zero := s.derive(&expr{op: program.OpMul, args: []*val{edge, s.constant(0)}, out: v.format, label: "zero rows"})
	if kept == nil || zero == nil {
		return nil
	}
	parts := []*val{kept, zero}
	if d < 0 {
		parts = []*val{zero, kept}
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: v.format, label: fmt.Sprintf("shifted %+d", d)})
}

// movedCombined explains t as a·b or a + b where a is a value of t's
// shape and b a value whose last two axes are t's swapped, moved to t's
// layout (a channels-first convolution's output transposed back before
// it meets the rows: ConvBERT's separable convolution times the query).
// Tried once every other form has failed.
func (s *synth) movedCombined(t *val, vals []*val) *val {
	n := len(t.shape)
	if n < 2 || t.shape[n-1] == t.shape[n-2] {
		return nil
	}
	swapped := slices.Clone(t.shape)
	swapped[n-1], swapped[n-2] = swapped[n-2], swapped[n-1]
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	perm[n-1], perm[n-2] = n-2, n-1
	same := sameShape(t, vals)
	for _, b := range vals {
		if b.opaque || !slices.Equal(b.shape, swapped) {
			continue
		}
		moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{b}, out: b.format, label: "last two axes swapped"})
		if moved == nil {
			continue
		}
		for _, a := range same {
			for _, op := range []program.Op{program.OpMul, program.OpAdd} {
				if w, _ := s.best(t, []*expr{{op: op, args: []*val{moved, a}, out: t.format, label: op.String() + " of a moved value"}}); w != nil {
					return w
				}
			}
		}
	}
	return nil
}
