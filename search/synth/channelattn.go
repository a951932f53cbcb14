package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// channelAttention explains t [B, S, H·d] as softmax attention across
// each head's channels with no normalisation, the three operands in any
// of their roles: A = softmax(aᵀ·b·scale) over a head's d channels (each
// channel a row of S tokens), the result's channel i the mix Σ_j A[i, j]
// of c's channels (DaViT's channel attention: a = k·d^−½, b = v, c = q).
// The operands are the fused projections' pieces and the scope's own
// values; the scale 1/√d or 1/√S. Tried where every other form failed.
func (s *synth) channelAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	n, width := t.shape[1], t.shape[2]
	pool, fused := s.operands(sc, t)
	triples := fused
	triples = append(triples, distinctTriples(pool, func(q, k, v *val) bool {
		return slices.Equal(q.shape, t.shape) && slices.Equal(k.shape, t.shape) && slices.Equal(v.shape, t.shape)
	})...)
	var cands []*expr
	for _, tr := range triples {
		if !slices.Equal(tr[0].shape, t.shape) || !slices.Equal(tr[1].shape, t.shape) || !slices.Equal(tr[2].shape, t.shape) {
			continue
		}
		for d := minHeadDim; d <= maxHeadDim && d <= width; d *= 2 {
			if width%d != 0 {
				continue
			}
			heads := width / d
			rows := [3]*val{s.channelRows(tr[0], heads, d), s.channelRows(tr[1], heads, d), s.channelRows(tr[2], heads, d)}
			for _, p := range permutations(3) {
				a, b, c := rows[p[0]], rows[p[1]], rows[p[2]]
				if a == nil || b == nil || c == nil {
					continue
				}
				for _, scale := range []float64{1 / math.Sqrt(float64(d)), 1 / math.Sqrt(float64(n))} {
					ap := exec.AttentionParams{Heads: heads, KVHeads: heads, Scale: float32(scale)}
					r := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: ap}, args: []*val{a, b, c, nil, nil, nil}, out: t.format})
					back := s.channelRowsBack(r, heads, d, n)
					if back == nil {
						continue
					}
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{back}, out: t.format,
						label: fmt.Sprintf("attention across channels heads=%d roles=%v scale=%.4g", heads, p, scale)})
				}
			}
		}
	}
	return s.bestFit(t, cands, "attention")
}
