package synth

import (
	"github.com/zflow/zflow/search/internal/simple"

	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitSignSplit explains a call with scalar parameters (each of one entry)
// that maps x to t of x's shape as a learned activation split at zero
// (xIELU's family):
//
//	x > 0:  A·x·x + β·x
//	x ≤ 0:  (expm1(min(x, ε)) − x)·C + β·x
//
// Each side is fitted by least squares on its entries (A, β on the
// positive side, then C), β snapped to a simple number (a buffer the trace
// does not hold); A and C are bound to the call's parameters where one
// explains them: softplus(p), β + softplus(p) or p itself; ε (invisible
// unless inputs fall in (ε, 0]) is tried at 0 and −1e-6. The candidates
// are scored on the whole output; nil when no candidate reproduces it.
func (s *synth) fitSignSplit(x *val, params []*val, t *val) *val {
	if len(params) == 0 || len(params) > 4 || !equalShape(x, t) || x.integral() || x.numel() < 8 {
		return nil
	}
	for _, p := range params {
		if p.numel() != 1 {
			return nil
		}
	}
	// positive side: t = A·x² + β·x
	var s4, s3, s2, s2t, s1t float64
	var nPos, nNeg int
	for i, xv := range x.data {
		v, w := float64(xv), float64(t.data[i])
		if xv > 0 {
			s4, s3, s2 = s4+v*v*v*v, s3+v*v*v, s2+v*v
			s2t, s1t = s2t+v*v*w, s1t+v*w
			nPos++
		} else {
			nNeg++
		}
	}
	det := s4*s2 - s3*s3
	if nPos < 4 || nNeg < 4 || det == 0 {
		return nil
	}
	a := (s2t*s2 - s3*s1t) / det
	beta := (s4*s1t - s3*s2t) / det
	// negative side: t − β·x = C·(expm1(x) − x)
	c := func(beta float64) float64 {
		var gg, gr float64
		for i, xv := range x.data {
			if xv > 0 {
				continue
			}
			v := float64(xv)
			g := math.Expm1(v) - v
			gg, gr = gg+g*g, gr+g*(float64(t.data[i])-beta*v)
		}
		if gg == 0 {
			return 0
		}
		return gr / gg
	}
	if !(math.Abs(a) > 0) || math.IsNaN(beta) || c(beta) == 0 {
		return nil
	}
	// the coefficients come from a least-squares fit of the captured
	// values: they agree with the parameters to the format's precision
	tol := 1e-3
	if t.format != precision.F32 {
		tol = 1e-2
	}
	// β: the simple numbers near the fitted one (a buffer: 0.5), then
	// the fit itself; the whole output decides
	var betas []float64
	for _, b := range simple.Candidates(beta) {
		if math.Abs(b-beta) <= tol*math.Abs(beta) && !slices.Contains(betas, b) {
			betas = append(betas, b)
		}
	}
	betas = append(betas, beta)
	var cands []*expr
	for _, b := range betas {
		bc := s.constant(b)
		ax := s.bindScalar(a, params, nil, "A", tol)
		cx := s.bindScalar(c(b), params, bc, "C", tol)
		if ax == nil || cx == nil {
			continue
		}
		bx := s.derive(&expr{op: program.OpMul, args: []*val{bc, x}, out: t.format, label: "β·x"})
		m := s.derive(&expr{op: program.OpMul, args: []*val{ax, x}, out: t.format, label: "A·x"})
		m = s.derive(&expr{op: program.OpMul, args: []*val{m, x}, out: t.format, label: "A·x·x"})
		pos := s.derive(&expr{op: program.OpAdd, args: []*val{m, bx}, out: t.format, label: "A·x·x + β·x"})
		for _, eps := range []float64{0, -1e-6} {
			e := s.derive(&expr{op: program.OpMinimum, args: []*val{x, s.constant(eps)}, out: t.format, label: "min(x, ε)"})
			e = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExpm1}, args: []*val{e}, out: t.format, label: "expm1(min(x, ε))"})
			e = s.derive(&expr{op: program.OpSub, args: []*val{e, x}, out: t.format, label: "expm1(min(x, ε)) − x"})
			e = s.derive(&expr{op: program.OpMul, args: []*val{e, cx}, out: t.format, label: "(expm1(min(x, ε)) − x)·C"})
			neg := s.derive(&expr{op: program.OpAdd, args: []*val{e, bx}, out: t.format, label: "(expm1(min(x, ε)) − x)·C + β·x"})
			if pos == nil || neg == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpWhere, args: []*val{x, pos, neg}, out: t.format,
				label: fmt.Sprintf("x > 0 ? %s·x·x + %g·x : (expm1(min(x, %g)) − x)·%s + %g·x", ax.origin, b, eps, cx.origin, b)})
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "piecewise", label: v.from.label, candidates: ev}
	return v
}

func equalShape(a, b *val) bool {
	if len(a.shape) != len(b.shape) {
		return false
	}
	for i := range a.shape {
		if a.shape[i] != b.shape[i] {
			return false
		}
	}
	return true
}

// bindScalar is the value a fitted coefficient k is made of: softplus(p)
// or p itself for one of params, or, with plus given, plus + softplus(p);
// the nearest to k of those within tol of it (relative), else k as a
// constant. Its origin names the form (for labels).
func (s *synth) bindScalar(k float64, params []*val, plus *val, role string, tol float64) *val {
	var best *val
	bestDist := tol * math.Abs(k)
	try := func(v *val, origin string) {
		if v == nil || v.numel() != 1 {
			return
		}
		if d := math.Abs(float64(v.data[0]) - k); d <= bestDist {
			best, bestDist = v, d
			if origin != "" {
				v.origin = origin
			}
		}
	}
	for _, p := range params {
		sp := s.softplus(p)
		if plus != nil {
			try(s.derive(&expr{op: program.OpAdd, args: []*val{plus, sp}, out: precision.F32, label: "β + softplus"}),
				fmt.Sprintf("(%g + softplus(%s))", plus.data[0], p.origin))
		}
		try(sp, fmt.Sprintf("softplus(%s)", p.origin))
		try(p, "")
	}
	if best != nil {
		return best
	}
	c := s.constant(k)
	c.origin = fmt.Sprintf("%s=%.6g", role, k)
	return c
}

// fitPiecewise explains t as an activation split at zero, linear on the
// positive side and one of a small family on the rest:
//
//	x > 0:  λ·x
//	x ≤ 0:  c·x (a leaky ReLU: LeakyReLU's 0.01), or c·expm1(x) (ELU: c = α;
//	        SELU: λ and c = λ·α)
//
// λ and c read off each side by least squares and snapped to a simple
// number where one is as good; the pieces in f32 and the choice rounded
// once, as torch's kernels compute them. Tried where a parameterless
// call's other forms fail.
func (s *synth) fitPiecewise(x, t *val) *val {
	if !equalShape(x, t) || x.integral() || x.numel() < 8 {
		return nil
	}
	var pxx, pxt float64
	nPos := 0
	for i, xv := range x.data {
		if xv > 0 {
			v := float64(xv)
			pxx, pxt = pxx+v*v, pxt+v*float64(t.data[i])
			nPos++
		}
	}
	if nPos < 4 || nPos > x.numel()-4 || pxx == 0 {
		return nil
	}
	lambda := pxt / pxx
	if !(lambda > 0) {
		return nil
	}
	expm1 := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExpm1}, args: []*val{x}, out: precision.F32, label: "expm1(x)"})
	var cands []*expr
	for _, basis := range []struct {
		g    *val
		name string
	}{{x, "x"}, {expm1, "expm1(x)"}} {
		if basis.g == nil {
			continue
		}
		var gg, gt float64
		for i, xv := range x.data {
			if xv <= 0 {
				g := float64(basis.g.data[i])
				gg, gt = gg+g*g, gt+g*float64(t.data[i])
			}
		}
		if gg == 0 {
			continue
		}
		c := gt / gg
		if c == 0 || math.IsNaN(c) || basis.g == x && !(math.Abs(c) < 1) {
			continue
		}
		for _, l := range snapped(lambda) {
			pos := x
			if l != 1 {
				if pos = s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(l)}, out: precision.F32, label: fmt.Sprintf("%g·x", l)}); pos == nil {
					continue
				}
			}
			for _, k := range snapped(c) {
				neg := s.derive(&expr{op: program.OpMul, args: []*val{basis.g, s.constant(k)}, out: precision.F32, label: fmt.Sprintf("%g·%s", k, basis.name)})
				if neg == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpWhere, args: []*val{x, pos, neg}, out: t.format,
					label: fmt.Sprintf("x > 0 ? %g·x : %g·%s", l, k, basis.name)})
			}
		}
	}
	// CELU: α·expm1(x/α) on the negative side, α read off it
	if a, ok := celuAlpha(x.data, t.data); ok {
		for _, k := range snapped(a) {
			in := s.derive(&expr{op: program.OpDiv, args: []*val{x, s.constant(k)}, out: precision.F32, label: fmt.Sprintf("x/%g", k)})
			e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExpm1}, args: []*val{in}, out: precision.F32, label: fmt.Sprintf("expm1(x/%g)", k)})
			neg := s.derive(&expr{op: program.OpMul, args: []*val{e, s.constant(k)}, out: precision.F32, label: fmt.Sprintf("%g·expm1(x/%g)", k, k)})
			if neg != nil {
				cands = append(cands, &expr{op: program.OpWhere, args: []*val{x, x, neg}, out: t.format, label: fmt.Sprintf("x > 0 ? x : %g·expm1(x/%g) (CELU)", k, k)})
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "piecewise", label: v.from.label, candidates: ev}
	return v
}

// celuAlpha reads α of t = α·expm1(x/α) over the entries with x < 0
// (golden-section search on ln α in [1e-3, 1e3] of the squared error);
// false where no entry is negative or the fit is not close.
func celuAlpha(x, t []float32) (float64, bool) {
	var xs, ts []float64
	for i, v := range x {
		if v < 0 {
			xs, ts = append(xs, float64(v)), append(ts, float64(t[i]))
		}
	}
	if len(xs) < 4 {
		return 0, false
	}
	cost := func(la float64) float64 {
		a := math.Exp(la)
		var e float64
		for i, v := range xs {
			d := a*math.Expm1(v/a) - ts[i]
			e += d * d
		}
		return e
	}
	la := goldenMin(cost, math.Log(1e-3), math.Log(1e3), 100)
	var tt float64
	for _, v := range ts {
		tt += v * v
	}
	return math.Exp(la), tt > 0 && cost(la) <= 1e-6*tt
}

// snapped are the simple numbers within 1e-3 of a fitted coefficient c,
// then c itself.
func snapped(c float64) []float64 {
	var out []float64
	for _, k := range simple.Candidates(c) {
		if math.Abs(k-c) <= 1e-3*math.Abs(c) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if !slices.Contains(out, c) {
		out = append(out, c)
	}
	return out
}

// fitPReLU explains t as a leaky ReLU whose slope is a parameter w (torch's
// PReLU): x > 0 ? x : w·x, w one slope for all (one entry) or one per
// channel (axis 1 of a map [B, C, ...], else the last axis), the product
// in f32 and the choice rounded once.
func (s *synth) fitPReLU(x, w, t *val) *val {
	if !equalShape(x, t) || x.integral() || len(x.shape) < 2 || len(w.shape) != 1 {
		return nil
	}
	slope := s.channelwise(w, x)
	if slope == nil {
		return nil
	}
	neg := s.derive(&expr{op: program.OpMul, args: []*val{x, slope}, out: precision.F32, label: "w·x"})
	if neg == nil {
		return nil
	}
	v, ev := s.best(t, []*expr{{op: program.OpWhere, args: []*val{x, x, neg}, out: t.format, label: "x > 0 ? x : w·x (PReLU)"}})
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "piecewise", label: v.from.label, candidates: ev}
	return v
}

// channelwise is w [1] or [C] laid out to broadcast over x along its
// channels: one entry as it is, C entries along axis 1 of a map [B, C,
// ...] (rank 3 or more), else along the last axis; nil where neither fits.
func (s *synth) channelwise(w, x *val) *val {
	if len(w.shape) != 1 || len(x.shape) < 2 {
		return nil
	}
	switch c := w.shape[0]; {
	case c == 1:
		return w
	case len(x.shape) >= 3 && x.shape[1] == c:
		shape := make([]int, len(x.shape))
		for i := range shape {
			shape[i] = 1
		}
		shape[1] = c
		return s.reshape(w, shape)
	case x.shape[len(x.shape)-1] == c:
		return w
	}
	return nil
}

// fitParamAffine explains t as an affine map of x by the call's two
// parameters: a·x + b, each a scalar or one entry per channel (a learnable
// affine block, a per-channel scale and shift), either parameter the
// scale, each step rounded to t's format as torch's two ops.
func (s *synth) fitParamAffine(x *val, params []*val, t *val) *val {
	if len(params) != 2 || !equalShape(x, t) || x.integral() {
		return nil
	}
	var cands []*expr
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		a, b := s.channelwise(params[order[0]], x), s.channelwise(params[order[1]], x)
		if a == nil || b == nil {
			continue
		}
		ax := s.derive(&expr{op: program.OpMul, args: []*val{a, x}, out: t.format, label: "a·x"})
		if ax == nil {
			continue
		}
		cands = append(cands, &expr{op: program.OpAdd, args: []*val{ax, b}, out: t.format, label: "a·x + b"})
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "affine", label: v.from.label, candidates: ev}
	return v
}

// maxPiecewiseValues bounds the scope's most recent values of the
// target's shape piecewiseOfValue tries.
const maxPiecewiseValues = 4

// piecewiseOfValue explains t as a piecewise activation (fitPiecewise)
// of a recent value of its shape: an activation called as a function
// between modules (F.leaky_relu(x, 0.1) before a vocoder's upsampler,
// where only module calls have boundaries). Tried once every other form
// failed.
func (s *synth) piecewiseOfValue(t *val, vals []*val) *val {
	for i, v := range sameShape(t, vals) {
		if i == maxPiecewiseValues {
			break
		}
		if w := s.piecewiseGlue(v, t); w != nil {
			return w
		}
	}
	return nil
}

// piecewiseGlue is fitPiecewise of x for t read as glue between modules
// (its form and candidates kept), not as a parameterless call's
// activation; nil where no form fits.
func (s *synth) piecewiseGlue(x, t *val) *val {
	w := s.fitPiecewise(x, t)
	if w != nil {
		w.fit = &leafFit{kind: "glue", label: w.fit.label, candidates: w.fit.candidates}
	}
	return w
}
