package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// scalarGated explains t as a + act(p)·b: a branch b (a value of t's
// shape, or the leading rows of a longer one: an attention over the rows
// joined with extra tokens, cut back to the rows it adds to) added to a
// through a gate made of a one-number parameter p (tanh(α): GLIGEN's
// gated self-attention, Flamingo-style gated cross-attention; or α
// itself, or σ(α)). The scale g = (t − a)·b / |b|² is read first by least
// squares, so only pairs whose residual fits one number are built; a
// parameter whose gate equals g within 10⁻³ then names it. Tried once
// every other form failed.
func (s *synth) scalarGated(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.numel() < 8 {
		return nil
	}
	var gates []*val
	for _, v := range vals {
		if v.param && v.numel() == 1 && len(v.data) == 1 {
			gates = append(gates, v)
		}
	}
	if len(gates) == 0 {
		return nil
	}
	as := sameShape(t, vals)
	bs := append(slices.Clone(as), s.leadingCuts(t, vals)...)
	if len(as) > maxOperands {
		as = as[:maxOperands]
	}
	if len(bs) > 2*maxOperands {
		bs = bs[:2*maxOperands]
	}
	tol := tolerance(t.format)
	for _, a := range as {
		for _, b := range bs {
			if a == b {
				continue
			}
			g, ok := residualScale(t.data, a.data, b.data, tol)
			if !ok {
				continue
			}
			for _, p := range gates {
				for _, f := range []exec.ActKind{exec.ActTanh, exec.ActIdentity, exec.ActSigmoid} {
					if !nearGate(f, p, g, t.format) {
						continue
					}
					gate := s.reshape(p, []int{1})
					if f != exec.ActIdentity {
						gate = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{gate}, out: p.format, label: f.String() + " of a gate parameter"})
					}
					branch := s.derive(&expr{op: program.OpMul, args: []*val{b, gate}, out: t.format, label: "a branch times its gate"})
					if branch == nil {
						continue
					}
					e := &expr{op: program.OpAdd, args: []*val{a, branch}, out: t.format, label: fmt.Sprintf("a + %s(α)·b", f)}
					if v := s.derive(e); v != nil && relRMS(t.format, v.data, t.data) <= tol && s.everyStep(v, t, tol) {
						return v
					}
				}
			}
		}
	}
	return nil
}

// leadingCuts are the leading parts of values longer than t along one
// axis (t's shape otherwise): v[:, :n] for t's n.
func (s *synth) leadingCuts(t *val, vals []*val) []*val {
	var out []*val
	for _, v := range vals {
		if v.opaque || v.param || len(v.shape) != len(t.shape) {
			continue
		}
		for ax := range t.shape {
			if v.shape[ax] > t.shape[ax] && equalBut(v.shape, t.shape, ax) {
				if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: t.shape[ax]}, args: []*val{v}, out: v.format, label: "the leading rows"}); c != nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// residualScale is the g minimising |a + g·b − t| and whether that fit
// holds within tol (rel-RMS of t); g must be neither 0 nor 1 (plain sums
// are older forms').
func residualScale(t, a, b []float32, tol float64) (float64, bool) {
	var bb, br, tt float64
	for i := range t {
		r := float64(t[i]) - float64(a[i])
		bb += float64(b[i]) * float64(b[i])
		br += float64(b[i]) * r
		tt += float64(t[i]) * float64(t[i])
	}
	if bb == 0 || tt == 0 {
		return 0, false
	}
	g := br / bb
	if g == 0 || math.Abs(g-1) < 1e-6 {
		return 0, false
	}
	var e float64
	for i := range t {
		d := float64(a[i]) + g*float64(b[i]) - float64(t[i])
		e += d * d
	}
	return g, math.Sqrt(e/tt) <= tol
}

// nearGate reports whether f(p), stored in p's format as the forward
// keeps it, is g within 10⁻³ of g's size; where t is narrow, within 2⁻⁶
// (g is read through t's roundings; the gate built is checked whole).
func nearGate(f exec.ActKind, p *val, g float64, t precision.Format) bool {
	x := float64(p.data[0])
	var v float64
	switch f {
	case exec.ActTanh:
		v = math.Tanh(x)
	case exec.ActSigmoid:
		v = 1 / (1 + math.Exp(-x))
	default:
		v = x
	}
	v = float64(p.format.Round(float32(v)))
	tol := 1e-3
	if t != precision.F32 {
		tol = 1.0 / 64
	}
	return math.Abs(v-g) <= tol*math.Max(math.Abs(g), 1e-6)
}
