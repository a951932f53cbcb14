package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxMixes bounds the (a, b, μ) triples mixedRows scores.
const maxMixes = 1024

// shiftedRows explains t [B, L, C] as a value of its shape moved one
// position later along the sequence, zeros in the first row (a token
// shift: nn.ZeroPad2d((0, 0, 1, −1)) over [B, L, C]). One of glue's late
// forms.
func (s *synth) shiftedRows(t *val, vals []*val) *val {
	if len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	var cands []*expr
	for _, v := range sameShape(t, vals) {
		if v.opaque || v.data == nil || v == t {
			continue
		}
		if e := s.shiftOf(v, t.format); e != nil {
			cands = append(cands, e)
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// shiftOf is v [B, L, C] one position later along axis 1, zeros first:
// [0, v₀, …, v_{L−2}], in format f (a movement: no rounding but f's).
func (s *synth) shiftOf(v *val, f precision.Format) *expr {
	l := v.shape[1]
	head := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: 1}, args: []*val{v}, out: v.format, label: "the first row"})
	zero := s.derive(&expr{op: program.OpMul, args: []*val{head, s.constant(0)}, out: f, label: "a row of zeros"})
	body := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: l - 1}, args: []*val{v}, out: v.format, label: "all rows but the last"})
	if zero == nil || body == nil {
		return nil
	}
	if body.format != f {
		body = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: f}, args: []*val{body}, out: f, label: "cast"})
		if body == nil {
			return nil
		}
	}
	return &expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{zero, body}, out: f, label: fmt.Sprintf("%s one position later, zeros first", v.origin)}
}

// mixedRows explains t as a per-channel interpolation of two values of its
// shape by a parameter μ of the last axis's width ([C], or [1, …, 1, C]):
// t = a·μ + b·(1 − μ), each product, 1 − μ and the sum stored in t's
// format (RWKV's time mix of a token and the one before it). One of glue's
// late forms.
func (s *synth) mixedRows(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	c := t.shape[len(t.shape)-1]
	var mus []*val
	for _, v := range vals {
		if v.opaque || !v.param || v.data == nil || v.numel() != c || v.shape[len(v.shape)-1] != c || len(v.shape) > len(t.shape) {
			continue
		}
		mus = append(mus, v)
	}
	var same []*val
	for _, v := range sameShape(t, vals) {
		if !v.opaque && v.data != nil && v != t {
			same = append(same, v)
		}
	}
	if len(mus) == 0 || len(same) < 2 || len(mus)*len(same)*(len(same)-1) > maxMixes {
		return nil
	}
	f := t.format
	var cands []*expr
	for _, mu := range mus {
		rest := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), mu}, out: mu.format, label: "1 − μ"})
		if rest == nil {
			continue
		}
		scaled := map[*val][2]*val{}
		for _, v := range same {
			scaled[v] = [2]*val{
				s.derive(&expr{op: program.OpMul, args: []*val{v, mu}, out: f, label: "a·μ"}),
				s.derive(&expr{op: program.OpMul, args: []*val{v, rest}, out: f, label: "b·(1 − μ)"}),
			}
		}
		for _, a := range same {
			for _, b := range same {
				pa, pb := scaled[a][0], scaled[b][1]
				if a == b || pa == nil || pb == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpAdd, args: []*val{pa, pb}, out: f,
					label: fmt.Sprintf("%s·%s + %s·(1 − %s)", a.origin, mu.origin, b.origin, mu.origin)})
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// decayedAverage explains t [B, L, W] as a weighted average of values
// over the positions so far with exponentially decaying weights and a
// bonus for the current one (RWKV-4's WKV), optionally times a gate f(g):
//
//	t_t = (Σ_{i<t} e^{(t−1−i)·w + k_i}·v_i + e^{u + k_t}·v_t) / (Σ_{i<t} e^{(t−1−i)·w + k_i} + e^{u + k_t})
//
// w = −exp(d), k and v values [B, L, W], d and u vectors [W], g a value
// [B, L, W], f in gateActs. Both sums are program.OpSSMScan over the W
// channels as heads of width 1 with one state (dt = 1, A = w, B = C = 1)
// of the inputs e^k·v and e^k moved one position later; the bonus term is
// added outside. The exponentials are not stabilised (the forward's
// running maximum is not kept): a key above ~88 overflows f32. The first
// row, t₀ = f(g₀)·v₀, picks v and the gate before any scan runs. One of
// glue's late forms.
func (s *synth) decayedAverage(t *val, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	var rows, vecs []*val
	for _, v := range vals {
		if v.opaque || v.data == nil || v == t || v.intType {
			continue
		}
		if slices.Equal(v.shape, t.shape) {
			rows = append(rows, v)
		}
		if len(v.shape) == 1 && v.shape[0] == w {
			vecs = append(vecs, v)
		}
	}
	if len(rows) < 2 || len(vecs) < 2 {
		return nil
	}
	// the first row: t₀ = f(g₀)·v₀ (or v₀)
	type pick struct {
		v    *val
		g    *val
		f    exec.ActKind
		gate bool
	}
	first := func(v *val) []float32 { return v.data[:w] }
	near := func(a, b []float32) bool { return relRMS(t.format, a, b) <= tolerance(t.format) }
	var picks []pick
	t0 := first(t)
	for _, v := range rows {
		v0 := first(v)
		if near(v0, t0) {
			picks = append(picks, pick{v: v})
		}
		for _, g := range rows {
			if g == v {
				continue
			}
			for _, f := range gateActs {
				p := make([]float32, w)
				for i, x := range first(g) {
					p[i] = exec.Activate(f, x, exec.MathPrecise) * v0[i]
				}
				if near(p, t0) {
					picks = append(picks, pick{v, g, f, true})
				}
			}
		}
	}
	if len(picks) == 0 || len(picks)*len(rows)*len(vecs)*(len(vecs)-1) > maxRecurrences {
		return nil
	}
	var cands []*expr
	for _, p := range picks {
		for _, k := range rows {
			if k == p.v || k == p.g {
				continue
			}
			for _, d := range vecs {
				for _, u := range vecs {
					if d == u {
						continue
					}
					label := fmt.Sprintf("decayed average of %s weighted by exp(%s), w = −exp(%s), bonus %s", p.v.origin, k.origin, d.origin, u.origin)
					avg := s.averageOf(k, p.v, d, u, bs, l, w, t.format, label)
					if avg == nil {
						continue
					}
					if !p.gate {
						cands = append(cands, avg.from)
						continue
					}
					g := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: p.f}, args: []*val{p.g}, out: t.format, label: "the gate"})
					cands = append(cands, &expr{op: program.OpMul, args: []*val{g, avg}, out: t.format, label: fmt.Sprintf("%v(%s) times %s", p.f, p.g.origin, label)})
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// averageOf is decayedAverage's quotient for one assignment, in f32 but
// for the quotient, stored in f.
func (s *synth) averageOf(k, v, d, u *val, bs, l, w int, f precision.Format, label string) *val {
	f32 := precision.F32
	ek := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{k}, out: f32, label: "e^k"})
	ekv := s.derive(&expr{op: program.OpMul, args: []*val{ek, v}, out: f32, label: "e^k·v"})
	uk := s.derive(&expr{op: program.OpAdd, args: []*val{k, u}, out: f32, label: "u + k"})
	euk := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{uk}, out: f32, label: "e^(u+k)"})
	eukv := s.derive(&expr{op: program.OpMul, args: []*val{euk, v}, out: f32, label: "e^(u+k)·v"})
	ed := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{d}, out: f32, label: "exp(d)"})
	rate := s.derive(&expr{op: program.OpMul, args: []*val{ed, s.constant(-1)}, out: f32, label: "w = −exp(d)"})
	zero := s.derive(&expr{op: program.OpMul, args: []*val{ek, s.constant(0)}, out: f32, label: "0"})
	ones := s.derive(&expr{op: program.OpAdd, args: []*val{zero, s.constant(1)}, out: f32, label: "1"})
	if ekv == nil || eukv == nil || rate == nil || ones == nil {
		return nil
	}
	one4 := s.reshape(ones, []int{bs, l, w, 1})
	sum := func(x *val, what string) *val {
		e := s.shiftOf(x, f32)
		if e == nil {
			return nil
		}
		sh := s.derive(e)
		sh = s.reshape(sh, []int{bs, l, w, 1})
		if sh == nil || one4 == nil {
			return nil
		}
		sc := s.derive(&expr{op: program.OpSSMScan, args: []*val{sh, ones, rate, one4, one4, nil}, out: f32, label: "the decayed sum of the earlier " + what})
		return s.reshape(sc, []int{bs, l, w})
	}
	num, den := sum(ekv, "e^k·v"), sum(ek, "e^k")
	if num == nil || den == nil {
		return nil
	}
	num = s.derive(&expr{op: program.OpAdd, args: []*val{num, eukv}, out: f32, label: "numerator"})
	den = s.derive(&expr{op: program.OpAdd, args: []*val{den, euk}, out: f32, label: "denominator"})
	return s.derive(&expr{op: program.OpDiv, args: []*val{num, den}, out: f, label: label})
}
