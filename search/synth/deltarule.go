package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// l2Eps is the ε an L2 norm of q and k adds to Σx² before the root (the
// flash-linear-attention library's, which torch reimplementations copy).
const l2Eps = 1e-6

// maxDeltaAssignments bounds the operand assignments gatedDeltaRule runs a
// scan for. Their count is the key-width readings times the operand
// readings (two of [q | k | v], two of b and a, two orders of A and d):
// 88 for Qwen3-Next's defaults at 32 value heads over 16 key groups of 16,
// whose every key width from 8 to 256 divides G·K'; over the bound the
// rule is not tried at all, so the bound is set well above that.
const maxDeltaAssignments = 256

// gatedDeltaRule explains t (B·L·H·V values: [B, L, H, V] in any reading)
// as a gated DeltaNet's core: a depthwise causal conv (weight [C, 1, K], a
// parameter of an uncalled sub-module; a [C] bias or none) over [q | k | v]
// (C = 2·G·K' + H·V columns) then SiLU, q and k L2-normed per head (ε
// l2Eps) and q scaled by 1/√K', β = σ(b), g = −exp(A)·softplus(a + d), and
// the delta-rule scan (program.OpDeltaScan: S ← exp(g)·S, S ← S + k·(β·(v −
// kᵀS))ᵀ, y = qᵀS; head h reads key group h/(H/G)). q, k and v are read off
// one value [B, L, ≥ C] either as its first C columns or per key group
// [q k v z] (a reshape to [B, L, G, 2·K' + 2·(H/G)·V]); b and a off one
// value [B, L, 2·H] either as halves or per key group [b a], or off two
// values [B, L, H]; A and d are two [H] vectors in either order; the key
// width K' is V or another power of two. One of glue's late forms.
func (s *synth) gatedDeltaRule(t *val, vals []*val) *val {
	if w := s.gatedDeltaRuleScaled(t, vals, 1); w != nil {
		return w
	}
	// β = 2·σ(b) (negative eigenvalues allowed: OLMo-Hybrid's
	// allow_neg_eigval), tried only where β = σ(b) fails
	return s.gatedDeltaRuleScaled(t, vals, 2)
}

// gatedDeltaRuleScaled is gatedDeltaRule with β = betaScale·σ(b).
func (s *synth) gatedDeltaRuleScaled(t *val, vals []*val, betaScale float64) *val {
	if t.numel() == 0 {
		return nil
	}
	usable := func(v *val) bool { return v != nil && !v.opaque && v.data != nil && !v.intType }
	var convs, vecs []*val
	for _, v := range vals {
		if usable(v) && len(v.shape) == 3 && v.shape[1] == 1 && v.shape[2] > 1 && v.param {
			convs = append(convs, v)
		}
		if usable(v) && len(v.shape) == 1 && v.param {
			vecs = append(vecs, v)
		}
	}
	if len(convs) == 0 {
		return nil
	}
	var cands []*expr
	add := func(es []*expr) bool {
		cands = append(cands, es...)
		return len(cands) <= maxDeltaAssignments
	}
	for _, wt := range convs {
		c := wt.shape[0]
		for _, p := range vals {
			if !usable(p) || p.param || len(p.shape) != 3 || p.shape[2] < c || t.numel()%(p.shape[0]*p.shape[1]) != 0 {
				continue
			}
			for _, sz := range s.deltaSizes(t, p, c, vecs) {
				if !add(s.deltaOperands(p, nil, wt, vals, vecs, sz, betaScale, t)) {
					return nil
				}
			}
		}
		if len(cands) > 0 {
			continue
		}
		// [q | k | v] joined from three values (separate q, k and v
		// projections), q and k of one width: tried where no value holds
		// the conv's columns
		for _, j := range s.qkvJoins(vals, c, t) {
			for _, sz := range s.deltaSizes(t, j[0], c, vecs) {
				if sz.kd*sz.g != j[0].shape[2] {
					continue
				}
				if !add(s.deltaOperands(j[0], &j, wt, vals, vecs, sz, betaScale, t)) {
					return nil
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	w, _ := s.best(t, cands)
	return w
}

// deltaSize is one reading of a delta rule's sizes: batch bs, rows l, h
// value heads of v, g key groups of kd.
type deltaSize struct{ bs, l, h, v, g, kd int }

// deltaSizes are the sizes a delta rule over conv columns c and a value
// p [B, L, ·] may have for target t: h among the head counts, v = H·V/h,
// kd among keyWidths (and G·K'/h: one key head per value head, tried
// after them), G = G·K'/kd dividing h.
func (s *synth) deltaSizes(t, p *val, c int, vecs []*val) []deltaSize {
	bs, l := p.shape[0], p.shape[1]
	hv := t.numel() / (bs * l) // H·V
	if hv >= c || (c-hv)%2 != 0 {
		return nil
	}
	var out []deltaSize
	for _, h := range headCounts(vecs) {
		if hv%h != 0 {
			continue
		}
		v := hv / h
		gk := (c - hv) / 2
		kds := keyWidths(v, gk)
		if gk%h == 0 && !slices.Contains(kds, gk/h) {
			kds = append(kds, gk/h)
		}
		for _, kd := range kds {
			g := gk / kd
			if h%g != 0 {
				continue
			}
			out = append(out, deltaSize{bs, l, h, v, g, kd})
		}
	}
	return out
}

// qkvJoins are the ways of joining three values [B, L, ·] of t's rows
// into the conv's c columns as [q | k | v]: q and k two values of one
// width, v a third, each order of q and k.
func (s *synth) qkvJoins(vals []*val, c int, t *val) [][3]*val {
	var rows []*val
	for _, v := range vals {
		if v != nil && !v.opaque && v.data != nil && !v.param && !v.intType && len(v.shape) == 3 && t.numel()%(v.shape[0]*v.shape[1]) == 0 {
			rows = append(rows, v)
		}
	}
	var out [][3]*val
	for _, q := range rows {
		for _, k := range rows {
			if k == q || k.shape[2] != q.shape[2] || k.shape[0] != q.shape[0] || k.shape[1] != q.shape[1] {
				continue
			}
			for _, v := range rows {
				if v == q || v == k || v.shape[0] != q.shape[0] || v.shape[1] != q.shape[1] || 2*q.shape[2]+v.shape[2] != c {
					continue
				}
				out = append(out, [3]*val{q, k, v})
			}
		}
	}
	return out
}

// headCounts are the head counts H a gated delta rule may have: the
// lengths of the [H] vectors that come in pairs.
func headCounts(vecs []*val) []int {
	count := map[int]int{}
	for _, v := range vecs {
		count[v.shape[0]]++
	}
	var out []int
	for h, n := range count {
		if n >= 2 {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// keyWidths are the key widths tried for value width v and G·K' = gk: v
// first, then the powers of two.
func keyWidths(v, gk int) []int {
	var out []int
	if gk%v == 0 {
		out = append(out, v)
	}
	for d := minHeadDim; d <= maxHeadDim; d *= 2 {
		if d != v && gk%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

// deltaOperands are gatedDeltaRule's candidates for one projected value p,
// conv weight wt and sizes: every reading of q, k, v off p, of b and a,
// of A and d.
func (s *synth) deltaOperands(p *val, joined *[3]*val, wt *val, vals, vecs []*val, sz deltaSize, betaScale float64, t *val) []*expr {
	bs, l, h, v, g, kd := sz.bs, sz.l, sz.h, sz.v, sz.g, sz.kd
	c := wt.shape[0]
	r := h / g
	var mixes [][2]any // the [q | k | v] value and how it was read
	if joined != nil {
		j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: joined[:], out: p.format, label: "[q | k | v] joined"})
		mixes = append(mixes, [2]any{j, fmt.Sprintf("joined from %s, %s, %s", joined[0].origin, joined[1].origin, joined[2].origin)})
	} else if p.shape[2] == c || p.shape[2] == c+h*v {
		mixes = append(mixes, [2]any{s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: c}, args: []*val{p}, out: p.format, label: "[q | k | v]"}), "its first columns"})
	}
	if joined == nil && p.shape[2] == c+h*v {
		// per key group [q k v z]
		grp := s.reshape(p, []int{bs, l, g, 2*kd + 2*r*v})
		var parts []*val
		for _, se := range [][2]int{{0, kd}, {kd, 2 * kd}, {2 * kd, 2*kd + r*v}} {
			x := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: se[0], End: se[1]}, args: []*val{grp}, out: p.format, label: "a part of each key group"})
			parts = append(parts, s.reshape(x, []int{bs, l, g * (se[1] - se[0])}))
		}
		if !slices.Contains(parts, nil) {
			mixes = append(mixes, [2]any{s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: parts, out: p.format, label: "[q | k | v] of the key groups"}), "per key group"})
		}
	}
	var biases []*val
	for _, b := range vecs {
		if b.shape[0] == c {
			biases = append(biases, b)
		}
	}
	var pairs [][3]any // b, a and how they were read
	for _, q := range vals {
		if q == nil || q.opaque || q.data == nil || q.param || len(q.shape) != 3 || q.shape[0] != bs || q.shape[1] != l {
			continue
		}
		switch q.shape[2] {
		case 2 * h:
			b := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: h}, args: []*val{q}, out: q.format, label: "b"})
			a := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: h, End: 2 * h}, args: []*val{q}, out: q.format, label: "a"})
			pairs = append(pairs, [3]any{b, a, q.origin + " in halves"})
			if g > 1 {
				grp := s.reshape(q, []int{bs, l, g, 2 * r})
				b := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: r}, args: []*val{grp}, out: q.format, label: "b of each key group"})
				a := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: r, End: 2 * r}, args: []*val{grp}, out: q.format, label: "a of each key group"})
				pairs = append(pairs, [3]any{s.reshape(b, []int{bs, l, h}), s.reshape(a, []int{bs, l, h}), q.origin + " per key group"})
			}
		case h:
			for _, q2 := range vals {
				if q2 != q && q2 != nil && !q2.opaque && q2.data != nil && !q2.param && slices.Equal(q2.shape, q.shape) {
					pairs = append(pairs, [3]any{q, q2, q.origin + ", " + q2.origin})
				}
			}
		}
	}
	var out []*expr
	for _, m := range mixes {
		mixed, how := m[0].(*val), m[1].(string)
		if mixed == nil {
			continue
		}
		for _, bias := range append([]*val{nil}, biases...) {
			conv := s.causalConvOf(mixed, 0, wt, bias, p.format)
			act := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSiLU}, args: []*val{conv}, out: p.format, label: "silu"})
			q := s.l2Normed(act, 0, g, kd, 1/math.Sqrt(float64(kd)))
			k := s.l2Normed(act, g*kd, g, kd, 1)
			vv := s.reshape(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 2 * g * kd, End: c}, args: []*val{act}, out: p.format, label: "v"}), []int{bs, l, h, v})
			if q == nil || k == nil || vv == nil {
				continue
			}
			for _, pr := range pairs {
				b, a := pr[0].(*val), pr[1].(*val)
				if b == nil || a == nil {
					continue
				}
				beta := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{b}, out: b.format, label: "β = σ(b)"})
				if betaScale != 1 {
					beta = s.derive(&expr{op: program.OpMul, args: []*val{beta, s.constant(betaScale)}, out: b.format, label: fmt.Sprintf("β = %g·σ(b)", betaScale)})
				}
				for i, av := range vecs {
					for j, dv := range vecs {
						if i == j || av.shape[0] != h || dv.shape[0] != h {
							continue
						}
						sum := s.derive(&expr{op: program.OpAdd, args: []*val{a, dv}, out: precision.F32, label: "a + d"})
						ea := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{av}, out: precision.F32, label: "exp(A)"})
						na := s.derive(&expr{op: program.OpMul, args: []*val{ea, s.constant(-1)}, out: precision.F32, label: "−exp(A)"})
						gate := s.derive(&expr{op: program.OpMul, args: []*val{na, s.softplus(sum)}, out: precision.F32, label: "g = −exp(A)·softplus(a + d)"})
						label := fmt.Sprintf("gated delta rule over %s (%s; conv %s, bias %s), b and a off %s, A = %s, d = %s: %d heads of %d over %d key groups of %d",
							p.origin, how, wt.origin, originOr(bias, "none"), pr[2].(string), av.origin, dv.origin, h, v, g, kd)
						y := s.derive(&expr{op: program.OpDeltaScan, args: []*val{q, k, vv, gate, beta}, out: t.format, label: label})
						if y == nil {
							continue
						}
						out = append(out, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: label})
					}
				}
			}
		}
	}
	return out
}

// l2Normed is columns off … off + g·kd of x [B, L, ·] as g heads of kd,
// each divided by √(Σx² + l2Eps) and times scale, in f32: an RMS norm of ε
// l2Eps/kd (x·√kd / √(Σx² + l2Eps)) times scale/√kd.
func (s *synth) l2Normed(x *val, off, g, kd int, scale float64) *val {
	if x == nil {
		return nil
	}
	bs, l := x.shape[0], x.shape[1]
	cut := s.reshape(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: off, End: off + g*kd}, args: []*val{x}, out: x.format, label: "a part"}), []int{bs, l, g, kd})
	n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormRMS, Eps: float32(l2Eps / float64(kd))}}, args: []*val{cut, nil, nil}, out: precision.F32, label: "x / √(mean x² + ε/d)"})
	return s.derive(&expr{op: program.OpMul, args: []*val{n, s.constant(scale / math.Sqrt(float64(kd)))}, out: precision.F32, label: "an L2 norm, scaled"})
}
