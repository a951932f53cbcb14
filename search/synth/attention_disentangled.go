package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// disentangledAttention explains t [B, S, H·D] as self-attention whose
// scores add to the content term position terms read off two tables of
// relative buckets (disentangled attention, He et al. 2020, section 3.1):
//
//	scores[b, h, i, j] = (q·kᵀ)[i, j]·c
//	                   + (q·Pkᵀ)[i, c2p[i, j]]·c      (content to position)
//	                   + (k·Pqᵀ)[j, p2c[j, i]]·c      (position to content)
//
// Pk and Pq [1 or none, L, H·D] values of the scope with a row per bucket
// (L = 2·span: projections of a table of relative embeddings), rel an
// integer value of the scope [1 or B, S, S] (the relative buckets of
// query i and key j), c2p = clamp(rel + span, 0, L − 1), p2c =
// clamp(−rel + span, 0, L − 1), and c = 1/√(D·f) with f the number of
// terms summed (1 + the position terms). Written in the vocabulary: the
// content term is the attention op's, with its scale; the position terms
// its additive bias, made per head by a matmul of the queries (keys) with
// a table, the indices by add, mul, minimum and maximum nodes from the
// buckets, and the gather as a batched matmul with the one-hot of the
// indices (rows of an identity): one nonzero term per entry, exact. The
// operands, the tables' roles, the terms present and f are searched, each
// choice scored against t; the runners-up are the evidence. Tried once
// the plain attention forms and the relative shift have failed, and only
// where the scope holds a table of an even number of rows and a value of
// buckets [.., S, S].
func (s *synth) disentangledAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom || t.shape[1] < 2 {
		return nil
	}
	b, n, width := t.shape[0], t.shape[1], t.shape[2]
	tables, rels := bucketTables(sc, b, n, width)
	if len(tables) == 0 || len(rels) == 0 {
		return nil
	}
	pool, _ := s.operands(sc, t)
	var ops []*val
	for _, v := range pool {
		if v.shape[1] == n && v.shape[2] == width && len(v.shape) == 3 && !v.integral() && !slices.Contains(tables, v) {
			ops = append(ops, v)
		}
	}
	var triples [][3]*val
	triples = append(triples, distinctTriples(ops, nil)...)
	if len(triples) == 0 {
		return nil
	}
	type cand struct {
		dc     disentangledChoice
		score  float64
		result *val
		bias   *val
	}
	var all []cand
	var evidence []semantics.Candidate
	try := func(dc disentangledChoice) *cand {
		bias := s.disentangledBias(dc)
		if bias == nil {
			return nil
		}
		p := exec.AttentionParams{Heads: width / dc.d, KVHeads: width / dc.d, Scale: dc.scale()}
		if dc.mask != nil {
			p.Mask = exec.MaskExplicit
		}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{dc.q, dc.k, dc.v, dc.mask, bias, nil}, out: t.format, label: dc.label()}
		v, score := s.ev.score(e, t)
		evidence = append(evidence, semantics.Candidate{Value: e.label, Score: finite(score)})
		if v == nil {
			return nil
		}
		all = append(all, cand{dc: dc, score: score, result: v, bias: bias})
		return &all[len(all)-1]
	}
	goal := refineGoal(t.format)
	var best *cand
	keep := func(c *cand) {
		if c != nil && (best == nil || c.score < best.score) {
			cc := *c
			best = &cc
		}
	}
	func() {
		for _, tr := range triples {
			// no mask, then the scope's 0/1 key masks (an all-ones one is
			// none)
			masks := append([]*val{nil}, s.keyMasks(sc, tr[0], tr[1])...)
			for _, d := range s.headDims(width) {
				for _, rel := range rels {
					for _, pk := range tables {
						for _, pq := range tables {
							if pk.shape[len(pk.shape)-2] != pq.shape[len(pq.shape)-2] {
								continue
							}
							for _, m := range masks {
								keep(try(disentangledChoice{q: tr[0], k: tr[1], v: tr[2], mask: m, pk: pk, pq: pq, rel: rel, d: d, c2p: true, p2c: true, factor: 3}))
								if best != nil && best.score <= goal {
									return
								}
							}
						}
					}
				}
			}
		}
	}()
	if best == nil || best.score >= 1 {
		return nil
	}
	// the variants around the best, for the evidence (and a better fit
	// where one is)
	w := best.dc
	var variants []disentangledChoice
	for _, terms := range [][2]bool{{true, false}, {false, true}, {false, false}} {
		for _, f := range []int{1, 2, 3} {
			r := w
			r.c2p, r.p2c, r.factor = terms[0], terms[1], f
			variants = append(variants, r)
		}
	}
	for _, f := range []int{1, 2} {
		r := w
		r.factor = f
		variants = append(variants, r)
	}
	r := w
	r.pk, r.pq = w.pq, w.pk
	if r.pk != w.pk {
		variants = append(variants, r)
	}
	r = w
	r.signFlipped = true
	variants = append(variants, r)
	// each variant's score, for the document's factors (read below
	// against the final winner)
	type scored struct {
		dc    disentangledChoice
		score float64
	}
	seen := []scored{{w, best.score}}
	for _, rc := range variants {
		c := try(rc)
		if c != nil {
			seen = append(seen, scored{rc, c.score})
		}
		keep(c)
	}
	if best.score > tolerance(t.format) || (!best.dc.c2p && !best.dc.p2c) {
		// not within the tolerance, or no position term in the best
		// choice: plain attention, the plain forms' to explain
		return nil
	}
	dc := best.dc
	evidence = append(evidence, semantics.Candidate{Value: dc.label(), Score: finite(best.score)})
	ch := attnChoice{q: dc.q, k: dc.k, v: dc.v, headDim: dc.d, params: exec.AttentionParams{Heads: width / dc.d, KVHeads: width / dc.d, Scale: dc.scale()},
		label: dc.label(), score: best.score, result: best.result, bias: best.bias, rows: 0}
	if dc.mask != nil {
		ch.params.Mask = exec.MaskExplicit
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: ch, scope: sc.module, boundary: t.origin, candidates: evidence})
	// the terms at the winner's factor, and the factors with its terms
	rec := disentangledRecord{scope: sc.module, boundary: t.origin, terms: dc.terms(), factor: dc.factor}
	for _, x := range seen {
		if x.dc.signFlipped || x.dc.pk != dc.pk || x.dc.mask != dc.mask {
			continue
		}
		if x.dc.factor == dc.factor {
			rec.termScores = append(rec.termScores, semantics.Candidate{Value: x.dc.terms(), Score: finite(x.score)})
		}
		if x.dc.c2p == dc.c2p && x.dc.p2c == dc.p2c {
			rec.factorScores = append(rec.factorScores, semantics.Candidate{Value: float64(x.dc.factor), Score: finite(x.score)})
		}
	}
	s.disentangled = append(s.disentangled, rec)
	return best.result
}

// disentangledRecord is what disentangledAttention found in one scope,
// for the document's factors: the position terms summed and the scale's
// factor, each with the variants' scores.
type disentangledRecord struct {
	scope, boundary          string
	terms                    string
	factor                   int
	termScores, factorScores []semantics.Candidate
}

// factors are the record's attention_position_terms and
// attention_scale_factor.
func (r disentangledRecord) factors() []semantics.Factor {
	return []semantics.Factor{
		factor("attention_position_terms", r.scope, r.terms, r.termScores, r.boundary),
		factor("attention_scale_factor", r.scope, float64(r.factor), r.factorScores, r.boundary),
	}
}

// disentangledChoice is one assignment of disentangledAttention's search.
type disentangledChoice struct {
	q, k, v, pk, pq, rel *val
	mask                 *val // a 0/1 key mask [B, 1, S] (nonzero: attend), or nil
	d                    int
	c2p, p2c             bool
	factor               int  // the scale's 1/√(D·factor)
	signFlipped          bool // the buckets negated for c2p and as they are for p2c (the control)
}

func (c disentangledChoice) scale() float32 {
	return float32(1 / math.Sqrt(float64(c.d*c.factor)))
}

// terms names the position terms summed: "c2p+p2c", "c2p", "p2c" or
// "none".
func (c disentangledChoice) terms() string {
	var terms []string
	if c.c2p {
		terms = append(terms, "c2p")
	}
	if c.p2c {
		terms = append(terms, "p2c")
	}
	if len(terms) == 0 {
		return "none"
	}
	return strings.Join(terms, "+")
}

func (c disentangledChoice) label() string {
	l := fmt.Sprintf("heads=%d kv=%d causal=false rope=none disentangled=[%s] scale=1/sqrt(%d·%d) position_keys=%s position_queries=%s buckets=%s", c.q.shape[2]/c.d, c.k.shape[2]/c.d, strings.ReplaceAll(c.terms(), "+", " "), c.d, c.factor, c.pk.origin, c.pq.origin, c.rel.origin)
	if c.signFlipped {
		l += " buckets_negated"
	}
	if c.mask != nil {
		l += " mask=" + c.mask.origin
	}
	return l
}

// disentangledBias is the position terms of dc, [B, H, S, S], scaled as
// the content term is; nil where a step does not derive. With neither
// term it is zeros (plain attention at dc's scale: the control).
func (s *synth) disentangledBias(dc disentangledChoice) *val {
	b, n, width := dc.q.shape[0], dc.q.shape[1], dc.q.shape[2]
	h := width / dc.d
	var sum *val
	add := func(v *val) {
		if v == nil {
			return
		}
		if sum == nil {
			sum = v
			return
		}
		sum = s.derive(&expr{op: program.OpAdd, args: []*val{sum, v}, out: dc.q.format, label: "position terms summed"})
	}
	sign := 1.0
	if dc.signFlipped {
		sign = -1
	}
	if dc.c2p {
		g := s.bucketGathered(dc.q, dc.pk, dc.rel, dc.d, sign)
		if g == nil {
			return nil
		}
		add(g)
	}
	if dc.p2c {
		g := s.bucketGathered(dc.k, dc.pq, dc.rel, dc.d, -sign)
		if g == nil {
			return nil
		}
		add(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 3, 2}}, args: []*val{g}, out: g.format, label: "position to content: a row per query"}))
	}
	if sum == nil {
		z := s.zeros([]int{b, h, n, n}, f32, fmt.Sprintf("zeros%dx%dx%dx%d", b, h, n, n), "no position term")
		s.seq++
		z.seq = s.seq
		return z
	}
	return s.derive(&expr{op: program.OpMul, args: []*val{sum, s.constant(float64(dc.scale()))}, out: sum.format, label: "position terms scaled as the content term"})
}

// bucketGathered is, per head, x [B, S, H·D] times the table P [1 or
// none, L, H·D] transposed, [B, H, S, L], read at column clamp(sign·rel
// + L/2, 0, L − 1) for row i and column j: [B, H, S, S]. The index is
// made from the buckets by mul, add, maximum and minimum nodes, the read
// by a batched matmul with its one-hot. nil where the shapes do not fit.
func (s *synth) bucketGathered(x, table, rel *val, d int, sign float64) *val {
	b, n, width := x.shape[0], x.shape[1], x.shape[2]
	h := width / d
	tb := table
	if len(tb.shape) == 3 {
		if tb.shape[0] != 1 {
			return nil
		}
		tb = s.reshape(tb, tb.shape[1:])
	}
	if tb == nil || len(tb.shape) != 2 || tb.shape[1] != width || tb.shape[0]%2 != 0 {
		return nil
	}
	l := tb.shape[0]
	rb := rel.shape[0]
	if rel.numel() != rb*n*n || (rb != 1 && rb != b) {
		return nil
	}
	// per head: x [H, B·S, D] times the table [H, D, L]
	xh := s.reshape(x, []int{b, n, h, d})
	xh = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1, 3}}, args: []*val{xh}, out: x.format, label: "rows per head"})
	xh = s.reshape(xh, []int{h, b * n, d})
	ph := s.reshape(tb, []int{l, h, d})
	ph = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 2, 0}}, args: []*val{ph}, out: tb.format, label: "table per head, transposed"})
	if xh == nil || ph == nil {
		return nil
	}
	raw := s.derive(&expr{op: program.OpMatMul, args: []*val{xh, ph}, out: x.format, label: "rows times the buckets' rows"})
	// [H, B·S, L] → [B·S, H, L]
	raw = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{raw}, out: x.format, label: "a batch of rows"})
	// the indices: clamp(sign·rel + L/2, 0, L − 1)
	idx := s.reshape(rel, []int{rb * n * n})
	if sign < 0 {
		idx = s.derive(&expr{op: program.OpMul, args: []*val{idx, s.constant(-1)}, out: f32, label: "buckets negated"})
	}
	idx = s.derive(&expr{op: program.OpAdd, args: []*val{idx, s.constant(float64(l / 2))}, out: f32, label: "buckets plus the span"})
	idx = s.derive(&expr{op: program.OpMaximum, args: []*val{idx, s.constant(0)}, out: f32, label: "clamped below"})
	idx = s.derive(&expr{op: program.OpMinimum, args: []*val{idx, s.constant(float64(l - 1))}, out: f32, label: "clamped above"})
	if idx == nil {
		return nil
	}
	idx.intType = true
	oh := s.derive(&expr{op: program.OpGather, args: []*val{s.identity(l), idx}, out: f32, label: "one-hot of the bucket indices"})
	// [rb·S, S, L] → [rb·S, L, S]
	oh = s.reshape(oh, []int{rb * n, n, l})
	oh = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{oh}, out: f32, label: "one-hot per row, transposed"})
	if oh == nil {
		return nil
	}
	if rb != b {
		oh = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: b, Axis: 0}, args: []*val{s.reshape(oh, []int{1, n, l, n})}, out: f32, label: "one-hot for every batch entry"})
		oh = s.reshape(oh, []int{b * n, l, n})
		if oh == nil {
			return nil
		}
	}
	g := s.derive(&expr{op: program.OpMatMul, args: []*val{raw, oh}, out: x.format, label: "rows at the bucket indices"})
	g = s.reshape(g, []int{b, n, h, n})
	if g == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{g}, out: x.format, label: "heads first"})
}

// bucketTables are the scope's values with an even number of rows of
// width numbers ([1, L, width] or [L, width], at most four, the most
// recent first: projections of a table of relative embeddings) and its
// integer values of buckets per query and key ([1 or b, n, n] or [1 or b,
// 1, n, n]; at most two).
func bucketTables(sc *scope, b, n, width int) ([]*val, []*val) {
	var tables, rels []*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || v.param || slices.Contains(tables, v) || slices.Contains(rels, v) {
			continue
		}
		k := len(v.shape)
		if v.integral() {
			if k >= 3 && v.shape[k-1] == n && v.shape[k-2] == n && (v.shape[0] == 1 || v.shape[0] == b) && v.numel() == v.shape[0]*n*n && len(rels) < 2 {
				rels = append(rels, v)
			}
			continue
		}
		if (k == 3 && v.shape[0] == 1 || k == 2) && v.shape[k-2]%2 == 0 && v.shape[k-2] >= 2 && v.shape[k-1] == width && v.shape[k-2] != n && len(tables) < 4 {
			tables = append(tables, v)
		}
	}
	return tables, rels
}
