package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// decayScales are the constants c a gated recurrence's decay is tried
// with, log a = −c·r·softplus(λ): Griffin's RG-LRU writes 8, and 1 is the
// plain form.
var decayScales = []float64{8, 1}

// maxRecurrences bounds the operand assignments gatedRecurrence runs a
// scan for.
const maxRecurrences = 64

// gatedRecurrence explains t [B, L, W] as a gated diagonal linear
// recurrence over W channels (a real-gated linear recurrent unit):
//
//	i = σ(x·Wᵢ + bᵢ),  r = σ(x·Wᵣ + bᵣ)   (block-diagonal: H heads of W/H)
//	log a = −c·r·softplus(λ),  a = exp(log a)
//	u = (x·i)·√(1 − exp(2·log a)), u₀ = x₀·i₀ (the first row is not scaled)
//	h_t = a_t·h_{t−1} + u_t,  t = h
//
// x a value [B, L, W] of the scope, Wᵢ and Wᵣ 3-D values [H, W/H, W/H]
// (each head's matrix applied as x_h·W_h, input by output), bᵢ and bᵣ
// [H, W/H] values or both none, λ a vector [W], c in decayScales. The
// recurrence is program.OpSSMScan with one head of width 1 and one state
// per channel: dt = log a, A = 1, x = u / log a, B = C = 1, so that
// exp(dt·A) = a and dt·x·B = u. The first row's input unscaled assumes the
// positions start at 0 there (the unit resets its state where a position
// is 0). One of glue's late forms.
func (s *synth) gatedRecurrence(t *val, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	usable := func(v *val) bool { return v != nil && !v.opaque && v.data != nil && !v.intType }
	var xs, mats, biases, lambdas []*val
	for _, v := range vals {
		if !usable(v) {
			continue
		}
		switch {
		case slices.Equal(v.shape, []int{bs, l, w}):
			xs = append(xs, v)
		case len(v.shape) == 3 && v.shape[1] == v.shape[2] && v.shape[0]*v.shape[1] == w && v.shape[0] < w:
			mats = append(mats, v)
		case len(v.shape) == 2 && v.shape[0]*v.shape[1] == w && v.shape[1] > 1 && v.shape[0] < w:
			biases = append(biases, v)
		case len(v.shape) == 1 && v.shape[0] == w:
			lambdas = append(lambdas, v)
		}
	}
	if len(xs) == 0 || len(mats) < 2 || len(lambdas) == 0 {
		return nil
	}
	type pair struct{ wi, bi, wr, br *val }
	var pairs []pair
	for _, wi := range mats {
		for _, wr := range mats {
			if wi == wr || !slices.Equal(wi.shape, wr.shape) {
				continue
			}
			pairs = append(pairs, pair{wi, nil, wr, nil})
			for _, bi := range biases {
				for _, br := range biases {
					if bi != br && bi.shape[0] == wi.shape[0] && br.shape[0] == wr.shape[0] {
						pairs = append(pairs, pair{wi, bi, wr, br})
					}
				}
			}
		}
	}
	if len(xs)*len(pairs)*len(lambdas)*len(decayScales) > maxRecurrences {
		return nil
	}
	f := t.format
	var cands []*expr
	for _, x := range xs {
		for _, p := range pairs {
			in := s.blockGate(x, p.wi, p.bi, f)
			rg := s.blockGate(x, p.wr, p.br, f)
			if in == nil || rg == nil {
				continue
			}
			gated := s.derive(&expr{op: program.OpMul, args: []*val{x, in}, out: f, label: "x·i"})
			for _, lam := range lambdas {
				sp := s.softplus(lam)
				for _, c := range decayScales {
					label := fmt.Sprintf("gated recurrence of %s: i = σ(x·%s + %s), r = σ(x·%s + %s), log a = −%g·r·softplus(%s)",
						x.origin, p.wi.origin, originOr(p.bi, "0"), p.wr.origin, originOr(p.br, "0"), c, lam.origin)
					if e := s.recurrenceOf(gated, rg, sp, c, t, label); e != nil {
						cands = append(cands, e)
					}
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// blockGate is σ(x·W + b) over H heads: x [B, L, H·k] read per head
// (columns h·k … (h+1)·k − 1), W [H, k, k] each head's matrix input by
// output, b [H, k] or nil; in format f.
func (s *synth) blockGate(x, w, b *val, f precision.Format) *val {
	bs, l := x.shape[0], x.shape[1]
	heads, k := w.shape[0], w.shape[1]
	var parts []*val
	for h := range heads {
		xh := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: h * k, End: (h + 1) * k}, args: []*val{x}, out: x.format, label: "a head's columns"})
		wh := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: h, End: h + 1}, args: []*val{w}, out: w.format, label: "a head's matrix"})
		wh = s.reshape(wh, []int{k, k})
		wt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{wh}, out: w.format, label: "input by output"})
		var bh *val
		if b != nil {
			bh = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: h, End: h + 1}, args: []*val{b}, out: b.format, label: "a head's bias"})
			if bh = s.reshape(bh, []int{k}); bh == nil {
				return nil
			}
		}
		if xh == nil || wt == nil {
			return nil
		}
		y := s.derive(&expr{op: program.OpLinear, args: []*val{xh, wt, bh}, out: f, label: "a head's gate"})
		if y == nil || !slices.Equal(y.shape, []int{bs, l, k}) {
			return nil
		}
		parts = append(parts, y)
	}
	z := parts[0]
	if heads > 1 {
		z = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: parts, out: f, label: "heads joined"})
	}
	return s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{z}, out: f, label: "σ"})
}

// recurrenceOf is gatedRecurrence's candidate for one assignment: gated =
// x·i, r the recurrence gate, sp = softplus(λ), c the decay's scale; each
// step stored in f as the forward's ops are, the square root as
// exp(½·log) in f32.
func (s *synth) recurrenceOf(gated, r, sp *val, c float64, t *val, label string) *expr {
	f := t.format
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	cr := s.derive(&expr{op: program.OpMul, args: []*val{r, s.constant(-c)}, out: f, label: "−c·r"})
	la := s.derive(&expr{op: program.OpMul, args: []*val{cr, sp}, out: f, label: "log a"})
	la2 := s.derive(&expr{op: program.OpMul, args: []*val{la, s.constant(2)}, out: f, label: "2·log a"})
	a2 := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{la2}, out: f, label: "a²"})
	one := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), a2}, out: f, label: "1 − a²"})
	lg := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActLog}, args: []*val{one}, out: precision.F32, label: "log(1 − a²)"})
	half := s.derive(&expr{op: program.OpMul, args: []*val{lg, s.constant(0.5)}, out: precision.F32, label: "½·log(1 − a²)"})
	m := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{half}, out: f, label: "√(1 − a²)"})
	scaled := s.derive(&expr{op: program.OpMul, args: []*val{gated, m}, out: f, label: "x·i·√(1 − a²)"})
	first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: 1}, args: []*val{gated}, out: f, label: "the first row unscaled"})
	rest := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 1, End: l}, args: []*val{scaled}, out: f, label: "the later rows"})
	if first == nil || rest == nil {
		return nil
	}
	u := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{first, rest}, out: f, label: "the recurrence's input"})
	// ssm_scan with one head of width 1 and one state per channel
	xin := s.derive(&expr{op: program.OpDiv, args: []*val{u, la}, out: precision.F32, label: "u / log a"})
	zero := s.derive(&expr{op: program.OpMul, args: []*val{la, s.constant(0)}, out: precision.F32, label: "0"})
	ones := s.derive(&expr{op: program.OpAdd, args: []*val{zero, s.constant(1)}, out: precision.F32, label: "1"})
	rate := s.derive(&expr{op: program.OpAdd, args: []*val{s.derive(&expr{op: program.OpMul, args: []*val{sp, s.constant(0)}, out: precision.F32, label: "0"}), s.constant(1)}, out: precision.F32, label: "A = 1"})
	xin = s.reshape(xin, []int{bs, l, w, 1})
	bm := s.reshape(ones, []int{bs, l, w, 1})
	dt := s.reshape(la, []int{bs, l, w})
	if xin == nil || bm == nil || dt == nil || rate == nil {
		return nil
	}
	scan := s.derive(&expr{op: program.OpSSMScan, args: []*val{xin, dt, rate, bm, bm, nil}, out: f, label: label})
	if scan == nil {
		return nil
	}
	return &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{scan}, out: f, label: label}
}
