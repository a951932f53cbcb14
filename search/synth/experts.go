package synth

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// routerParams: a router's parameters are one weight matrix [E, D] and,
// maybe, a bias [E].
func routerParams(params []*val) bool {
	switch {
	case len(params) == 1:
		return isMatrix(params[0])
	case len(params) == 2:
		return isMatrix(params[0]) && len(params[1].shape) == 1 && params[1].shape[0] == params[0].shape[0]
	}
	return false
}

// fitRouter explains a call with one weight matrix (and maybe its bias)
// and three results as a mixture-of-experts router: the logits (a linear
// of its input, as [tokens, experts]), then each row's top-k weights and
// expert indices (the integral result), in whatever order the call
// returns them; or two results, the weights and indices, the weights
// maybe laid densely over the experts. nil when the results are not that.
func (s *synth) fitRouter(x *val, params []*val, targets []*val) []*val {
	w := params[0]
	var bias *val
	if len(params) > 1 {
		bias = params[1]
	}
	e := w.shape[0]
	li, wi, ii := -1, -1, -1
	dense := false
	// a result stored as integers is the indices, whatever else is whole
	for i, t := range targets {
		if t.intType && t.integral() && ii < 0 {
			ii = i
		}
	}
	for i, t := range targets {
		if i == ii {
			continue
		}
		last := 0
		if len(t.shape) > 0 {
			last = t.shape[len(t.shape)-1]
		}
		switch {
		case t.integral() && ii < 0:
			ii = i
		case last == e && li < 0:
			li = i
		case wi < 0:
			wi = i
		}
	}
	if len(targets) == 2 && ii >= 0 && li >= 0 && wi < 0 {
		// two results are the weights and indices: the weights [.., k]
		// (k = E is read as logits), or dense [.., E]
		dense = targets[li].shape[len(targets[li].shape)-1] != targets[ii].shape[len(targets[ii].shape)-1]
		wi, li = li, -1
	}
	if len(targets) == 2 && ii >= 0 && wi >= 0 && li < 0 {
		// only the weights and indices: the logits stay inside
		iT := targets[ii]
		x2 := s.reshape(x, []int{iT.numel() / iT.shape[len(iT.shape)-1], x.shape[len(x.shape)-1]})
		logits := s.derive(&expr{op: program.OpLinear, args: []*val{x2, w, bias}, out: targets[wi].format, label: "router logits"})
		if logits == nil {
			return nil
		}
		wv, iv := s.routes(logits, targets[wi], iT, dense)
		if wv == nil {
			return nil
		}
		out := make([]*val, 2)
		out[wi], out[ii] = wv, iv
		return out
	}
	if len(targets) == 2 && ii < 0 && li >= 0 && wi >= 0 && slices.Equal(targets[li].shape, targets[wi].shape) {
		// no indices: dense weights and the logits, in either order
		for _, order := range [][2]int{{li, wi}, {wi, li}} {
			lT, wT := targets[order[0]], targets[order[1]]
			x2 := s.reshape(x, []int{lT.numel() / e, x.shape[len(x.shape)-1]})
			if x2 == nil {
				return nil
			}
			logits := s.fitLinear(x2, params, lT)
			if logits == nil {
				continue
			}
			if wv := s.denseRoutes(logits, wT); wv != nil {
				out := make([]*val, 2)
				out[order[0]], out[order[1]] = logits, wv
				return out
			}
		}
		return nil
	}
	if li < 0 || wi < 0 || ii < 0 {
		return nil
	}
	lT := targets[li]
	x2 := s.reshape(x, []int{lT.numel() / e, x.shape[len(x.shape)-1]})
	if x2 == nil {
		return nil
	}
	logits := s.fitLinear(x2, params, lT)
	if logits == nil {
		return nil
	}
	wv, iv := s.routes(logits, targets[wi], targets[ii], false)
	if wv == nil {
		return nil
	}
	out := make([]*val, 3)
	out[li], out[wi], out[ii] = logits, wv, iv
	return out
}

// routes explains wT and iT [.., k] as the top-k weights and indices of
// logits [.., E]: the score function, renormalisation and a scale
// searched; the indices must match exactly. With dense, wT is [.., E]:
// the weights laid at their experts' places. nil, nil when none does.
func (s *synth) routes(logits, wT, iT *val, dense bool) (*val, *val) {
	if len(wT.shape) == 0 || len(iT.shape) == 0 || !iT.integral() {
		return nil, nil
	}
	if !dense && !slices.Equal(wT.shape, iT.shape) || dense && wT.numel()/wT.shape[len(wT.shape)-1] != iT.numel()/iT.shape[len(iT.shape)-1] {
		return nil, nil
	}
	k, e := iT.shape[len(iT.shape)-1], logits.shape[len(logits.shape)-1]
	if k > e {
		return nil, nil
	}
	in := s.reshape(logits, []int{iT.numel() / k, e})
	if in == nil {
		return nil, nil
	}
	var ev []semantics.Candidate
	cands := routeExprs(in, nil, k, wT.format, "")
	if !dense {
		cands = append(cands, stepwiseExprs(in, wT, iT)...)
	}
	for _, r := range cands {
		if dense {
			r.attrs.Route.Dense = true
			r.label += " dense"
		}
		iv, err := s.ev.run(pickOf(r, 1))
		if err != nil || !slices.Equal(iv.data, iT.data) {
			continue
		}
		wv, sc := s.ev.score(r, wT)
		if wv != nil && sc > tolerance(wT.format) {
			// the weights times a constant (a routed scaling factor)
			if c, ok := fitScalar(wv, wT); ok {
				p := r.attrs.Route
				p.Scale = float32(c)
				r = &expr{op: program.OpRoute, attrs: program.Attrs{Route: p}, args: []*val{in}, out: wT.format, label: r.label + fmt.Sprintf(" scale=%g", c)}
				if iv, err = s.ev.run(pickOf(r, 1)); err != nil {
					continue
				}
				wv, sc = s.ev.score(r, wT)
			}
		}
		ev = append(ev, semantics.Candidate{Value: r.label, Score: finite(sc)})
		if wv == nil || sc > tolerance(wT.format) {
			continue
		}
		wv, iv = s.reshape(wv, wT.shape), s.reshape(iv, iT.shape)
		if wv == nil || iv == nil {
			return nil, nil
		}
		fit := &leafFit{kind: "router", candidates: ev}
		wv.fit, iv.fit = fit, fit
		return wv, iv
	}
	return nil, nil
}

// denseRoutes explains wT [.., E] as a router's weights laid densely over
// the experts (zero where a row did not choose), with no indices to
// check the choice against: k is read off the most nonzero entries of a
// row, then every router candidate is scored on the weights alone.
func (s *synth) denseRoutes(logits, wT *val) *val {
	e := logits.shape[len(logits.shape)-1]
	k := 0
	for r := 0; r+e <= len(wT.data); r += e {
		n := 0
		for _, w := range wT.data[r : r+e] {
			if w != 0 {
				n++
			}
		}
		k = max(k, n)
	}
	in := s.reshape(logits, []int{logits.numel() / e, e})
	if k == 0 || in == nil {
		return nil
	}
	var cands []*expr
	for _, r := range routeExprs(in, nil, k, wT.format, " dense") {
		r.attrs.Route.Dense = true
		cands = append(cands, r)
	}
	w, ev := s.best(&val{shape: in.shape, data: wT.data, format: wT.format}, cands)
	if w == nil {
		return nil
	}
	if w = s.reshape(w, wT.shape); w != nil {
		w.fit = &leafFit{kind: "router", candidates: ev}
	}
	return w
}

// routeExprs are the router candidates over scores in [T, E] (a bias
// moving the choice when not nil), top k, each labelled routeLabel+suffix.
func routeExprs(in, bias *val, k int, out precision.Format, suffix string) []*expr {
	var es []*expr
	for _, p := range routeCandidates(k) {
		args := []*val{in}
		if bias != nil {
			args = append(args, bias)
		}
		es = append(es, &expr{op: program.OpRoute, attrs: program.Attrs{Route: p}, args: args, out: out, label: routeLabel(p) + suffix})
	}
	return es
}

// routed explains t, the weights or the indices of a router computed in
// its forward (no call of its own), from a [.., E] value of the scope:
// its sibling result is looked up among the targets to come.
func (s *synth) routed(t *val, vals []*val) *val {
	if len(t.shape) == 0 {
		return nil
	}
	if v := s.oneHotRouted(t, vals); v != nil {
		return v
	}
	if w := s.routedBiased(t, vals); w != nil {
		return w
	}
	k := t.shape[len(t.shape)-1]
	for _, v := range vals {
		if v.opaque || v.integral() || len(v.shape) == 0 || v.shape[len(v.shape)-1] <= k || v.numel()/v.shape[len(v.shape)-1] != t.numel()/k {
			continue
		}
		e := v.shape[len(v.shape)-1]
		in := s.reshape(v, []int{t.numel() / k, e})
		if in == nil {
			continue
		}
		var exprs []*expr
		exprs = append(exprs, routeExprs(in, nil, k, t.format, "")...)
		for _, b := range vals {
			// a correction vector of the scope moving the choice only
			if !b.opaque && len(b.shape) == 1 && b.shape[0] == e && !b.integral() {
				exprs = append(exprs, routeExprs(in, b, k, t.format, " biased choice")...)
			}
		}
		for _, r := range exprs {
			pick := r
			if t.integral() {
				pick = pickOf(r, 1)
			}
			if w, _ := s.best(t, []*expr{pick}); w != nil && (!t.integral() || slices.Equal(w.data, t.data)) {
				return s.reshape(w, t.shape)
			}
		}
	}
	return nil
}

// fitExperts explains a call with two rank-3 weights (and maybe a bias
// of rank 2 for each) as a mixture of experts over its tokens, routed by
// the integer indices and weights among its arguments, or by dense
// weights [T, E]: which weight is which, the activation of the gated unit
// and the order of gate and up in the fused projection searched; where
// none of those reproduces the call, the unit's numbers too (fitUnit).
func (s *synth) fitExperts(xs, params []*val, t *val) *val {
	if len(xs) < 1 || len(t.shape) < 2 {
		return nil
	}
	x := xs[0]
	d := x.shape[len(x.shape)-1]
	tokens := x.numel() / d
	x2 := s.reshape(x, []int{tokens, d})
	if x2 == nil || t.numel() != x.numel() {
		return nil
	}
	var idx, wts *val
	for _, a := range xs[1:] {
		if a.intType && a.integral() && idx == nil {
			idx = a
		}
	}
	for _, a := range xs[1:] {
		switch {
		case a == idx:
		case a.integral() && idx == nil:
			idx = a
		case (!a.integral() || a.intType == false && idx != nil && idx.intType) && wts == nil:
			wts = a // weights of one are whole too: a float beside typed indices
		}
	}
	layouts := s.expertLayouts(params, d, false)
	if len(layouts) == 0 {
		return nil
	}
	e := layouts[0].w1.shape[0]
	var rIdx, rWts *val // the routing as the experts op reads it (rIdx nil: dense; both nil: unrouted)
	switch {
	case len(xs) == 1:
		// no routing among the arguments: one batched GEMM, expert e
		// over the e-th block of rows (its tokens, weighted before)
		if tokens%e != 0 {
			return nil
		}
	case wts == nil:
		return nil
	case idx != nil && slices.Equal(idx.shape, wts.shape) && len(idx.shape) == 2 && idx.shape[0] == tokens:
		rIdx, rWts = idx, wts
	case wts.numel() == tokens*e:
		rWts = s.reshape(wts, []int{tokens, e})
	default:
		return nil
	}
	t2 := t
	if len(t.shape) != 2 {
		t2 = &val{shape: []int{tokens, d}, data: t.data, format: t.format}
	}
	mk := func(u unitChoice, p program.ExpertsParams) *expr {
		l := u.layout
		p.Ungated, p.Squared = l.ungated, u.squared
		return &expr{op: program.OpExperts, attrs: program.Attrs{Act: u.act, UpFirst: u.upFirst, Experts: p}, args: []*val{x2, rIdx, rWts, l.w1, l.w2, l.b1, l.b2}, out: t.format,
			label: fmt.Sprintf("experts %s up_first=%v squared=%v %s", u.act, u.upFirst, u.squared, l.label)}
	}
	var units []unitChoice
	var cands []*expr
	for _, l := range layouts {
		for _, a := range glueActs {
			for _, upFirst := range []bool{false, true} {
				for _, sq := range []bool{false, true} {
					if l.ungated && upFirst || !l.ungated && sq {
						continue // an ungated unit has no up; only it is squared
					}
					u := unitChoice{layout: l, act: a, upFirst: upFirst, squared: sq}
					units, cands = append(units, u), append(cands, mk(u, program.ExpertsParams{}))
				}
			}
		}
	}
	var fit *leafFit
	y, ev := s.best(t2, cands)
	if y != nil {
		// the evidence by activation (the factor's values), each
		// candidate's layout and order folded into its act's best score
		acts := make([]semantics.Candidate, len(ev))
		for i, c := range ev {
			acts[i] = semantics.Candidate{Value: units[i].act.String(), Score: c.Score}
		}
		fit = &leafFit{kind: "experts", act: y.from.attrs.Act, squared: y.from.attrs.Experts.Squared, ungated: y.from.attrs.Experts.Ungated, candidates: acts}
	} else {
		// the unit's numbers: the plain forms failed; interleaved gate
		// and up are tried here too
		for _, l := range s.expertLayouts(params, d, true) {
			for _, a := range glueActs {
				for _, upFirst := range []bool{false, true} {
					units = append(units, unitChoice{layout: l, act: a, upFirst: upFirst})
				}
			}
		}
		if y, fit = s.fitUnit(t2, units, mk); y == nil {
			return nil
		}
	}
	v := y
	if t2 != t {
		if v = s.derive(&expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: "tokens as the call holds them"}); v == nil {
			return nil
		}
	}
	v.fit = fit
	s.mlps = append(s.mlps, mlpRecord{scope: s.scopeOf, boundary: t.origin, x: v})
	return v
}

// expertLayout is one reading of the experts' parameters as the experts
// op takes them: w1 [E, 2I, D], w2 [E, D, I], biases [E, 2I] and [E, D]
// (nil: none).
type expertLayout struct {
	w1, w2, b1, b2 *val
	label          string
	ungated        bool // w1 [E, I, D]: one projection, no gate (program.ExpertsParams.Ungated)
}

// expertLayouts reads two rank-3 parameters, and biases of rank 2 when
// the call has them, as the experts op takes them: each way round, each
// stored [out, in] or [in, out] (grouped GEMMs store [E, D, 2I], permuted
// here); with interleaved, gate and up alternate along 2I (gate_up[...,
// ::2] and [..., 1::2]) and are re-laid as two halves, the bias alike.
func (s *synth) expertLayouts(params []*val, d int, interleaved bool) []expertLayout {
	var r3, r2 []*val
	for _, p := range params {
		switch len(p.shape) {
		case 3:
			r3 = append(r3, p)
		case 2:
			r2 = append(r2, p)
		default:
			return nil
		}
	}
	if len(r3) != 2 || len(r2) != 0 && len(r2) != 2 {
		return nil
	}
	permute := func(v *val, perm []int, label string) *val {
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: label})
	}
	var out []expertLayout
	for _, pair := range [][2]*val{{r3[0], r3[1]}, {r3[1], r3[0]}} {
		a, b := pair[0], pair[1]
		e := a.shape[0]
		if b.shape[0] != e {
			continue
		}
		var w1s []*val
		if a.shape[2] == d {
			w1s = append(w1s, a)
		}
		if a.shape[1] == d && a.shape[2] != d {
			w1s = append(w1s, permute(a, []int{0, 2, 1}, "stored [in, out]"))
		}
		for _, w1 := range w1s {
			if w1 == nil {
				continue
			}
			// gate and up halves of w1's rows, or (ungated) all of them
			// one projection: w2's inner width tells which
			i := w1.shape[1] / 2
			ungated := !interleaved && (b.shape[1] == d && b.shape[2] == w1.shape[1] || b.shape[1] == w1.shape[1] && b.shape[2] == d)
			if ungated {
				i = w1.shape[1]
			} else if w1.shape[1]%2 != 0 {
				continue
			}
			var w2 *val
			switch {
			case b.shape[1] == d && b.shape[2] == i:
				w2 = b
			case b.shape[1] == i && b.shape[2] == d:
				w2 = permute(b, []int{0, 2, 1}, "stored [in, out]")
			}
			if w2 == nil {
				continue
			}
			// the biases by their shapes: [E, 2I] for w1, [E, D] for w2
			var biases [][2]*val
			switch {
			case len(r2) == 0:
				biases = [][2]*val{{nil, nil}}
			default:
				for _, bp := range [][2]*val{{r2[0], r2[1]}, {r2[1], r2[0]}} {
					if slices.Equal(bp[0].shape, []int{e, w1.shape[1]}) && slices.Equal(bp[1].shape, []int{e, d}) {
						biases = append(biases, bp)
					}
				}
			}
			for _, bs := range biases {
				l := expertLayout{w1: w1, w2: w2, b1: bs[0], b2: bs[1], label: "gate|up halves", ungated: ungated}
				if ungated {
					l.label = "one projection, ungated"
				}
				if interleaved {
					l.label = "gate/up interleaved"
					l.w1 = s.deinterleave(w1, []int{e, i, 2, d}, []int{0, 2, 1, 3})
					if bs[0] != nil {
						l.b1 = s.deinterleave(bs[0], []int{e, i, 2}, []int{0, 2, 1})
					}
					if l.w1 == nil || bs[0] != nil && l.b1 == nil {
						continue
					}
				}
				out = append(out, l)
			}
		}
	}
	return out
}

// deinterleave re-lays v's axis 1, whose entries alternate gate and up,
// as the gate entries then the up ones: v viewed as split, the pair axis
// moved before the entries', joined back to v's shape.
func (s *synth) deinterleave(v *val, split, perm []int) *val {
	p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(v, split)}, out: v.format, label: "gate and up interleaved"})
	return s.reshape(p, v.shape)
}

// routeCandidates are the routers tried for top k: each score function,
// renormalised or not, ties to the lower index first, then to the higher;
// then the softmax over the chosen k logits (pick, then score: the same
// as softmax, pick, renormalise, but for rounding; a pointwise score
// picks the same either way).
func routeCandidates(k int) []program.RouteParams {
	var out []program.RouteParams
	for _, high := range []bool{false, true} {
		for _, score := range program.RouteScores {
			for _, normalize := range []bool{false, true} {
				out = append(out, program.RouteParams{K: k, Score: score, Normalize: normalize, TiesHigh: high})
			}
		}
	}
	for _, high := range []bool{false, true} {
		out = append(out, program.RouteParams{K: k, Score: "softmax", Chosen: true, TiesHigh: high})
	}
	return out
}

func routeLabel(p program.RouteParams) string {
	l := fmt.Sprintf("top %d score=%s normalize=%v ties_high=%v", p.K, p.Score, p.Normalize, p.TiesHigh)
	if p.Chosen {
		l = fmt.Sprintf("top %d then score=%s over the chosen ties_high=%v", p.K, p.Score, p.TiesHigh)
	}
	return l
}

// routedBiased explains router weights t chosen on score + bias but read
// from the score (a load-balancing correction: the choice is biased, the
// weights are not), where the scope holds score + bias as an add of a
// [.., E] value and an [E] one.
func (s *synth) routedBiased(t *val, vals []*val) *val {
	if t.integral() {
		return nil
	}
	k := t.shape[len(t.shape)-1]
	for _, v := range vals {
		if v.from == nil || v.from.op != program.OpAdd || len(v.from.args) != 2 || len(v.shape) == 0 {
			continue
		}
		e := v.shape[len(v.shape)-1]
		for i, bias := range v.from.args {
			score := v.from.args[1-i]
			if bias == nil || score == nil || bias.numel() != e || !slices.Equal(score.shape, v.shape) || e <= k || score.numel()/e != t.numel()/k {
				continue
			}
			in := s.reshape(score, []int{t.numel() / k, e})
			b := s.reshape(bias, []int{e})
			if in == nil || b == nil {
				continue
			}
			if w, _ := s.best(t, routeExprs(in, b, k, t.format, " biased choice")); w != nil {
				return s.reshape(w, t.shape)
			}
		}
	}
	return nil
}

// softmaxed explains t as the softmax over its last axis of a value of
// its shape, of the first or last channels of a wider one, or of a linear
// of one by a weight of the scope (router
// scores computed in the forward: softmax(F.linear(x, W))).
func (s *synth) softmaxed(t *val, vals []*val) *val {
	sumTol := 1e-3
	if t.format != precision.F32 {
		sumTol = 2e-2 // each probability rounded to 8 bits
	}
	if len(t.shape) == 0 || !rowsSumToOne(t, sumTol) {
		return nil
	}
	e := t.shape[len(t.shape)-1]
	var cands []*expr
	add := func(v *val) {
		cands = append(cands, &expr{op: program.OpSoftmax, args: []*val{v}, out: t.format, label: "softmax"})
	}
	for _, v := range sameShape(t, vals) {
		add(v)
	}
	// the first or last channels of a wider value (a fused projection's
	// one-channel query: MobileViT v2's context scores)
	for _, v := range vals {
		if v.opaque || !longerOnOne(v.shape, t.shape) {
			continue
		}
		ax := -1
		for i := range v.shape {
			if v.shape[i] != t.shape[i] {
				ax = i
			}
		}
		if ax == len(t.shape)-1 {
			continue
		}
		for _, start := range slices.Compact([]int{0, v.shape[ax] - t.shape[ax]}) {
			if p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: start, End: start + t.shape[ax]}, args: []*val{v}, out: v.format, label: "slice"}); p != nil {
				add(p)
			}
		}
	}
	for _, w := range vals {
		if !w.param || len(w.shape) != 2 || w.shape[0] != e {
			continue
		}
		for _, x := range vals {
			if x.opaque || x.param || len(x.shape) == 0 || x.shape[len(x.shape)-1] != w.shape[1] || x.numel()/w.shape[1] != t.numel()/e {
				continue
			}
			if l := s.reshape(s.derive(&expr{op: program.OpLinear, args: []*val{x, w, nil}, out: t.format, label: "linear"}), t.shape); l != nil {
				add(l)
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// rowsSumToOne reports whether every row of v (its last axis) is
// nonnegative and sums to 1 within tol.
func rowsSumToOne(v *val, tol float64) bool {
	e := v.shape[len(v.shape)-1]
	if e < 2 {
		return false
	}
	for r := 0; r+e <= len(v.data); r += e {
		var sum float64
		for _, x := range v.data[r : r+e] {
			if x < 0 {
				return false
			}
			sum += float64(x)
		}
		if math.Abs(sum-1) > tol {
			return false
		}
	}
	return true
}

// expertModules explains t as a mixture of experts whose experts are
// modules of their own (a list of gated MLPs, each called on the tokens
// routed to it, so their boundaries have data-dependent shapes the
// program does not make): the experts' weights stacked into the fused
// experts op over the scope's routing (indices and weights), plus, where
// t holds one, a value of the scope added after (a shared expert). The
// experts are the scope's children alike in their parameters' shapes
// (stackedExperts), or grouped GEMMs, or slices handed per call.
func (s *synth) expertModules(t *val, sc *scope, vals []*val) *val {
	// experts as one batched GEMM over blocks of rows: their input and
	// their summed output (experts_blocks.go)
	if v := s.weightedBlocks(t, vals); v != nil {
		return v
	}
	if v := s.blocksSummed(t, vals); v != nil {
		return v
	}
	if len(t.shape) < 2 {
		return nil
	}
	d := t.shape[len(t.shape)-1]
	tokens := t.numel() / d
	var weights [][2]*val
	if w1, w2 := s.stackedExperts(sc, d); w1 != nil {
		weights = append(weights, [2]*val{w1, w2})
	} else if w1, w2 := s.groupedExperts(sc, d); w1 != nil {
		weights = append(weights, [2]*val{w1, w2})
	} else {
		weights = s.slicedExperts(sc, d, vals)
	}
	if len(weights) == 0 {
		return nil
	}
	var x *val
	for _, v := range recentFirst(vals) {
		if !v.opaque && sc.arg[v] && v.numel() == t.numel() && x == nil {
			x = v
		}
	}
	if x == nil {
		return nil
	}
	x2 := s.reshape(x, []int{tokens, d})
	if x2 == nil {
		return nil
	}
	var cands []*expr
	act := map[*expr]exec.ActKind{}
	ungatedOf := map[*expr]bool{}
	for _, w := range weights {
		w1, w2 := w[0], w[1]
		ungated := w1.shape[1] == w2.shape[2]
		for _, rt := range s.routings(sc, vals, tokens, w1.shape[0]) {
			for _, a := range glueActs {
				for _, upFirst := range []bool{false, true} {
					if ungated && upFirst {
						continue
					}
					ex := &expr{op: program.OpExperts, attrs: program.Attrs{Act: a, UpFirst: upFirst, Experts: program.ExpertsParams{Ungated: ungated}}, args: []*val{x2, rt[0], rt[1], w1, w2}, out: t.format,
						label: fmt.Sprintf("expert modules %s up_first=%v ungated=%v", a, upFirst, ungated)}
					y := s.reshape(s.derive(ex), t.shape)
					if y == nil {
						continue
					}
					c := &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: ex.label}
					cands, act[c], ungatedOf[c] = append(cands, c), a, ungated
					for _, v := range sameShape(t, vals) {
						if v != x {
							c := &expr{op: program.OpAdd, args: []*val{y, v}, out: t.format, label: ex.label + " + a shared expert"}
							cands, act[c], ungatedOf[c] = append(cands, c), a, ungated
						}
					}
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, ev := s.best(t, cands)
	if v == nil {
		// plus a bias of the scope's own added after the experts' sum
		// (a vector [D] the module holds, not an expert's)
		var more []*expr
		for _, name := range sc.call.Params {
			b, err := s.param(name)
			if err != nil || !slices.Equal(b.shape, []int{d}) {
				continue
			}
			for _, c := range cands {
				if c.op != program.OpReshape {
					continue
				}
				e := &expr{op: program.OpAdd, args: []*val{s.derive(c), b}, out: t.format, label: c.label + " + the scope's bias " + b.origin}
				more, act[e], ungatedOf[e] = append(more, e), act[c], ungatedOf[c]
			}
		}
		if len(more) > 0 {
			v, ev = s.best(t, more)
		}
	}
	if v != nil {
		v.fit = &leafFit{kind: "experts", act: act[v.from], ungated: ungatedOf[v.from], candidates: ev}
		s.mlps = append(s.mlps, mlpRecord{scope: sc.module, boundary: t.origin, x: v})
	}
	return v
}

// routings are the (indices, weights) [T, k] pairs the experts may be
// routed by: the scope's own (a router's results), or, where the scope
// holds only the router's logits [T, E], each top-k routing of them, k
// read off the tokens the first expert call receives (T·k rows) or 1, 2.
func (s *synth) routings(sc *scope, vals []*val, tokens, e int) [][2]*val {
	if w := s.maskedWeights(vals, tokens, e); w != nil {
		return [][2]*val{{nil, w}}
	}
	var idx, wts *val
	for _, v := range recentFirst(vals) {
		if !v.opaque && v.integral() && idx == nil && v.numel()%tokens == 0 && v.numel() >= tokens && v.shape[len(v.shape)-1] <= e {
			idx = v
		}
	}
	if idx != nil {
		for _, v := range recentFirst(vals) {
			if !v.opaque && !v.integral() && v.numel() == idx.numel() && wts == nil {
				wts = v
			}
		}
		if wts != nil {
			k := idx.numel() / tokens
			i2, w2 := s.reshape(idx, []int{tokens, k}), s.reshape(wts, []int{tokens, k})
			if i2 != nil && w2 != nil {
				return [][2]*val{{i2, w2}}
			}
		}
	}
	var logits *val
	for _, v := range recentFirst(vals) {
		if !v.opaque && !v.integral() && len(v.shape) >= 1 && v.shape[len(v.shape)-1] == e && v.numel() == tokens*e {
			logits = s.reshape(v, []int{tokens, e})
			break
		}
	}
	if logits == nil {
		return nil
	}
	ks := []int{1, 2}
	for _, ch := range s.children(sc.call) {
		for _, gc := range append([]trace.Call{ch}, s.children(ch)...) {
			for _, p := range gc.Tensors {
				if info, err := s.tr.Info(p.Key); err == nil && !trace.IsResult(p.Name) && len(info.Shape) == 2 && info.Shape[0]%tokens == 0 && info.Shape[0] > tokens {
					if k := info.Shape[0] / tokens; k < e && !slices.Contains(ks, k) {
						ks = append([]int{k}, ks...)
					}
				}
			}
		}
	}
	var out [][2]*val
	for _, k := range ks {
		if k >= e {
			continue
		}
		for _, r := range routeExprs(logits, nil, k, f32, "") {
			w, i := s.derive(r), s.derive(pickOf(r, 1))
			if w != nil && i != nil {
				out = append(out, [2]*val{i, w})
			}
		}
	}
	return out
}

// slicedExperts finds the experts' weights as three matrices [E·I, D] of
// the scope's calls, each expert's rows one block (weights an expert
// module is handed a slice of per call): E is tried from the routing's
// largest index up (the smallest divisors of E·I), each matrix in turn
// the down projection ([I, D] per expert, applied as x·w), the other two
// gate and up in the order listed.
func (s *synth) slicedExperts(sc *scope, d int, vals []*val) [][2]*val {
	var ms []*val
	for _, name := range s.subtreeParams(sc.call) {
		if p, err := s.param(name); err == nil && len(p.shape) == 2 && p.shape[1] == d {
			ms = append(ms, p)
		}
	}
	if len(ms) != 3 || ms[0].shape[0] != ms[1].shape[0] || ms[0].shape[0] != ms[2].shape[0] {
		return nil
	}
	top := -1
	for _, v := range vals {
		if !v.opaque && v.integral() {
			for _, x := range v.data {
				top = max(top, int(x))
			}
		}
	}
	rows := ms[0].shape[0]
	var out [][2]*val
	for e, tried := max(top+1, 2), 0; e <= rows/2 && tried < 3; e++ {
		if rows%e != 0 {
			continue
		}
		tried++
		i := rows / e
		for down := range 3 {
			var in []*val
			for j, m := range ms {
				if j != down {
					in = append(in, s.reshape(m, []int{e, i, d}))
				}
			}
			w2 := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{s.reshape(ms[down], []int{e, i, d})}, out: ms[down].format, label: "down applied as x·w"})
			if in[0] == nil || in[1] == nil || w2 == nil {
				continue
			}
			w1 := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: in, out: in[0].format, label: "gate and up"})
			if w1 != nil {
				out = append(out, [2]*val{w1, w2})
			}
		}
	}
	return out
}

// groupedExperts finds the experts' weights as two rank-3 parameters of
// the scope's calls (grouped GEMMs over all experts, [E, D, 2I] and
// [E, I, D], or already [E, 2I, D] and [E, D, I]) and lays them out as
// the experts op reads them.
func (s *synth) groupedExperts(sc *scope, d int) (*val, *val) {
	var ps []*val
	for _, name := range s.subtreeParams(sc.call) {
		if p, err := s.param(name); err == nil && len(p.shape) == 3 {
			ps = append(ps, p)
		}
	}
	if len(ps) != 2 {
		return nil, nil
	}
	for _, pair := range [][2]*val{{ps[0], ps[1]}, {ps[1], ps[0]}} {
		a, b := pair[0], pair[1]
		e := a.shape[0]
		if b.shape[0] != e {
			continue
		}
		var w1, w2 *val
		switch {
		case a.shape[1] == d && a.shape[2]%2 == 0: // [E, D, 2I]
			w1 = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{a}, out: a.format, label: "stored [in, out]"})
		case a.shape[2] == d && a.shape[1]%2 == 0:
			w1 = a
		}
		if w1 == nil {
			continue
		}
		i := w1.shape[1] / 2
		switch {
		case b.shape[1] == i && b.shape[2] == d: // [E, I, D]
			w2 = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{b}, out: b.format, label: "stored [in, out]"})
		case b.shape[1] == d && b.shape[2] == i:
			w2 = b
		}
		if w2 != nil {
			return w1, w2
		}
	}
	return nil, nil
}

// stackedExperts finds the scope's expert modules (children alike in
// their parameters' shapes, each with parameters of its own) and
// stacks their weights as the experts op reads them: w1 [E, 2I, D] (the
// two [I, D] matrices of each, in the order its call lists them; [E, I,
// D] where each has one, an ungated unit) and w2 [E, D, I]. nil where
// the scope has no such list.
func (s *synth) stackedExperts(sc *scope, d int) (*val, *val) {
	// siblings alike in their parameters' shapes, each with weights of
	// its own (a module called twice is one expert, not two)
	groups := map[string][]expertUnit{}
	var order []string
	owner := map[string]bool{}
	for _, ch := range s.children(sc.call) {
		names := s.subtreeParams(ch)
		if len(names) == 0 || owner[names[0]] {
			continue
		}
		owner[names[0]] = true
		key := s.shapesKey(names)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], expertUnit{address: ch.Module, params: names})
	}
	for _, base := range order {
		units := groups[base]
		if len(units) < 2 {
			continue
		}
		if more := s.uncalledExperts(sc.module, base); len(more) > 0 {
			// experts no token reached are no calls: their weights join the
			// stack at their place in the module list, so the called ones
			// keep the indices the router gives them
			units = append(units, more...)
			slices.SortStableFunc(units, func(a, b expertUnit) int { return naturalCompare(a.address, b.address) })
		}
		var ups, downs []*val
		ok := true
		for _, u := range units {
			var in, out []*val
			for _, name := range u.params {
				p, err := s.param(name)
				if err != nil || len(p.shape) != 2 {
					continue
				}
				switch {
				case p.shape[1] == d && p.shape[0] != d:
					in = append(in, s.reshape(p, []int{1, p.shape[0], d}))
				case p.shape[0] == d && p.shape[1] != d:
					out = append(out, s.reshape(p, []int{1, d, p.shape[1]}))
				}
			}
			if len(in) < 1 || len(in) > 2 || len(out) != 1 || slices.Contains(in, nil) || out[0] == nil || in[0].shape[1] != out[0].shape[2] || len(ups) > 0 && ups[0].shape[1] != len(in)*in[0].shape[1] {
				ok = false
				break
			}
			if len(in) == 1 {
				// one projection in: an ungated unit (act(x·w1ᵀ)·w2ᵀ)
				ups = append(ups, in[0])
				downs = append(downs, out[0])
				continue
			}
			ups = append(ups, s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: in, out: in[0].format, label: "gate and up"}))
			downs = append(downs, out[0])
		}
		if !ok || slices.Contains(ups, nil) {
			continue
		}
		w1 := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: ups, out: ups[0].format, label: "experts stacked"})
		w2 := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: downs, out: downs[0].format, label: "experts stacked"})
		if w1 != nil && w2 != nil {
			return w1, w2
		}
	}
	return nil, nil
}

// expertUnit is one expert module: its address and its parameters, in
// the order its call lists them (address order where it was not called).
type expertUnit struct {
	address string
	params  []string
}

// shapesKey names a set of parameters by their shapes, as a sorted list
// (a called module lists them in call order, an uncalled one in address
// order).
func (s *synth) shapesKey(names []string) string {
	var shapes []string
	for _, name := range names {
		if info, err := s.tr.Info(s.tr.Manifest.Params[name]); err == nil {
			shapes = append(shapes, fmt.Sprint(info.Shape))
		}
	}
	slices.Sort(shapes)
	return strings.Join(shapes, " ")
}

// uncalledExperts are the sub-modules of module that no call holds and
// whose parameters have the shapes key: experts no token was routed to,
// each the parent address of uncalled parameter groups (an expert's own
// linears are sub-modules of it).
func (s *synth) uncalledExperts(module, key string) []expertUnit {
	byParent := map[string][]string{}
	for sub, names := range s.uncalledSubs(module) {
		parent := sub
		if i := strings.LastIndexByte(sub, '.'); i > len(module) {
			parent = sub[:i]
		}
		byParent[parent] = append(byParent[parent], names...)
	}
	var out []expertUnit
	for _, parent := range slices.Sorted(maps.Keys(byParent)) {
		names := byParent[parent]
		slices.Sort(names)
		if s.shapesKey(names) == key {
			out = append(out, expertUnit{address: parent, params: names})
		}
	}
	return out
}

// naturalCompare orders addresses with their runs of digits read as
// numbers (a module list's entries: 2 before 10).
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			x, _ := strconv.Atoi(a[:da])
			y, _ := strconv.Atoi(b[:db])
			if c := cmp.Compare(x, y); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digitRun is the length of s's leading run of decimal digits.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// subtreeParams lists the parameters of c and of every call below it, in
// call order, each once (a module called per expert lists its own every
// time).
func (s *synth) subtreeParams(c trace.Call) []string {
	var out []string
	var walk func(c trace.Call)
	walk = func(c trace.Call) {
		for _, p := range c.Params {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		for _, ch := range s.children(c) {
			walk(ch)
		}
	}
	walk(c)
	return out
}
