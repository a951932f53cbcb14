package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// linearTriples are the (q, k, v) operands a linear attention over the
// scope may read for t: the fused projections' pieces, and every triple of
// the scope's values whose shapes agree with t's.
func (s *synth) linearTriples(sc *scope, t *val) [][3]*val {
	pool, fused := s.operands(sc, t)
	triples := fused
	triples = append(triples, distinctTriples(pool, func(q, k, v *val) bool {
		return k.shape[1] == v.shape[1] && q.shape[2] == k.shape[2] && v.shape[2] == t.shape[2] && q.shape[1] == t.shape[1]
	})...)
	return triples
}

// linearAttention explains t [B, S, H·Dv] as kernelised attention over
// values the scope made (program.LinearAttentionParams: φ(q), φ(k) summed
// against v first): every (q, k, v) triple of the scope's operands, head
// width and ε, φ a ReLU. Tried after softmax attention fails.
func (s *synth) linearAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	triples := s.linearTriples(sc, t)
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
			for _, eps := range []float32{1e-15, 1e-5} { // Sana's and EfficientViT's; timm's
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
	// rope is the layout the numerator's kernels are rotated in; unset
	// where they are not
	rope exec.RopeLayout
}

// rotatedLinearAttention explains t [B, S, H·Dv] as linear attention
// whose numerator reads RoPE'd kernels, rope(φ(q)) and rope(φ(k)), while
// its normaliser reads φ(q) and φ(k) unrotated (SANA-Video): every (q,
// k, v) triple of the scope's operands, RoPE table of the scope, layout
// and head width. Tried once every other form failed.
func (s *synth) rotatedLinearAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	tables := s.ropeTables(sc)
	if len(tables) == 0 {
		return nil
	}
	triples := s.linearTriples(sc, t)
	phi := map[*val]*val{}
	kernel := func(x *val) *val {
		if y, ok := phi[x]; ok {
			return y
		}
		y := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActReLU}, args: []*val{x}, out: precision.F32, label: "the kernel"})
		phi[x] = y
		return y
	}
	var cands []*expr
	layouts := map[*expr]exec.RopeLayout{}
	for _, tr := range triples {
		q, k, v := tr[0], tr[1], tr[2]
		if !slices.Equal(q.shape[:2], t.shape[:2]) || q.shape[1] != k.shape[1] {
			continue
		}
		for d := minHeadDim; d <= maxHeadDim && d <= q.shape[2]; d *= 2 {
			if q.shape[2]%d != 0 || v.shape[2]%(q.shape[2]/d) != 0 {
				continue
			}
			h := q.shape[2] / d
			for _, tb := range tables {
				for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
					pq, pk := kernel(q), kernel(k)
					if pq == nil || pk == nil {
						continue
					}
					qn, kn := s.rotate(pq, tb, layout, h, d), s.rotate(pk, tb, layout, h, d)
					if qn == nil || kn == nil {
						continue
					}
					p := program.LinearAttentionParams{Heads: h, Kernel: exec.ActReLU, Eps: 1e-15}
					e := &expr{op: program.OpLinearAttention, attrs: program.Attrs{LinearAttention: p}, args: []*val{q, k, v, qn, kn}, out: t.format,
						label: fmt.Sprintf("linear attention heads=%d kernel=relu eps=%g, numerator %s-rotated", p.Heads, p.Eps, layout)}
					cands = append(cands, e)
					layouts[e] = layout
				}
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
	s.linearAttn = append(s.linearAttn, linearAttnRecord{scope: sc.module, boundary: t.origin, params: w.from.attrs.LinearAttention, candidates: ev, rope: layouts[w.from]})
	return w
}

// ropeFactor is the layout the numerator's kernels are rotated in, each
// layout scored by its best candidate.
func (a linearAttnRecord) ropeFactor() semantics.Factor {
	var cands []semantics.Candidate
	win, runner := math.Inf(1), math.Inf(1)
	for _, l := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
		best := math.Inf(1)
		for _, c := range a.candidates {
			if label, ok := c.Value.(string); ok && strings.HasSuffix(label, l.String()+"-rotated") {
				best = min(best, c.Score)
			}
		}
		cands = append(cands, semantics.Candidate{Value: l.String(), Score: best})
		if l == a.rope {
			win = best
		} else {
			runner = min(runner, best)
		}
	}
	m := math.Inf(1)
	if win > 0 {
		m = runner / win
	}
	return semantics.Factor{Name: "rope_layout", Scope: a.scope, Value: a.rope.String(), Margin: semantics.Margin(m), Decisive: m > 2,
		Candidates: cands, Evidence: semantics.Evidence{Boundary: a.boundary, Metric: "rel_rms", Note: "the layout the linear attention's numerator rotates its kernels in (each layout's best operands)"}}
}
