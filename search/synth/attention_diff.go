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

// diffAttention explains t [B, S, G, 2D] (or [B, S, G·2D]) as differential
// attention: one softmax map per q head h < H = 2G over its (GQA-repeated)
// key, every head reading the values re-laid as [v_j, v_{j+G}] (j = h mod
// G, width 2D), and the maps of the first G heads minus λ times those of
// the last G. The attention op's values have q's head width, so each half
// of the re-laid values runs as its own attention over the same maps and
// the halves are joined (the same sums, column by column). λ is one number
// per call, explained by lambdaOf.
func (s *synth) diffAttention(t *val, sc *scope) *val {
	if t.reshapedFrom || (len(t.shape) != 3 && len(t.shape) != 4) {
		return nil
	}
	return s.diffAttentionAt(t, sc, t.keys)
}

// diffAttentionAt is diffAttention on t [B, S, G, 2D] or [B, S, G·2D]
// captured at keys.
func (s *synth) diffAttentionAt(t *val, sc *scope, keys []string) *val {
	b, n := t.shape[0], t.shape[1]
	width := t.numel() / (b * n)
	var dims []int // D: half an output head's width
	if len(t.shape) == 4 {
		if t.shape[3]%2 == 0 {
			dims = []int{t.shape[3] / 2}
		}
	} else {
		for d := minHeadDim; 2*d <= width && d <= maxHeadDim; d *= 2 {
			if width%(2*d) == 0 {
				dims = append(dims, d)
			}
		}
	}
	if len(dims) == 0 {
		return nil
	}
	merged := &val{shape: []int{b, n, width}, format: t.format}
	pool, _ := s.operands(sc, merged)
	var qs, kvs []*val
	for _, v := range pool {
		if v.shape[1] != n {
			continue
		}
		if v.shape[2] == width {
			qs = append(qs, v)
		}
		if v.shape[2] <= width {
			kvs = append(kvs, v)
		}
	}
	if len(qs) == 0 || len(kvs) < 2 {
		return nil
	}
	tables := s.ropeTables(sc)
	type fit struct {
		ch     attnChoice
		a1, a2 *val
		lambda float64
		score  float64
	}
	var best *fit
	var evidence []semantics.Candidate
	for _, d := range dims {
		heads := width / d
		for _, q := range qs {
			for _, k := range kvs {
				for _, v := range kvs {
					if k == q || v == q || k == v || !slices.Equal(k.shape, v.shape) || k.shape[2]%d != 0 || heads%(k.shape[2]/d) != 0 {
						continue
					}
					kv := k.shape[2] / d
					type rot struct {
						q, k     *val
						layout   exec.RopeLayout
						cos, sin *val
					}
					rots := []rot{{q: q, k: k}}
					for _, tb := range tables {
						if tb[0].shape[len(tb[0].shape)-1] > d {
							continue
						}
						for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
							rq, rk := s.rotate(q, tb, layout, heads, d), s.rotate(k, tb, layout, kv, d)
							if rq != nil && rk != nil {
								rots = append(rots, rot{rq, rk, layout, tb[0], tb[1]})
							}
						}
					}
					for _, r := range rots {
						for _, mask := range []exec.MaskKind{exec.MaskCausal, exec.MaskNone} {
							p := exec.AttentionParams{Heads: heads, KVHeads: heads, Mask: mask}
							a1, a2 := s.diffMaps(r.q, r.k, v, t, heads, kv, d, p)
							if a1 == nil {
								continue
							}
							lam, score := fitDifference(a1, a2, t)
							label := fmt.Sprintf("differential heads=%d kv=%d causal=%v rope=%s", heads, kv, mask == exec.MaskCausal, ropeName(r.layout))
							evidence = append(evidence, semantics.Candidate{Value: label, Score: finite(score)})
							if best == nil || score < best.score {
								best = &fit{ch: attnChoice{q: r.q, k: r.k, v: v, headDim: d, rope: r.layout, cos: r.cos, sin: r.sin,
									params: exec.AttentionParams{Heads: heads, KVHeads: kv, Mask: mask}, label: label}, a1: a1, a2: a2, lambda: lam, score: score}
							}
						}
					}
				}
			}
		}
	}
	if best == nil || best.score > tolerance(t.format) {
		return nil
	}
	lam := s.lambdaOf(best.a1, best.a2, t, sc, keys, best.lambda)
	if lam == nil {
		return nil
	}
	scaled := s.derive(&expr{op: program.OpMul, args: []*val{best.a2, lam}, out: t.format, label: "λ · second maps"})
	w, _ := s.best(t, []*expr{{op: program.OpSub, args: []*val{best.a1, scaled}, out: t.format, label: "first maps − λ · second maps"}})
	if w == nil {
		return nil
	}
	evidence = append(evidence, semantics.Candidate{Value: best.ch.label, Score: finite(best.score)})
	w.fit = &leafFit{kind: "attention", candidates: evidence}
	ch := best.ch
	ch.score, ch.result = relRMS(t.format, w.data, t.data), w
	if ch.cos != nil && ch.cos.fit != nil && ch.cos.fit.kind == "rope_table" {
		s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: t.origin, fit: ch.cos.fit})
	}
	s.attn = append(s.attn, attnRecord{choice: ch, scope: sc.module, boundary: t.origin, candidates: evidence})
	return w
}

// diffMaps runs the two halves of differential attention: q [B, S, H·D]
// over k and v [B, S, KV·D], the values repeated to H heads and re-laid as
// [v_j, v_{j+H/2}] per head; it returns the first H/2 heads' results and
// the last H/2's, each laid out as t is ([B, S, H/2, 2D] or merged).
func (s *synth) diffMaps(q, k, v, t *val, heads, kv, d int, p exec.AttentionParams) (*val, *val) {
	b, n := q.shape[0], q.shape[1]
	g := heads / 2
	rep := func(x *val) *val { // [B, S, KV·D] → [B, S, H, D], kv head i for heads i·H/KV …
		if kv == heads {
			return s.reshape(x, []int{b, n, heads, d})
		}
		r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: heads / kv, Axis: 3}, args: []*val{s.reshape(x, []int{b, n, kv, 1, d})}, out: x.format, label: "kv heads repeated"})
		return s.reshape(r, []int{b, n, heads, d})
	}
	cut := func(x *val, axis, from, to int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: axis, Start: from, End: to}, args: []*val{x}, out: x.format})
	}
	kr, vr := rep(k), rep(v)
	if kr == nil || vr == nil {
		return nil, nil
	}
	kr = s.reshape(kr, []int{b, n, heads * d})
	var outs [2]*val
	for i, half := range []*val{cut(vr, 2, 0, g), cut(vr, 2, g, heads)} {
		// head h reads half[h mod G]: the half repeated twice along the heads
		vh := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: 2, Axis: 2}, args: []*val{half}, out: v.format, label: "values re-laid per head pair"})
		o := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, kr, s.reshape(vh, []int{b, n, heads * d}), nil, nil, nil}, out: t.format, label: "differential maps"})
		outs[i] = s.reshape(o, []int{b, n, heads, d})
	}
	if outs[0] == nil || outs[1] == nil {
		return nil, nil
	}
	both := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 3}, args: []*val{outs[0], outs[1]}, out: t.format, label: "[v_j, v_{j+H/2}]"})
	a1, a2 := cut(both, 2, 0, g), cut(both, 2, g, heads)
	return s.reshape(a1, t.shape), s.reshape(a2, t.shape)
}

// fitDifference fits t ≈ a1 − λ·a2 by least squares: λ and the fit's
// rel-RMS.
func fitDifference(a1, a2, t *val) (float64, float64) {
	var num, den float64
	for i := range t.data {
		x := float64(a2.data[i])
		num += (float64(a1.data[i]) - float64(t.data[i])) * x
		den += x * x
	}
	if den == 0 {
		return 0, math.Inf(1)
	}
	lam := num / den
	fit := make([]float32, len(t.data))
	for i := range fit {
		fit[i] = float32(float64(a1.data[i]) - lam*float64(a2.data[i]))
	}
	return lam, relRMS(t.format, fit, t.data)
}

// laterScales are the scalars c ≠ ±1 with w = c·u for two boundaries u, w
// of the scope's children after the target (captured at keys), each of t's size (a scale
// the scope applies later to what it makes of t).
func (s *synth) laterScales(t *val, sc *scope, keys []string) []float64 {
	var later []*val
	seen := false
	for _, ch := range s.children(sc.call) {
		for _, p := range ch.Tensors {
			if slices.Contains(keys, p.Key) {
				seen = true
				continue
			}
			if !seen {
				continue
			}
			if v, err := s.capture(p.Key); err == nil && v.numel() == t.numel() {
				later = append(later, v)
			}
		}
	}
	var out []float64
	for i, u := range later {
		for _, w := range later[i+1:] {
			if c, ok := fitScalar(u, w); ok && math.Abs(math.Abs(c)-1) > 1e-6 && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// lambdaOf explains the λ of t ≈ a1 − λ·a2 (fitted as lam) from the
// scope's own vector parameters: λ = Σ ± exp(x·y) + c over a pairing of
// every vector of one width. Two tiers, each scored by how well its λ
// reproduces t: first c tied to a scale the scope applies later (c = 1 −
// that scale: no free number, so the pairing is decided by the values);
// then, where none of those fits, c fitted per pairing, which decides only
// where exactly one pairing fits (the exp terms dominate). Where neither
// decides, λ is the fitted number itself, a per-call constant, and the
// record says so.
func (s *synth) lambdaOf(a1, a2, t *val, sc *scope, keys []string, lam float64) *val {
	var vecs []*val
	for _, v := range sc.vals {
		if v.param && len(v.shape) == 1 && v.shape[0] > 1 {
			vecs = append(vecs, v)
		}
	}
	rec := lambdaRecord{scope: sc.module, boundary: t.origin, fitted: lam}
	score := func(l *val) float64 {
		m := s.derive(&expr{op: program.OpMul, args: []*val{a2, l}, out: t.format})
		d := s.derive(&expr{op: program.OpSub, args: []*val{a1, m}, out: t.format})
		if d == nil {
			return math.Inf(1)
		}
		return relRMS(t.format, d.data, t.data)
	}
	type cand struct {
		v     *val
		label string
		score float64
	}
	type terms struct {
		v     *val
		label string
	}
	var sums []terms
	if len(vecs) >= 2 && len(vecs)%2 == 0 && len(vecs) <= 6 && allSameShape(vecs) {
		for _, pr := range pairings(len(vecs)) {
			for signs := 0; signs < 1<<len(pr); signs += 2 { // the first term positive
				if v, label := s.expTerms(vecs, pr, signs, t.format); v != nil {
					sums = append(sums, terms{v, label})
				}
			}
		}
	}
	plus := func(x terms, c float64, note string) cand {
		l := s.derive(&expr{op: program.OpAdd, args: []*val{x.v, s.constant(c)}, out: t.format, label: "λ"})
		if l == nil {
			return cand{score: math.Inf(1)}
		}
		return cand{l, fmt.Sprintf("%s + %.6g (%s)", x.label, c, note), score(l)}
	}
	tol := tolerance(t.format)
	decide := func(cands []cand) *val {
		slices.SortStableFunc(cands, func(a, b cand) int { return cmpFloat(a.score, b.score) })
		for _, c := range cands {
			rec.candidates = append(rec.candidates, semantics.Candidate{Value: c.label, Score: finite(c.score)})
		}
		if len(cands) > 0 && cands[0].score <= tol && (len(cands) == 1 || cands[1].score >= decisiveMargin*cands[0].score) {
			rec.form, rec.vectors = cands[0].label, true
			return cands[0].v
		}
		return nil
	}
	var tied []cand
	for _, c := range s.laterScales(t, sc, keys) {
		for _, x := range sums {
			tied = append(tied, plus(x, 1-c, fmt.Sprintf("1 − %.6g, the scale applied after", c)))
		}
	}
	if v := decide(tied); v != nil {
		s.lambdas = append(s.lambdas, rec)
		return v
	}
	var free []cand
	for _, x := range sums {
		free = append(free, plus(x, lam-float64(x.v.data[0]), "fitted"))
	}
	if v := decide(free); v != nil {
		s.lambdas = append(s.lambdas, rec)
		return v
	}
	rec.candidates = nil
	k := s.constant(lam)
	rec.form = fmt.Sprintf("%.8g (fitted: the module's vectors do not decide it)", lam)
	rec.candidates = append(rec.candidates, semantics.Candidate{Value: rec.form, Score: finite(score(k))})
	s.lambdas = append(s.lambdas, rec)
	return k
}

// lambdaRecord is how one call's λ was explained.
type lambdaRecord struct {
	scope, boundary string
	fitted          float64
	form            string
	vectors         bool // form is computed from the vectors (else the fitted number)
	candidates      []semantics.Candidate
}

func allSameShape(vs []*val) bool {
	for _, v := range vs {
		if !slices.Equal(v.shape, vs[0].shape) {
			return false
		}
	}
	return true
}

// pairings lists the ways to split 0…n−1 (n even) into ordered pairs
// (i < j), the pairs in order of their first index.
func pairings(n int) [][][2]int {
	var out [][][2]int
	var rec func(left []int, acc [][2]int)
	rec = func(left []int, acc [][2]int) {
		if len(left) == 0 {
			out = append(out, slices.Clone(acc))
			return
		}
		for j := 1; j < len(left); j++ {
			rest := append(slices.Clone(left[1:j]), left[j+1:]...)
			rec(rest, append(acc, [2]int{left[0], left[j]}))
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	rec(all, nil)
	return out
}

// expTerms builds Σ ± exp(x·y) over the pairs (bit i of signs set: the
// i-th term subtracted) as a reference computes it in format f: the
// products rounded to f, summed in f32, each exp rounded to f, the terms
// added in f.
func (s *synth) expTerms(vecs []*val, pr [][2]int, signs int, f precision.Format) (*val, string) {
	dim := vecs[0].shape[0]
	ones := &val{shape: []int{1, dim}, data: make([]float32, dim), format: precision.F32, origin: vecs[0].origin + "/ones"}
	for i := range ones.data {
		ones.data[i] = 1
	}
	s.em.constant(ones, "ones: a sum written as a product with a row of ones")
	var acc *val
	label := ""
	for i, p := range pr {
		x, y := vecs[p[0]], vecs[p[1]]
		prod := s.derive(&expr{op: program.OpMul, args: []*val{x, y}, out: f, label: "x·y"})
		dot := s.derive(&expr{op: program.OpLinear, args: []*val{s.reshape(prod, []int{1, dim}), ones, nil}, out: precision.F32, label: "Σ x·y"})
		e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{s.reshape(dot, []int{1})}, out: f, label: "exp"})
		if e == nil {
			return nil, ""
		}
		term := fmt.Sprintf("exp(Σ %s·%s)", x.origin, y.origin)
		switch {
		case acc == nil:
			acc, label = e, term
		case signs&(1<<i) != 0:
			acc, label = s.derive(&expr{op: program.OpSub, args: []*val{acc, e}, out: f}), label+" − "+term
		default:
			acc, label = s.derive(&expr{op: program.OpAdd, args: []*val{acc, e}, out: f}), label+" + "+term
		}
		if acc == nil {
			return nil, ""
		}
	}
	return acc, label
}

// factor reads the record as attention_lambda: "vectors" with the
// pairing's margin over the next form, or "fitted".
func (r lambdaRecord) factor() semantics.Factor {
	f := semantics.Factor{Name: "attention_lambda", Scope: r.scope, Value: "fitted",
		Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "rel_rms"}}
	var forms []string
	for _, c := range r.candidates {
		forms = append(forms, fmt.Sprintf("%v: %.3g", c.Value, c.Score))
	}
	if !r.vectors {
		f.Candidates = []semantics.Candidate{{Value: "fitted", Score: r.candidates[len(r.candidates)-1].Score}}
		f.Evidence.Note = fmt.Sprintf("λ = %.8g fitted by least squares: the attention's vectors do not decide it (forms tried: %s)", r.fitted, strings.Join(forms, "; "))
		return f
	}
	f.Value = "vectors"
	win := r.candidates[0].Score
	f.Candidates = []semantics.Candidate{{Value: "vectors", Score: win}}
	margin := math.Inf(1)
	if len(r.candidates) > 1 && win > 0 {
		margin = r.candidates[1].Score / win
	}
	f.Margin, f.Decisive = semantics.Margin(margin), margin >= decisiveMargin
	f.Evidence.Note = fmt.Sprintf("λ = %s (fitted alone: %.8g); each pairing scored: %s", r.form, r.fitted, strings.Join(forms, "; "))
	return f
}
