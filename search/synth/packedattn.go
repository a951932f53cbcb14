package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitPackedAttention explains a leaf t [.., E] made from query, key and
// value arguments (one tensor passed three times, or two or three) by one
// packed input projection W [3E, Eq] (rows q, k, v) or three of their own
// (keys and values of another width), a [3E] bias or none,
// attention, and an output projection that is a sub-module the call does
// not call: torch's nn.MultiheadAttention (F.multi_head_attention_forward
// over in_proj_weight and out_proj's weight). Rows batch first [B, S, E]
// or sequence first [S, B, E]; the head count and causality are searched.
func (s *synth) fitPackedAttention(module string, xs, params []*val, t *val) *val {
	if len(xs) == 0 || len(xs) > 3 || len(params) == 0 || len(t.shape) != 3 {
		return nil
	}
	e := t.shape[2]
	// the input projections: one packed [3E, Eq] matrix, or three [E, ·]
	// (q_proj_weight, k_proj_weight, v_proj_weight: keys and values of
	// another width), then a [3E] bias or none
	var ws [3]*val
	var b *val
	n := 0
	switch {
	case len(params[0].shape) == 2 && params[0].shape[0] == 3*e:
		n = 1
	case len(params) >= 3 && isMatrix(params[1]) && isMatrix(params[2]):
		for i := range 3 {
			if ws[i] = params[i]; ws[i].shape[0] != e {
				return nil
			}
		}
		n = 3
	default:
		return nil
	}
	switch rest := params[n:]; {
	case len(rest) == 1 && rest[0].numel() == 3*e:
		b = rest[0]
	case len(rest) != 0:
		return nil
	}
	arg := func(i int) *val { return xs[min(i, len(xs)-1)] }
	for i := range 3 {
		in := params[0].shape[1]
		if n == 3 {
			in = ws[i].shape[1]
		}
		if x := arg(i); len(x.shape) != 3 || x.shape[2] != in || x.integral() {
			return nil
		}
	}
	var out [2]*val
	for _, l := range s.uncalledLinears(module) {
		if slices.Equal(l[0].shape, []int{e, e}) {
			if out[0] != nil {
				return nil // more than one: not known which projects the output
			}
			out = l
		}
	}
	if out[0] == nil {
		return nil
	}
	piece := func(p *val, i int) *val {
		if p == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: i * e, End: (i + 1) * e}, args: []*val{p}, out: p.format, label: []string{"q", "k", "v"}[i] + " rows of the packed projection"})
	}
	type choice struct {
		ch       attnChoice
		seqFirst bool
	}
	var cands []*expr
	chosen := map[*expr]choice{}
	for _, seqFirst := range []bool{false, true} {
		rows := func(x *val) *val {
			if !seqFirst {
				return x
			}
			return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{x}, out: x.format, label: "batch first"})
		}
		var qkv [3]*val
		for i := range 3 {
			w := ws[i]
			if n == 1 {
				w = piece(params[0], i)
			}
			qkv[i] = s.derive(&expr{op: program.OpLinear, args: []*val{rows(arg(i)), w, piece(b, i)}, out: t.format, label: "packed input projection"})
			if qkv[i] == nil {
				return nil
			}
		}
		for d := minHeadDim; d <= maxHeadDim && d <= e; d *= 2 {
			if e%d != 0 {
				continue
			}
			for _, causal := range []bool{false, true} {
				p := exec.AttentionParams{Heads: e / d, KVHeads: e / d}
				if causal {
					p.Mask = exec.MaskCausal
				}
				a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{qkv[0], qkv[1], qkv[2], nil, nil, nil}, out: t.format})
				o := s.derive(&expr{op: program.OpLinear, args: []*val{a, out[0], out[1]}, out: t.format, label: "output projection"})
				if o == nil {
					continue
				}
				label := fmt.Sprintf("packed attention heads=%d causal=%v sequence_first=%v", e/d, causal, seqFirst)
				ex := &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(o.shape)}, args: []*val{o}, out: t.format, label: label}
				if seqFirst {
					ex = &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{o}, out: t.format, label: label}
				}
				cands = append(cands, ex)
				chosen[ex] = choice{ch: attnChoice{q: qkv[0], k: qkv[1], v: qkv[2], headDim: d, params: p, label: label, rows: -1, result: a}, seqFirst: seqFirst}
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	c := chosen[v.from]
	c.ch.score = relRMS(t.format, v.data, t.data)
	v.fit = &leafFit{kind: "attention", candidates: ev}
	s.attn = append(s.attn, attnRecord{choice: c.ch, scope: module, boundary: t.origin, candidates: ev})
	return v
}
