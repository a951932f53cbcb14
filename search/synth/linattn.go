package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// linearAttention explains t [B, S, H·Dv] as kernelised attention over
// values the scope made (program.LinearAttentionParams: φ(q), φ(k) summed
// against v first): every (q, k, v) triple of the scope's operands, head
// width and ε, φ a ReLU. Tried after softmax attention fails.
func (s *synth) linearAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	pool, fused := s.operands(sc, t)
	triples := fused
	for _, q := range pool {
		for _, k := range pool {
			for _, v := range pool {
				if q != k && q != v && k != v && k.shape[1] == v.shape[1] && q.shape[2] == k.shape[2] && v.shape[2] == t.shape[2] && q.shape[1] == t.shape[1] {
					triples = append(triples, [3]*val{q, k, v})
				}
			}
		}
	}
	var cands []*expr
	for _, tr := range triples {
		q, k, v := tr[0], tr[1], tr[2]
		if !slices.Equal(q.shape[:2], t.shape[:2]) {
			continue
		}
		for d := minHeadDim; d <= maxHeadDim && d <= q.shape[2]; d *= 2 {
			if q.shape[2]%d != 0 || v.shape[2]%(q.shape[2]/d) != 0 {
				continue
			}
			for _, eps := range []float32{1e-15} { // Sana's and EfficientViT's
				p := program.LinearAttentionParams{Heads: q.shape[2] / d, Kernel: exec.ActReLU, Eps: eps}
				cands = append(cands, &expr{op: program.OpLinearAttention, attrs: program.Attrs{LinearAttention: p}, args: []*val{q, k, v}, out: t.format,
					label: fmt.Sprintf("linear attention heads=%d kernel=relu eps=%g", p.Heads, eps)})
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	w, ev := s.best(t, cands)
	if w == nil {
		return nil
	}
	w.fit = &leafFit{kind: "attention", candidates: ev}
	s.linearAttn = append(s.linearAttn, linearAttnRecord{scope: sc.module, boundary: t.origin, params: w.from.attrs.LinearAttention, candidates: ev})
	return w
}

// linearAttnRecord is a linear attention the search found, for its factors.
type linearAttnRecord struct {
	scope, boundary string
	params          program.LinearAttentionParams
	candidates      []semantics.Candidate
}
