package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/internal/simple"
)

// fitSignedAct explains t as one of torch's pointwise maps that combine x
// with a function of itself or of −x, each written in the vocabulary:
//
//	−softplus(−x)            logsigmoid
//	x − tanh(x)              tanhshrink
//	x / (1 + |x|)            softsign (|x| = x > 0 ? x : −x)
//	min(max(x, a), b)        hardtanh, a and b read off t's extremes
//	x − min(max(x, −λ), λ)   softshrink
//	|x| − λ > 0 ? x : 0      hardshrink
//
// λ read off the values (the largest |x| mapped to 0, snapped to a simple
// number). Each step in f32, the last rounded to t's format. Tried where
// a parameterless call's other forms fail.
func (s *synth) fitSignedAct(x, t *val) *val {
	if !equalShape(x, t) || x.integral() || x.opaque || x.numel() < 8 {
		return nil
	}
	f32 := precision.F32
	neg := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(-1)}, out: f32, label: "−x"})
	if neg == nil {
		return nil
	}
	abs := s.derive(&expr{op: program.OpWhere, args: []*val{x, x, neg}, out: f32, label: "|x|"})
	var cands []*expr
	if sp := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSoftplus}, args: []*val{neg}, out: f32, label: "softplus(−x)"}); sp != nil {
		cands = append(cands, &expr{op: program.OpMul, args: []*val{sp, s.constant(-1)}, out: t.format, label: "−softplus(−x) (logsigmoid)"})
	}
	if th := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActTanh}, args: []*val{x}, out: f32, label: "tanh(x)"}); th != nil {
		cands = append(cands, &expr{op: program.OpSub, args: []*val{x, th}, out: t.format, label: "x − tanh(x) (tanhshrink)"})
	}
	if abs != nil {
		if den := s.derive(&expr{op: program.OpAdd, args: []*val{abs, s.constant(1)}, out: f32, label: "1 + |x|"}); den != nil {
			cands = append(cands, &expr{op: program.OpDiv, args: []*val{x, den}, out: t.format, label: "x / (1 + |x|) (softsign)"})
		}
	}
	lo, hi := slices.Min(t.data), slices.Max(t.data)
	if lo > slices.Min(x.data) && hi < slices.Max(x.data) && lo < hi {
		for _, a := range snapped(float64(lo)) {
			for _, b := range snapped(float64(hi)) {
				if c := s.clampOf(x, a, b, f32); c != nil {
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{c}, out: t.format, label: fmt.Sprintf("min(max(x, %g), %g) (hardtanh)", a, b)})
				}
			}
		}
	}
	if lam, ok := shrinkThreshold(x.data, t.data); ok && abs != nil {
		for _, l := range lam {
			if c := s.clampOf(x, -l, l, f32); c != nil {
				cands = append(cands, &expr{op: program.OpSub, args: []*val{x, c}, out: t.format, label: fmt.Sprintf("x − min(max(x, −%g), %g) (softshrink)", l, l)})
			}
			if cond := s.derive(&expr{op: program.OpSub, args: []*val{abs, s.constant(l)}, out: f32, label: "|x| − λ"}); cond != nil {
				zero := s.zeros([]int{1}, f32, "zero", "a zero (a pointwise map's other side)")
				cands = append(cands, &expr{op: program.OpWhere, args: []*val{cond, x, zero}, out: t.format, label: fmt.Sprintf("|x| > %g ? x : 0 (hardshrink)", l)})
			}
		}
	}
	return s.bestFit(t, cands, "composed_act")
}

// clampOf is min(max(x, a), b) in format f.
func (s *synth) clampOf(x *val, a, b float64, f precision.Format) *val {
	m := s.derive(&expr{op: program.OpMaximum, args: []*val{x, s.constant(a)}, out: f, label: fmt.Sprintf("max(x, %g)", a)})
	if m == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpMinimum, args: []*val{m, s.constant(b)}, out: f, label: fmt.Sprintf("min(·, %g)", b)})
}

// shrinkThreshold reads λ of a shrink (t = 0 where |x| ≤ λ): the simple
// numbers between the largest |x| mapped to 0 and the smallest |x| that
// is not, the median of |x| − |t| over the kept entries (softshrink's
// move) snapped, then the midpoint; false where no entry is mapped to 0
// or none is kept.
func shrinkThreshold(x, t []float32) ([]float64, bool) {
	zeroMax, keptMin := -1.0, math.Inf(1)
	for i, xv := range x {
		a := math.Abs(float64(xv))
		if t[i] == 0 {
			zeroMax = max(zeroMax, a)
		} else {
			keptMin = min(keptMin, a)
		}
	}
	if zeroMax <= 0 || math.IsInf(keptMin, 1) || keptMin <= zeroMax {
		return nil, false
	}
	var out []float64
	for _, c := range simple.Candidates((zeroMax + keptMin) / 2) {
		if c >= zeroMax && c < keptMin && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	// softshrink moves the kept entries by λ: |x| − |t| there
	var moved []float64
	for i, xv := range x {
		if t[i] != 0 {
			moved = append(moved, math.Abs(float64(xv))-math.Abs(float64(t[i])))
		}
	}
	slices.Sort(moved)
	if m := moved[len(moved)/2]; m > 0 {
		for _, c := range snapped(m) {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return append(out, (zeroMax+keptMin)/2), true
}
