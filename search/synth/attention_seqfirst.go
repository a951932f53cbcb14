package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// seqFirstAttention explains t as attention over rows laid out sequence
// first, [S, B, W] (projections that read [S, B, C], as fairseq-style
// encoders and Longformer's self-attention do): the scope's own values
// of [S, B, ·] moved to [B, S, ·], attention searched over them batch
// first, and its result moved back where t is sequence first too. Tried
// once every other form failed (every attention form reads axis 1 as the
// sequence).
func (s *synth) seqFirstAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom || t.integral() {
		return nil
	}
	for _, first := range []bool{true, false} {
		n, b := t.shape[1], t.shape[0] // sequence and batch of the operands
		if first {
			n, b = b, n
		}
		if n < 2 {
			continue
		}
		psc := &scope{module: sc.module, call: sc.call, own: map[*val]bool{}, arg: sc.arg, vecs: map[string][]vec{}}
		moved := 0
		for _, v := range sc.vals {
			if sc.own[v] && !v.opaque && len(v.shape) == 3 && v.shape[0] == n && v.shape[1] == b {
				if m := s.swapRows(v); m != nil {
					psc.add(m, true)
					moved++
					continue
				}
			}
			psc.add(v, false)
		}
		if moved < 2 {
			continue
		}
		proxy := t
		if first {
			proxy = &val{shape: []int{b, n, t.shape[2]}, data: swapData(t.data, n, b, t.shape[2]), format: t.format, origin: t.origin, reshapedFrom: true}
		}
		r := s.attentionOf(proxy, psc, false)
		if r == nil {
			continue
		}
		if first {
			return s.swapRows(r)
		}
		return r
	}
	return nil
}

// swapRows is v [a, b, c] with its first two axes swapped.
func (s *synth) swapRows(v *val) *val {
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{v}, out: v.format, label: "sequence first"})
}

// swapData is x [a, b, c] laid out [b, a, c].
func swapData(x []float32, a, b, c int) []float32 {
	out := make([]float32, len(x))
	for i := range a {
		for j := range b {
			copy(out[(j*a+i)*c:][:c], x[(i*b+j)*c:][:c])
		}
	}
	return slices.Clip(out)
}
