package synth

import (
	"github.com/zflow/zflow/exec/program"
)

// attentionPlus explains t [B, S, H·D] as attention plus a per-head value
// [B, H, S, D] made beside it in the scope (Nyströmformer's depthwise
// convolution of the values over the sequence, added to the context
// before the heads are joined): the value brought to t's layout, the rest
// explained as attention. Only values the scope's own calls made with
// the heads' layout are tried (one head too: MViTv2's first stage adds its
// pooled queries [B, 1, S, D]); tried once every other form has failed.
func (s *synth) attentionPlus(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	B, S, W := t.shape[0], t.shape[1], t.shape[2]
	for _, v := range vals {
		if v.opaque || !sc.own[v] || len(v.shape) != 4 || v.shape[0] != B || v.shape[2] != S || v.shape[1]*v.shape[3] != W {
			continue
		}
		perm := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{v}, out: v.format, label: "heads joined"})
		r := s.reshape(perm, t.shape)
		if r == nil {
			continue
		}
		rest := s.minus(t, r)
		a := s.attention(rest, sc)
		if a == nil {
			continue
		}
		if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, r}, out: t.format, label: "attention plus a per-head value"}}); w != nil {
			return w
		}
	}
	return nil
}
