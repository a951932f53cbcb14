package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// maxSummedResults bounds the attentions one q runs for summedAttention:
// their pairs are scored.
const maxSummedResults = 128

// summedAttention explains t [B, S, W] as the sum of two attentions of one
// q over two sets of keys and values (a cross-attention that reads a second
// context, an image's, through its own key and value projections and adds
// the result to the first's before the output projection): every pair of
// (k, v) of the scope's operands is run with q, no mask, the default scale,
// each head width the attentions so far showed or a power of two, and the
// sum of two runs over different keys and values must reproduce t. Tried
// where every other attention form failed, as the pairs multiply.
func (s *synth) summedAttention(t *val, sc *scope) *val {
	if t.reshapedFrom || len(t.shape) != 3 {
		return nil
	}
	b, n, width := t.shape[0], t.shape[1], t.shape[2]
	dims := s.headDims(width)
	pool, _ := s.operands(sc, t)
	var qs [][2]*val // q, nil
	var kvs [][2]*val
	for _, q := range pool {
		if q.shape[0] == b && q.shape[1] == n && q.shape[2] == width {
			qs = append(qs, [2]*val{q, nil})
		}
	}
	for _, k := range pool {
		for _, v := range pool {
			if k != v && slices.Equal(k.shape, v.shape) && k.shape[2] == width {
				kvs = append(kvs, [2]*val{k, v})
			}
		}
	}
	if len(qs) == 0 || len(kvs) < 2 {
		return nil
	}
	type run struct {
		k, v *val
		a    *val
	}
	type fit struct {
		ch     attnChoice
		a1, a2 *val
		score  float64
	}
	var best *fit
	var evidence []semantics.Candidate
	sum := make([]float32, t.numel())
	for _, d := range dims {
		heads := width / d
		p := exec.AttentionParams{Heads: heads, KVHeads: heads}
		for _, qq := range qs {
			q := qq[0]
			var runs []run
			for _, kv := range kvs {
				if kv[0] == q || kv[1] == q || len(runs) >= maxSummedResults {
					continue
				}
				a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, kv[0], kv[1], nil, nil, nil}, out: t.format,
					label: fmt.Sprintf("summed attention heads=%d", heads)})
				if a != nil && slices.Equal(a.shape, t.shape) {
					runs = append(runs, run{kv[0], kv[1], a})
				}
			}
			for i := range runs {
				for j := i + 1; j < len(runs); j++ {
					r1, r2 := runs[i], runs[j]
					if r1.k == r2.k || r1.v == r2.v || r1.k == r2.v || r1.v == r2.k {
						continue
					}
					for e := range sum {
						sum[e] = r1.a.data[e] + r2.a.data[e]
					}
					score := relRMS(t.format, sum, t.data)
					if best == nil || score < best.score {
						best = &fit{ch: attnChoice{q: q, k: r1.k, v: r1.v, headDim: d, params: p,
							label: fmt.Sprintf("sum of two attentions heads=%d (keys of %d and %d rows)", heads, r1.k.shape[1], r2.k.shape[1])},
							a1: r1.a, a2: r2.a, score: score}
					}
				}
			}
		}
	}
	if best == nil || best.score > tolerance(t.format) || math.IsInf(best.score, 1) {
		return nil
	}
	evidence = append(evidence, semantics.Candidate{Value: best.ch.label, Score: finite(best.score)})
	w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{best.a1, best.a2}, out: t.format, label: "first attention + second attention"}})
	if w == nil || !s.everyStep(w, t, tolerance(t.format)) {
		return nil
	}
	w.fit = &leafFit{kind: "attention", candidates: evidence}
	ch := best.ch
	ch.score, ch.result = relRMS(t.format, w.data, t.data), w
	s.attn = append(s.attn, attnRecord{choice: ch, scope: sc.module, boundary: t.origin, candidates: evidence})
	return w
}

// headDims are the head widths to try for an attention of width
// channels: those of the attentions found so far first, then the powers
// of two from minHeadDim to maxHeadDim that divide it.
func (s *synth) headDims(width int) []int {
	var dims []int
	for _, r := range s.attn {
		if d := r.choice.headDim; d > 0 && width%d == 0 && !slices.Contains(dims, d) {
			dims = append(dims, d)
		}
	}
	for d := minHeadDim; d <= maxHeadDim && d <= width; d *= 2 {
		if width%d == 0 && !slices.Contains(dims, d) {
			dims = append(dims, d)
		}
	}
	return dims
}
