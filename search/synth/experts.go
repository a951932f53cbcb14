package synth

import (
	"fmt"
	"slices"

	"zflow/exec/program"
	"zflow/semantics"
)

// fitRouter explains a call with one weight matrix and three results as
// a mixture-of-experts router: the logits (a linear of its input), then
// each row's top-k weights and expert indices (whichever result is
// integral), searched over softmax before the pick and renormalisation
// after it. nil when the results are not that.
func (s *synth) fitRouter(x, w *val, targets []*val) []*val {
	logits := s.fitLinear(x, []*val{w}, targets[0])
	if logits == nil {
		return nil
	}
	wi, ii := 1, 2
	if targets[1].integral() && !targets[2].integral() {
		wi, ii = 2, 1
	}
	wT, iT := targets[wi], targets[ii]
	if !iT.integral() || !slices.Equal(wT.shape, iT.shape) || len(wT.shape) == 0 {
		return nil
	}
	k := wT.shape[len(wT.shape)-1]
	var ev []semantics.Candidate
	for _, softmax := range []bool{true, false} {
		for _, normalize := range []bool{false, true} {
			p := program.RouteParams{K: k, Softmax: softmax, Normalize: normalize}
			e := &expr{op: program.OpRoute, attrs: program.Attrs{Route: p}, args: []*val{s.reshape(logits, []int{iT.numel() / k, logits.shape[len(logits.shape)-1]})}, out: wT.format,
				label: fmt.Sprintf("top %d softmax=%v normalize=%v", k, softmax, normalize)}
			if e.args[0] == nil {
				return nil
			}
			wv, sc := s.ev.score(e, wT)
			ev = append(ev, semantics.Candidate{Value: e.label, Score: finite(sc)})
			if wv == nil || sc > tolerance(wT.format) {
				continue
			}
			iv, err := s.ev.run(pickOf(e, 1))
			if err != nil || !slices.Equal(iv.data, iT.data) {
				continue
			}
			wv, iv = s.reshape(wv, wT.shape), s.reshape(iv, iT.shape)
			if wv == nil || iv == nil {
				return nil
			}
			fit := &leafFit{kind: "router", candidates: ev}
			wv.fit, iv.fit = fit, fit
			out := make([]*val, 3)
			out[0], out[wi], out[ii] = logits, wv, iv
			return out
		}
	}
	return nil
}

// fitExperts explains a call with two rank-3 weights as a mixture of
// experts over its tokens, routed by the integer indices and weights
// among its arguments: which weight is which, the activation of the
// gated unit and the order of gate and up in the fused projection
// searched.
func (s *synth) fitExperts(xs, params []*val, t *val) *val {
	if len(xs) < 3 || len(t.shape) != 2 {
		return nil
	}
	x := xs[0]
	var idx, wts *val
	for _, a := range xs[1:] {
		switch {
		case a.integral() && idx == nil:
			idx = a
		case wts == nil:
			wts = a
		}
	}
	if idx == nil || wts == nil || !slices.Equal(idx.shape, wts.shape) {
		return nil
	}
	var cands []*expr
	for _, w := range [][2]*val{{params[0], params[1]}, {params[1], params[0]}} {
		w1, w2 := w[0], w[1]
		if w1.shape[0] != w2.shape[0] || w1.shape[1] != 2*w2.shape[2] || w1.shape[2] != x.shape[len(x.shape)-1] {
			continue
		}
		for _, a := range glueActs {
			for _, upFirst := range []bool{false, true} {
				cands = append(cands, &expr{op: program.OpExperts, attrs: program.Attrs{Act: a, UpFirst: upFirst}, args: []*val{x, idx, wts, w1, w2}, out: t.format,
					label: fmt.Sprintf("experts %s up_first=%v", a, upFirst)})
			}
		}
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "experts", act: v.from.attrs.Act, candidates: ev}
		s.mlps = append(s.mlps, mlpRecord{scope: s.scopeOf, boundary: t.origin, x: v})
	}
	return v
}
