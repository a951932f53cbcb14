package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// factorizedAttention explains t [B, N, H·D] as factorized attention
// (CoaT's): per head, the keys softmaxed over the rows, then
// q·(softmax(k)ᵀ·v) times 1/√D, no softmax over a query's scores, the
// heads merged; plus, where the scope made one, a per-head value [B, H, N,
// D] added before the merge (CoaT's convolutional position encoding). q,
// k and v are the scope's operand triples; each head width that divides
// the width is tried.
func (s *synth) factorizedAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	pool, fused := s.operands(sc, t)
	triples := slices.Clone(fused)
	triples = append(triples, distinctTriples(pool, func(q, k, v *val) bool {
		return slices.Equal(q.shape, t.shape) && slices.Equal(k.shape, t.shape) && slices.Equal(v.shape, t.shape)
	})...)
	if len(triples) == 0 {
		return nil
	}
	var cands []*expr
	for d := minHeadDim; d <= maxHeadDim && d <= c; d *= 2 {
		if c%d != 0 {
			continue
		}
		h := c / d
		addends := []*val{nil}
		for _, x := range sc.vals {
			if sc.own[x] && !x.opaque && slices.Equal(x.shape, []int{b, h, n, d}) {
				addends = append(addends, x)
			}
		}
		heads := func(x *val) *val {
			return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{s.reshape(x, []int{b, n, h, d})}, out: x.format, label: "heads split"})
		}
		scale := s.constant(float64(float32(1 / math.Sqrt(float64(d)))))
		for _, tr := range triples {
			q, k, v := heads(tr[0]), heads(tr[1]), heads(tr[2])
			if q == nil || k == nil || v == nil || q.shape[2] != n || k.shape[2] != v.shape[2] {
				continue
			}
			kt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 3, 2}}, args: []*val{k}, out: k.format, label: "the keys' rows last"})
			ks := s.derive(&expr{op: program.OpSoftmax, args: []*val{kt}, out: t.format, label: "keys softmaxed over the rows"})
			kv := s.derive(&expr{op: program.OpMatMul, args: []*val{ks, v}, out: t.format, label: "softmax(k)ᵀ·v per head"})
			fa := s.derive(&expr{op: program.OpMatMul, args: []*val{q, kv}, out: t.format, label: "q·(softmax(k)ᵀ·v)"})
			fa = s.derive(&expr{op: program.OpMul, args: []*val{fa, scale}, out: t.format, label: "times 1/√D"})
			if fa == nil {
				continue
			}
			for _, x := range addends {
				sum, label := fa, fmt.Sprintf("factorized attention of %d heads of %d", h, d)
				if x != nil {
					sum = s.derive(&expr{op: program.OpAdd, args: []*val{fa, x}, out: t.format, label: "plus a per-head value"})
					label += ", plus a per-head value"
				}
				merged := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{sum}, out: t.format, label: "heads merged"})
				if merged != nil {
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{merged}, out: t.format, label: label})
				}
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}
