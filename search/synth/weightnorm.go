package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitWeightNorm explains t as a weight normalisation of two arguments, a
// direction v of t's shape and a gain g of one entry per index of one
// axis d of v (g's other axes 1, or g a scalar): t = g · v / ‖v‖, the
// norm over every axis but d (torch's weight_norm: a convolution's
// weight made from its parameters when it is called). Composed of the
// vocabulary: v's axis d first, each of its rows normalised by an RMS
// norm of ε 0 (v / √(mean v²), in f32), times g / √n in f32, rounded
// once to t's format, the axes moved back.
func (s *synth) fitWeightNorm(xs []*val, t *val) *val {
	if len(xs) != 2 {
		return nil
	}
	var cands []*expr
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		v, g := xs[order[0]], xs[order[1]]
		if !slices.Equal(v.shape, t.shape) || v.integral() || g.integral() || len(v.shape) < 2 {
			continue
		}
		for d := range len(v.shape) {
			if gainAxis(g, v.shape, d) {
				if e := s.weightNorm(v, g, d, t.format); e != nil {
					cands = append(cands, e)
				}
			}
		}
		if g.numel() == 1 {
			if e := s.weightNorm(v, g, -1, t.format); e != nil {
				cands = append(cands, e)
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return s.bestFit(t, cands, "weight_norm")
}

// gainAxis reports whether g holds one entry per index of axis d of a
// value of shape vs: g's entries that many, its other axes 1.
func gainAxis(g *val, vs []int, d int) bool {
	if g.numel() != vs[d] || vs[d] < 2 {
		return false
	}
	if len(g.shape) == 1 {
		return true
	}
	if len(g.shape) != len(vs) {
		return false
	}
	for i, n := range g.shape {
		if i != d && n != 1 {
			return false
		}
	}
	return true
}

// weightNorm is the expression g · v / ‖v‖ with the norm over every axis
// of v but d (d < 0: over all of v, g a scalar), rounded once to f.
func (s *synth) weightNorm(v, g *val, d int, f precision.Format) *expr {
	perm := []int{}
	rows := 1
	if d >= 0 {
		perm = append(perm, d)
		rows = v.shape[d]
	}
	for i := range len(v.shape) {
		if i != d {
			perm = append(perm, i)
		}
	}
	moved := v
	if d > 0 {
		moved = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "the gain's axis first"})
	}
	n := v.numel() / rows
	flat := s.reshape(moved, []int{rows, n})
	if flat == nil {
		return nil
	}
	unit := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormRMS}}, args: []*val{flat, nil, nil},
		out: precision.F32, label: "v / √(mean v²) per row"})
	gain := s.derive(&expr{op: program.OpMul, args: []*val{s.reshape(g, []int{rows, 1}), s.constant(1 / math.Sqrt(float64(n)))}, out: precision.F32, label: "g / √n"})
	if unit == nil || gain == nil {
		return nil
	}
	label := fmt.Sprintf("g · v / ‖v‖ over every axis but %d", d)
	if d < 0 {
		label = "g · v / ‖v‖ over every axis"
	}
	w := s.derive(&expr{op: program.OpMul, args: []*val{unit, gain}, out: f, label: "g · v / ‖v‖, a row per gain"})
	if w == nil {
		return nil
	}
	if d <= 0 {
		return &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(v.shape)}, args: []*val{w}, out: f, label: label}
	}
	movedShape, back := permuteShape(v.shape, perm), inversePerm(perm)
	if w = s.reshape(w, movedShape); w == nil {
		return nil
	}
	return &expr{op: program.OpPermute, attrs: program.Attrs{Perm: back}, args: []*val{w}, out: f, label: label}
}

// madeWeights are the values of a call's scope that its children made
// from parameters alone, of two axes or more (a weight its
// parametrization makes from a direction and a gain when the call runs),
// in creation order: the operands a leaf fit of the call reads before
// its own parameters.
func (s *synth) madeWeights(sc *scope) []*val {
	var out []*val
	for _, v := range sc.vals {
		if sc.own[v] && !v.param && len(v.shape) >= 2 && !v.opaque && !v.integral() && fromParams(v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// fromParams reports whether v is computed from parameters and scalar
// constants alone.
func fromParams(v *val) bool {
	if v == nil {
		return true
	}
	if v.param {
		return true
	}
	if v.from == nil {
		return !v.opaque && !v.request && v.numel() == 1 && len(v.keys) == 0
	}
	for _, a := range v.from.args {
		if !fromParams(a) {
			return false
		}
	}
	return true
}

// weightNormed are params with a gain g and a direction v (torch's
// weight_norm hook over one dim d, 0 by default, 2 for wav2vec2's
// positional convolution: g of v's rank, one entry per index of v's axis
// d, its other axes 1; v of two axes or more) replaced, in v's place
// first, by the weight g · v / ‖v‖ they make; the others follow. nil
// where params hold no such pair.
func (s *synth) weightNormed(params []*val) []*val {
	for i, g := range params {
		for j, v := range params {
			if i == j || len(v.shape) < 2 || len(g.shape) != len(v.shape) {
				continue
			}
			d := -1
			for a := range v.shape {
				if gainAxis(g, v.shape, a) {
					d = a
					break
				}
			}
			if d < 0 {
				continue
			}
			e := s.weightNorm(v, g, d, v.format)
			if e == nil {
				continue
			}
			w := s.derive(e)
			if w == nil {
				continue
			}
			out := []*val{w}
			for k, p := range params {
				if k != i && k != j {
					out = append(out, p)
				}
			}
			return out
		}
	}
	return nil
}
