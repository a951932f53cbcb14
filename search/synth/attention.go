package synth

import (
	"fmt"
	"math"
	"slices"

	"zflow/exec"
	"zflow/exec/program"
	"zflow/precision"
	"zflow/semantics"
)

// attnChoice is one assignment of the attention search.
type attnChoice struct {
	q, k, v   *val
	headDim   int
	rope      exec.RopeLayout // 0: none
	cos, sin  *val
	params    exec.AttentionParams
	label     string
	score     float64
	result    *val
	qNorm     *leafFit // the fit of the value q was read from (a q norm)
	rows      int      // the first row of the target in the attention's rows (-1: all)
	bias      *val     // an additive score bias the scope holds (a mask, a position bias), or nil
	ropeAfter bool
}

// attention explains target [B, S, H·D] as scaled dot-product attention
// over values the scope made (its children's results, and the pieces of a
// fused projection), each of q and k optionally rotated by RoPE tables
// the scope holds: staged, first the operands, head width, RoPE layout
// and causality, then the score scale.
func (s *synth) attention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	width := t.shape[2]
	pool, fused := s.operands(sc, t)
	triples := fused
	for _, q := range pool {
		for _, k := range pool {
			for _, v := range pool {
				if q != k && q != v && k != v && slices.Equal(v.shape, k.shape) {
					triples = append(triples, [3]*val{q, k, v})
				}
			}
		}
	}
	if len(triples) == 0 {
		return nil
	}
	tables := s.ropeTables(sc)
	var headDims []int
	for _, tb := range tables {
		headDims = append(headDims, tb[0].shape[len(tb[0].shape)-1])
	}
	for d := 8; d <= 256 && d <= width; d *= 2 {
		if width%d == 0 && !slices.Contains(headDims, d) {
			headDims = append(headDims, d)
		}
	}
	var all []attnChoice
	var evidence []semantics.Candidate
	try := func(ch attnChoice) {
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, nil}, out: t.format, label: ch.label}
		if ch.q.shape[1] == t.shape[1] {
			v, score := s.ev.score(e, t)
			evidence = append(evidence, semantics.Candidate{Value: ch.label, Score: finite(score)})
			if v != nil {
				ch.score, ch.result = score, v
				all = append(all, ch)
			}
			return
		}
		// one stream's rows of attention over a joined sequence: the
		// first or the last rows
		full, err := s.ev.run(e)
		if err != nil {
			return
		}
		for _, start := range []int{0, ch.q.shape[1] - t.shape[1]} {
			sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: start, End: start + t.shape[1]}, args: []*val{full}, out: full.format, label: "stream rows"})
			if sl == nil {
				continue
			}
			score := relRMS(sl.data, t.data)
			evidence = append(evidence, semantics.Candidate{Value: ch.label, Score: finite(score)})
			c := ch
			c.score, c.result, c.rows = score, sl, start
			all = append(all, c)
		}
	}
	for _, tr := range triples {
		q, k, v := tr[0], tr[1], tr[2]
		if q.shape[2] != width || q.shape[1] < t.shape[1] {
			continue
		}
		{
			{
				for _, d := range headDims {
					if width%d != 0 || k.shape[2]%d != 0 || (width/d)%(k.shape[2]/d) != 0 {
						continue
					}
					p := exec.AttentionParams{Heads: width / d, KVHeads: k.shape[2] / d}
					for _, causal := range []bool{false, true} {
						pp := p
						if causal {
							pp.Mask = exec.MaskCausal
						}
						base := fmt.Sprintf("heads=%d kv=%d causal=%v", pp.Heads, pp.KVHeads, causal)
						try(attnChoice{q: q, k: k, v: v, headDim: d, params: pp, label: base + " rope=none"})
						for _, tb := range tables {
							if tb[0].shape[len(tb[0].shape)-1] > d {
								continue
							}
							for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
								for _, rows := range ropeRows(tb, q, k) {
									rq, rk := s.rotateRows(q, tb, layout, pp.Heads, d, rows), s.rotateRows(k, tb, layout, pp.KVHeads, d, rows)
									if rq == nil || rk == nil {
										continue
									}
									try(attnChoice{q: rq, k: rk, v: v, headDim: d, rope: layout, cos: tb[0], sin: tb[1], params: pp,
										label: base + " rope=" + layout.String()})
								}
							}
						}
					}
				}
			}
		}
	}
	if len(tables) == 0 && !anyWithin(all, tolerance(t.format)) {
		s.inlineRope(t, sc, all, try) // try collects into all
	}
	if len(all) == 0 {
		return nil
	}
	// The operands, head width and RoPE first; what shapes the scores
	// (scale, window, ALiBi, cap) by coordinate descent on the three best.
	slices.SortStableFunc(all, func(a, b attnChoice) int { return cmpFloat(a.score, b.score) })
	var best *attnChoice
	for i := range min(3, len(all)) {
		ch := all[i]
		if ch.score > tolerance(t.format) {
			s.refine(&ch, t, biases(sc, ch.q, ch.k))
		}
		if best == nil || ch.score < best.score {
			c := ch
			best = &c
		}
		if best.score <= tolerance(t.format) {
			break
		}
	}
	if best.score > tolerance(t.format) {
		return nil
	}
	evidence = append(evidence, semantics.Candidate{Value: best.label, Score: finite(best.score)})
	if best.cos != nil && best.cos.fit != nil && best.cos.fit.kind == "rope_table" {
		s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: t.origin, fit: best.cos.fit})
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: *best, scope: sc.module, boundary: t.origin, candidates: evidence})
	return best.result
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// refine improves a choice by what shapes the scores: for each discrete
// variant (ALiBi or not; a sliding window or not, on causal choices) the
// scale and the logit cap are fitted by coordinate descent, and the best
// variant is kept when it lowers the error.
func (s *synth) refine(ch *attnChoice, t *val, bias []*val) {
	var curBias *val
	eval := func(p exec.AttentionParams) (float64, *val) {
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{ch.q, ch.k, ch.v, nil, curBias}, out: t.format}
		if ch.q.shape[1] == t.shape[1] {
			v, sc := s.ev.score(e, t)
			return sc, v
		}
		full, err := s.ev.run(e)
		if err != nil {
			return math.Inf(1), nil
		}
		v := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: ch.rows, End: ch.rows + t.shape[1]}, args: []*val{full}, out: full.format, label: "stream rows"})
		if v == nil {
			return math.Inf(1), nil
		}
		return relRMS(v.data, t.data), v
	}
	score := func(p exec.AttentionParams) float64 { sc, _ := eval(p); return sc }
	window := func(p exec.AttentionParams) exec.AttentionParams {
		best, bestSc := p, score(p)
		for w := 1; w < ch.k.shape[1]; w++ {
			q := p
			q.Window = w
			if sc := score(q); sc < 0.9*bestSc {
				best, bestSc = q, sc
			}
		}
		return best
	}
	continuous := func(p exec.AttentionParams) exec.AttentionParams {
		cur := score(p)
		for range 3 {
			changed := false
			for _, k := range []struct {
				set    func(*exec.AttentionParams, float32)
				lo, hi float64
			}{
				{func(q *exec.AttentionParams, x float32) { q.Scale = x }, 1e-3, 4},
				{func(q *exec.AttentionParams, x float32) { q.Softcap = x }, 0.5, 500},
			} {
				set := k.set
				try := func(x float64) float64 { q := p; set(&q, float32(x)); return score(q) }
				if x := s.searchParam(try, k.lo, k.hi); x > 0 {
					q := p
					set(&q, float32(x))
					if sc := score(q); sc < 0.99*cur {
						p, cur, changed = q, sc, true
					}
				}
			}
			if !changed {
				break
			}
		}
		return p
	}
	best, bestSc := ch.params, ch.score
	var bestBias *val
	for _, b := range append([]*val{nil}, bias...) {
		curBias = b
		for _, alibi := range []bool{false, true} {
			for _, win := range []bool{false, true} {
				if win && ch.params.Mask != exec.MaskCausal {
					continue
				}
				p := ch.params
				p.ALiBi = alibi
				if win {
					p = window(p)
					if p.Window == 0 {
						continue
					}
				}
				p = continuous(p)
				if win {
					p = window(p)
				}
				if sc := score(p); sc < bestSc {
					best, bestSc, bestBias = p, sc, b
				}
			}
		}
		if bestSc <= tolerance(t.format) {
			break
		}
	}
	curBias = bestBias
	if bestSc < ch.score {
		sc, v := eval(best)
		ch.params, ch.score, ch.result, ch.bias = best, sc, v, bestBias
		ch.label += fmt.Sprintf(" window=%d alibi=%v softcap=%g scale=%g bias=%v", best.Window, best.ALiBi, best.Softcap, best.Scale, bestBias != nil)
	}
	s.simplify(ch, eval, tolerance(t.format))
}

// biases are the scope's values attention may add to its scores: float
// tensors whose last axis is the keys and whose rows are the queries or
// one (an additive mask, a position bias), read as [B or B·H, .., Sq|1, Sk].
func biases(sc *scope, q, k *val) []*val {
	var out []*val
	sq, sk := q.shape[1], k.shape[1]
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || n < 3 || v.shape[n-1] != sk || (v.shape[n-2] != sq && v.shape[n-2] != 1) || v.integral() && allOnes(v) {
			continue
		}
		out = append(out, v)
		if len(out) == 4 {
			break
		}
	}
	return out
}

// searchParam minimises f over [lo, hi] by golden section on a log scale
// and returns the simplest number near the minimum that does as well.
func (s *synth) searchParam(f func(float64) float64, lo, hi float64) float64 {
	a0, b0 := math.Log(lo), math.Log(hi)
	g := (math.Sqrt(5) - 1) / 2
	a, b := b0-g*(b0-a0), a0+g*(b0-a0)
	fa, fb := f(math.Exp(a)), f(math.Exp(b))
	for range 60 {
		if fa < fb {
			b0, b, fb = b, a, fa
			a = b0 - g*(b0-a0)
			fa = f(math.Exp(a))
		} else {
			a0, a, fa = a, b, fb
			b = a0 + g*(b0-a0)
			fb = f(math.Exp(b))
		}
	}
	x := math.Exp((a0 + b0) / 2)
	at := f(x)
	return snap(x, func(y float64) bool { return f(y) <= 1.01*at+1e-12 })
}

// simplify replaces the fitted scale and cap by the simplest nearby
// numbers (jointly: the two trade off) that keep the error.
func (s *synth) simplify(ch *attnChoice, eval func(exec.AttentionParams) (float64, *val), tol float64) {
	// how far the fit may be from the simple number: the fitted values
	// scatter with the format's rounding
	within := 2e-3
	if tol > 1e-3 {
		within = 1e-2
	}
	near := func(x float32) []float64 {
		if x == 0 {
			return []float64{0}
		}
		var out []float64
		for _, c := range snapCandidates(float64(x)) {
			if math.Abs(c-float64(x)) <= within*math.Abs(float64(x)) {
				out = append(out, c)
			}
		}
		return append(out, float64(x))
	}
	limit := math.Max(1.05*ch.score, tol/2)
	for _, sc := range near(ch.params.Scale) {
		for _, cap := range near(ch.params.Softcap) {
			p := ch.params
			p.Scale, p.Softcap = float32(sc), float32(cap)
			if p == ch.params {
				return
			}
			if e, v := eval(p); v != nil && e <= limit {
				ch.params, ch.score, ch.result = p, e, v
				ch.label += fmt.Sprintf(" simplified scale=%g softcap=%g", sc, cap)
				return
			}
		}
	}
}

// ropeRows are where tables of fewer rows than q and k may apply: all
// rows ([0, 0]), or the first or the last rows of the sequence (one
// stream's rows of a joined sequence: [start, end]).
func ropeRows(tb [2]*val, q, k *val) [][2]int {
	r := tb[0].numel() / tb[0].shape[len(tb[0].shape)-1]
	n := q.shape[1]
	switch {
	case r == n && k.shape[1] == n:
		return [][2]int{{0, 0}}
	case r < n && k.shape[1] == n:
		return [][2]int{{0, r}, {n - r, n}}
	}
	return nil
}

// rotateRows applies RoPE to x, or only to rows [start, end) of it.
func (s *synth) rotateRows(x *val, tb [2]*val, layout exec.RopeLayout, heads, d int, rows [2]int) *val {
	if rows[1] == 0 {
		return s.rotate(x, tb, layout, heads, d)
	}
	cut := func(a, b int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: a, End: b}, args: []*val{x}, out: x.format})
	}
	var parts []*val
	if rows[0] > 0 {
		parts = append(parts, cut(0, rows[0]))
	}
	parts = append(parts, s.rotate(cut(rows[0], rows[1]), tb, layout, heads, d))
	if rows[1] < x.shape[1] {
		parts = append(parts, cut(rows[1], x.shape[1]))
	}
	for _, p := range parts {
		if p == nil {
			return nil
		}
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: parts, out: x.format, label: "rows rotated"})
}

// rotate applies RoPE to x [B, S, H·d] with tables tb (cos, sin).
func (s *synth) rotate(x *val, tb [2]*val, layout exec.RopeLayout, heads, d int) *val {
	r := tb[0].shape[len(tb[0].shape)-1]
	rows := tb[0].numel() / r
	if rows != x.shape[1] || r%2 != 0 {
		return nil
	}
	p := exec.RopeParams{Heads: heads, Layout: layout, RotaryDim: r}
	if r == d {
		p.RotaryDim = 0
	}
	cos, sin := s.reshape(tb[0], []int{rows, r}), s.reshape(tb[1], []int{rows, r})
	return s.derive(&expr{op: program.OpRope, attrs: program.Attrs{Rope: p}, args: []*val{x, cos, sin}, out: x.format, label: layout.String()})
}

// operands are the values attention may read: the scope's own rank-3
// results whose rows fit, and its per-head results made rank 3; fused
// are the (q, k, v) triples cut from one fused projection, in that order
// ([Q|K|V] blocks, or per head [q k v]).
func (s *synth) operands(sc *scope, t *val) (pool []*val, fused [][3]*val) {
	pool, fused = s.allOperands(sc, t)
	if len(pool) > 9 {
		pool = pool[:9]
	}
	return pool, fused
}

// allOperands is operands without the bound on the pool.
func (s *synth) allOperands(sc *scope, t *val) (pool []*val, fused [][3]*val) {
	add := func(v *val) {
		if v != nil && len(v.shape) == 3 && v.shape[0] == t.shape[0] && !v.opaque {
			pool = append(pool, v)
		}
	}
	wq := t.shape[2]
	for _, v := range recentFirst(sc.vals) {
		if !sc.own[v] || v.opaque {
			continue
		}
		switch len(v.shape) {
		case 3:
			add(v)
			w := v.shape[2]
			if w > wq && (w-wq)%2 == 0 {
				kv := (w - wq) / 2
				var tr [3]*val
				for i, cut := range [][2]int{{0, wq}, {wq, wq + kv}, {wq + kv, w}} {
					tr[i] = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: cut[0], End: cut[1]}, args: []*val{v}, out: v.format})
				}
				if tr[0] != nil && tr[1] != nil && tr[2] != nil {
					fused = append(fused, tr)
				}
			}
			if w == 3*wq {
				for d := 8; d <= 256 && d <= wq; d *= 2 {
					if wq%d != 0 {
						continue
					}
					h := wq / d
					g := s.reshape(v, []int{v.shape[0], v.shape[1], h, 3, d})
					var tr [3]*val
					for i := range 3 {
						c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: i, End: i + 1}, args: []*val{g}, out: v.format})
						tr[i] = s.reshape(c, []int{v.shape[0], v.shape[1], h * d})
					}
					if tr[0] != nil && tr[1] != nil && tr[2] != nil {
						fused = append(fused, tr)
					}
				}
			}
		case 4:
			// [B, H, S, D] → [B, S, H·D]
			pv := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{v}, out: v.format})
			if pv != nil {
				add(s.reshape(pv, []int{v.shape[0], v.shape[2], v.shape[1] * v.shape[3]}))
				add(s.reshape(v, []int{v.shape[0], v.shape[1], v.shape[2] * v.shape[3]}))
			}
		}
	}
	return pool, fused
}

// ropeTables are the (cos, sin) pairs among the scope's values: two
// consecutive values of one shape with cos² + sin² = 1.
func (s *synth) ropeTables(sc *scope) [][2]*val {
	var out [][2]*val
	for _, v := range sc.vals {
		if c, sn := s.complexTable(v); c != nil {
			out = append(out, [2]*val{c, sn})
		}
	}
	for i := 0; i+1 < len(sc.vals); i++ {
		c, sn := sc.vals[i], sc.vals[i+1]
		if c.opaque && sn.opaque {
			// a table the program cannot make is still usable: taken as a constant
		}
		if slices.Equal(c.shape, sn.shape) && len(c.shape) >= 2 && unitCircle(c, sn) && !allOnes(c) {
			out = append(out, [2]*val{c, sn})
		}
	}
	return out
}

func allOnes(v *val) bool {
	for _, x := range v.data {
		if x != 1 {
			return false
		}
	}
	return true
}

// complexTable reads a complex RoPE table [.., D/2, 2] (unit (re, im)
// pairs, multiplied into adjacent pairs of channels) as the cos and sin
// tables [.., D] of an interleaved rotation: each of re and im repeated
// for its pair. nil when v is not one.
func (s *synth) complexTable(v *val) (*val, *val) {
	n := len(v.shape)
	if v.opaque || n < 2 || v.shape[n-1] != 2 || v.numel() < 4 {
		return nil, nil
	}
	for i := 0; i+1 < len(v.data); i += 2 {
		r := float64(v.data[i])*float64(v.data[i]) + float64(v.data[i+1])*float64(v.data[i+1])
		if math.Abs(r-1) > 0.05 {
			return nil, nil
		}
	}
	half := v.shape[n-2]
	lead := slices.Clone(v.shape[:n-2])
	part := func(i int) *val {
		c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: i, End: i + 1}, args: []*val{v}, out: v.format})
		if c == nil {
			return nil
		}
		rep := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: n - 1}, args: []*val{c, c}, out: v.format, label: "pairs"})
		return s.reshape(rep, append(lead, 2*half))
	}
	c, sn := part(0), part(1)
	if c == nil || sn == nil {
		return nil, nil
	}
	return c, sn
}

func anyWithin(cs []attnChoice, tol float64) bool {
	for _, c := range cs {
		if c.score <= tol {
			return true
		}
	}
	return false
}

// inlineRope tries RoPE tables the scope does not hold but can make: from
// integer positions of the scope (a position_ids argument, positions
// 0…n−1), for the three best choices without RoPE, every head width,
// rotary width (all of a head, half, a quarter), layout and common θ
// (rotary tables computed inside the attention from a buffer). try
// scores and collects each.
func (s *synth) inlineRope(t *val, sc *scope, all []attnChoice, try func(attnChoice)) {
	rows := t.shape[1]
	var pos *val
	for _, v := range recentFirst(sc.vals) {
		if !v.opaque && len(v.shape) <= 2 && v.numel() == rows && v.integral() {
			pos = v
			break
		}
	}
	if pos == nil || len(all) == 0 {
		return
	}
	ids := s.reshape(pos, []int{rows, 1})
	if ids == nil {
		return
	}
	base := slices.Clone(all)
	slices.SortStableFunc(base, func(a, b attnChoice) int { return cmpFloat(a.score, b.score) })
	if len(base) > 3 {
		base = base[:3]
	}
	for _, ch := range base {
		d := ch.headDim
		for _, r := range []int{d, d / 2, d / 4} {
			if r < 2 || r%2 != 0 {
				continue
			}
			for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
				for _, theta := range []float64{10000, 1e6, 500000} {
					p := exec.RopeTableParams{Theta: theta, AxesDims: []int{r}, Layout: layout, FreqFormat: precision.F32, AngleFormat: precision.F32}
					e := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{ids}, out: ch.q.format, label: "inline rope"}
					cosT, err1 := s.ev.run(e)
					sinT, err2 := s.ev.run(pickOf(e, 1))
					if err1 != nil || err2 != nil {
						continue
					}
					fit := &leafFit{kind: "rope_table", rope: p, candidates: []semantics.Candidate{{Value: fmt.Sprintf("%s theta=%g rotary=%d", layout, theta, r), Score: 0}}}
					cosT.fit, sinT.fit = fit, fit
					tb := [2]*val{cosT, sinT}
					rq, rk := s.rotate(ch.q, tb, layout, ch.params.Heads, d), s.rotate(ch.k, tb, layout, ch.params.KVHeads, d)
					if rq == nil || rk == nil {
						continue
					}
					c := ch
					c.q, c.k, c.rope, c.cos, c.sin = rq, rk, layout, cosT, sinT
					c.label = fmt.Sprintf("heads=%d kv=%d causal=%v rope=%s", ch.params.Heads, ch.params.KVHeads, ch.params.Mask == exec.MaskCausal, layout)
					try(c)
				}
			}
		}
	}
}
