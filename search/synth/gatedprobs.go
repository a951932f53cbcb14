package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// gatedProbabilities explains t [B, H, Sq, Sk], attention probabilities
// (each row sums to 1), as a per-head gated mix of two probability maps:
// (1 − σ(g))·P + σ(g)·Q with g a parameter of H entries, P the softmax of
// q·kᵀ of heads of the scope's operands (scaled as explicitScales say),
// Q the softmax over the keys of a value of the scope laid out [B, Sq,
// Sk, H] or [B, H, Sq, Sk] (scores a module made from positions: ConViT's
// gated positional self-attention); either map may take the σ(g) side.
// The mix already sums to 1, so a renormalisation after it changes
// nothing the formats hold. One of glue's late forms: tried only where
// the scope holds such a gate and such a value, and the target's rows
// sum to 1.
func (s *synth) gatedProbabilities(t *val, sc *scope) *val {
	if len(t.shape) != 4 || t.numel() == 0 || t.integral() || !rowsSumToOne(t, tolerance(t.format)) {
		return nil
	}
	b, h, sq, sk := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	var gates, scores []*val
	for _, v := range sc.vals {
		switch {
		case v.opaque || v.integral() || v == t:
		case !sc.own[v] && v.numel() == h && singleAxis(v):
			gates = append(gates, v)
		case sc.own[v] && len(v.shape) == 4 && v.numel() == t.numel():
			if slices.Equal(v.shape, []int{b, sq, sk, h}) {
				scores = append(scores, s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2}}, args: []*val{v}, out: v.format, label: "heads first"}))
			} else if slices.Equal(v.shape, t.shape) {
				scores = append(scores, v)
			}
		}
	}
	if len(gates) == 0 || len(scores) == 0 {
		return nil
	}
	// the positional maps: each such value softmaxed over the keys
	var qs []*val
	for _, x := range scores {
		if q := s.derive(&expr{op: program.OpSoftmax, args: []*val{x}, out: t.format, label: "softmax over the keys"}); q != nil {
			qs = append(qs, q)
		}
	}
	// the content maps: softmax(q·kᵀ) of the scope's operands, or of
	// the halves of one fused [q | k] projection
	var ps []*val
	probs := func(q, k *val) {
		for _, where := range explicitScales {
			if e := s.scoresExpr(q, k, nil, h, q.shape[2]/h, where, true, []int{0, 1, 2, 3}, t); e != nil {
				if p := s.derive(e); p != nil {
					ps = append(ps, p)
				}
			}
		}
	}
	for _, x := range sc.vals {
		if !sc.own[x] || x.opaque || len(x.shape) != 3 || x.shape[0] != b || x.shape[1] != sq || sq != sk || x.shape[2]%(2*h) != 0 {
			continue
		}
		w := x.shape[2] / 2
		q := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: w}, args: []*val{x}, out: x.format, label: "q"})
		k := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: w, End: 2 * w}, args: []*val{x}, out: x.format, label: "k"})
		if q != nil && k != nil {
			probs(q, k)
		}
	}
	for _, wq := range s.operandWidths(sc, b) {
		if wq%h != 0 {
			continue
		}
		for _, qk := range s.qkPairs(sc, b, wq) {
			if qk[0].shape[1] == sq && qk[1].shape[1] == sk {
				probs(qk[0], qk[1])
			}
		}
	}
	var cands []*expr
	for _, g := range gates {
		sg := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{s.reshape(g, []int{1, h, 1, 1})}, out: t.format, label: "σ of the gate"})
		rest := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), sg}, out: t.format, label: "1 − σ of the gate"})
		if sg == nil || rest == nil {
			continue
		}
		for _, p := range ps {
			for _, q := range qs {
				for _, swap := range []bool{false, true} {
					a, c, names := p, q, [2]string{"softmax(q·kᵀ)", "softmax(positions)"}
					if swap {
						a, c, names = q, p, [2]string{names[1], names[0]}
					}
					x := s.derive(&expr{op: program.OpMul, args: []*val{rest, a}, out: t.format})
					y := s.derive(&expr{op: program.OpMul, args: []*val{sg, c}, out: t.format})
					if x != nil && y != nil {
						cands = append(cands, &expr{op: program.OpAdd, args: []*val{x, y}, out: t.format,
							label: fmt.Sprintf("(1 − σ(%s))·%s + σ(%s)·%s", g.origin, names[0], g.origin, names[1])})
					}
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}
