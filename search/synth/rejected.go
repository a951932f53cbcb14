package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// rejected explains t [B, L, H, D] as exclusive self-attention's output:
// an attention output a of t's shape with each row's component along its
// own value removed, a − c_h·(a·v̂)·v̂, v̂ the row's value [B, L, Hkv, D]
// (or heads first, [B, Hkv, L, D]) normalised, its kv heads repeated over
// the query heads they serve, c_h one number per head: 1, or tanh of a
// parameter of H entries (a learned strength). c is read by least squares
// per head, then matched.
func (s *synth) rejected(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	bs, l, h, d := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	var as, vs, alphas []*val
	for _, v := range vals {
		switch {
		case v.opaque || v.data == nil || v == t || v.integral():
		case slices.Equal(v.shape, t.shape) && !v.param:
			as = append(as, v)
		case len(v.shape) == 4 && v.shape[0] == bs && v.shape[3] == d && !v.param:
			vs = append(vs, v)
		case v.param && v.numel() == h:
			alphas = append(alphas, v)
		}
	}
	vs = append(vs, as...) // v of t's own layout (as many kv heads as heads)
	var cands []*expr
	for _, a := range as {
		for _, v := range vs {
			if v == a {
				continue
			}
			u, hk := s.unitValues(v, l, h, d)
			if u == nil {
				continue
			}
			c, ok := rejectionStrengths(a.data, u.data, t.data, h, d, tolerance(t.format))
			if !ok {
				continue
			}
			for _, k := range s.strengths(c, alphas, t.format) {
				cands = append(cands, s.rejection(a, u, k, hk))
			}
		}
	}
	cands = slices.DeleteFunc(cands, func(e *expr) bool { return e == nil })
	w, _ := s.best(t, cands)
	return w
}

// unitValues is v laid out [B, L, H, D] (heads last or first, kv heads
// repeated over the H query heads) and normalised per head in f32; nil
// where v is no such value. hk is v's kv heads.
func (s *synth) unitValues(v *val, l, h, d int) (*val, int) {
	bs := v.shape[0]
	x := v
	var hk int
	switch {
	case v.shape[1] == l && h%v.shape[2] == 0:
		hk = v.shape[2]
	case v.shape[2] == l && h%v.shape[1] == 0:
		hk = v.shape[1]
		x = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{v}, out: v.format, label: "heads after the rows"})
	default:
		return nil, 0
	}
	if hk < h {
		x = s.reshape(x, []int{bs, l, hk, 1, d})
		x = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: h / hk, Axis: 3}, args: []*val{x}, out: v.format, label: "kv heads repeated"})
		x = s.reshape(x, []int{bs, l, h, d})
	}
	if x == nil {
		return nil, 0
	}
	// F.normalize(x.float()): x / max(‖x‖, ε) in f32, as an RMS norm times
	// 1/√d, then in x's format
	n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormRMS, Eps: 1e-30}}, args: []*val{x, nil, nil}, out: precision.F32, label: "x / √(mean x²)"})
	u := s.derive(&expr{op: program.OpMul, args: []*val{n, s.constant(1 / math.Sqrt(float64(d)))}, out: precision.F32, label: "x / ‖x‖"})
	if x.format != precision.F32 {
		u = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: x.format}, args: []*val{u}, out: x.format, label: "in the values' format"})
	}
	return u, hk
}

// rejectionStrengths reads c_h in t = a − c_h·(a·u)·u by least squares
// per head (u unit rows); ok where the fit explains t to a quarter of the
// format's tolerance (tol), 1e-3 at least, and the removal is not nothing.
func rejectionStrengths(a, u, t []float32, h, d int, tol float64) ([]float64, bool) {
	num, den := make([]float64, h), make([]float64, h)
	rows := len(a) / d
	for r := range rows {
		hd := r % h
		var p float64
		for i := range d {
			p += float64(a[r*d+i]) * float64(u[r*d+i])
		}
		for i := range d {
			x := p * float64(u[r*d+i])
			num[hd] += (float64(a[r*d+i]) - float64(t[r*d+i])) * x
			den[hd] += x * x
		}
	}
	c := make([]float64, h)
	for i := range c {
		if den[i] == 0 {
			return nil, false
		}
		c[i] = num[i] / den[i]
	}
	var e2, t2 float64
	for r := range rows {
		hd := r % h
		var p float64
		for i := range d {
			p += float64(a[r*d+i]) * float64(u[r*d+i])
		}
		for i := range d {
			y := float64(a[r*d+i]) - c[hd]*p*float64(u[r*d+i])
			e2 += (y - float64(t[r*d+i])) * (y - float64(t[r*d+i]))
			t2 += float64(t[r*d+i]) * float64(t[r*d+i])
		}
	}
	nonzero := slices.ContainsFunc(c, func(x float64) bool { return math.Abs(x) > 1e-3 })
	fit := max(1e-3, tol/4)
	return c, nonzero && e2 <= fit*fit*t2
}

// strengths are the values [1, 1, H, 1] that c may stand for: one 1 for
// every head, or tanh of a parameter of H entries; read to 1e-3, or in a
// narrow format to a rounding step or two.
func (s *synth) strengths(c []float64, alphas []*val, f precision.Format) []*val {
	var out []*val
	within := 1e-3
	if f != precision.F32 {
		within = 2e-2
	}
	if !slices.ContainsFunc(c, func(x float64) bool { return math.Abs(x-1) > within }) {
		out = append(out, s.constant(1))
	}
	for _, a := range alphas {
		ok := true
		for i, x := range c {
			ok = ok && math.Abs(math.Tanh(float64(a.data[i]))-x) <= within*max(1, math.Abs(x))
		}
		if !ok {
			continue
		}
		th := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActTanh}, args: []*val{a}, out: a.format, label: "tanh of the strengths"})
		out = append(out, s.reshape(th, []int{1, 1, len(c), 1}))
	}
	return out
}

// rejection is a − (k·(a·u))·u for a, u [B, L, H, D] and k a scalar or
// [1, 1, H, 1]: the dot products one batched product of rows.
func (s *synth) rejection(a, u, k *val, hk int) *expr {
	bs, l, h, d := a.shape[0], a.shape[1], a.shape[2], a.shape[3]
	dot := s.derive(&expr{op: program.OpMatMul, args: []*val{s.reshape(a, []int{bs, l, h, 1, d}), s.reshape(u, []int{bs, l, h, d, 1})}, out: a.format, label: "a·v̂ per row and head"})
	dot = s.reshape(dot, []int{bs, l, h, 1})
	scaled := s.derive(&expr{op: program.OpMul, args: []*val{k, dot}, out: a.format, label: "strength·(a·v̂)"})
	along := s.derive(&expr{op: program.OpMul, args: []*val{scaled, u}, out: a.format, label: "the component along v̂"})
	if along == nil {
		return nil
	}
	return &expr{op: program.OpSub, args: []*val{a, along}, out: a.format, label: fmt.Sprintf("a − c·(a·v̂)v̂ (exclusive self-attention, %d kv heads)", hk)}
}
