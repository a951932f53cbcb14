package synth

import (
	"github.com/zflow/zflow/search/internal/simple"

	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// windowGrid is the widths below n that refine's window search tries
// first: every width up to 8, then steps of about ×1.25.
func windowGrid(n int) []int {
	var out []int
	for w := 1; w < n; w = max(w+1, w*5/4) {
		out = append(out, w)
	}
	return out
}

// refineVariants is how many of refine's variants (mask, bias, ALiBi,
// window), ranked by their coarse probe, are fitted by coordinate descent.
const refineVariants = 4

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
func (s *synth) refine(ch *attnChoice, t *val, bias, masks []*val) {
	var curBias, curMask *val
	// evalAt runs the choice with p under rounding points r (0: the
	// output rounded once, as the search scores every form)
	evalAt := func(p exec.AttentionParams, r exec.Round) (float64, *val) {
		if curMask != nil {
			p.Mask = exec.MaskExplicit
		}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{ch.q, ch.k, ch.v, curMask, curBias, ch.sinks}, out: t.format, round: r}
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
		return relRMS(t.format, v.data, t.data), v
	}
	eval := func(p exec.AttentionParams) (float64, *val) { return evalAt(p, 0) }
	// candidates are scored at a sample of a long target's rows, the
	// best on every row
	sm := sampleAttention(ch, t)
	score := func(p exec.AttentionParams) float64 {
		if sm != nil {
			return sm.score(s, ch, p, curMask, curBias, 0, t)
		}
		sc, _ := eval(p)
		return sc
	}
	// window: the error falls toward the true window and rises past it,
	// so a geometric grid of widths first, then every width between the
	// grid's neighbours of its best
	window := func(p exec.AttentionParams) exec.AttentionParams {
		best, bestSc := p, score(p)
		at := func(w int) {
			q := p
			q.Window = w
			if sc := score(q); sc < 0.9*bestSc {
				best, bestSc = q, sc
			}
		}
		n := ch.k.shape[1]
		grid := windowGrid(n)
		for _, w := range grid {
			at(w)
		}
		if i := slices.Index(grid, best.Window); i >= 0 {
			lo, hi := grid[max(i-1, 0)], grid[min(i+1, len(grid)-1)]
			for w := lo + 1; w < hi; w++ {
				if w != best.Window {
					at(w)
				}
			}
		}
		return best
	}
	// blocks: block-local attention, every block size dividing the
	// queries (the keys past the queries' count seen by every query)
	blocks := func(p exec.AttentionParams) exec.AttentionParams {
		best, bestSc := p, score(p)
		n := ch.q.shape[1]
		for b := 1; b < n; b++ {
			if n%b == 0 {
				q := p
				q.Block = b
				if sc := score(q); sc < 0.9*bestSc {
					best, bestSc = q, sc
				}
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
	// every variant is probed on a coarse grid of scales and caps first;
	// only the best few are fitted by coordinate descent (fitting all of
	// them cost ~16k evaluations per choice, nearly all on variants that
	// no scale or cap brings near the target)
	type variant struct {
		p          exec.AttentionParams
		bias, mask *val
		win, block bool
		probe      float64
	}
	probe := func(p exec.AttentionParams) float64 {
		base := p.Scale
		if base == 0 {
			base = float32(1 / math.Sqrt(float64(ch.headDim)))
		}
		best := score(p)
		for k := -4; k <= 4; k++ {
			if k != 0 {
				q := p
				q.Scale = base * float32(math.Pow(2, float64(k)))
				best = min(best, score(q))
			}
		}
		if p.Softcap == 0 {
			for _, c := range []float32{1, 3, 10, 30, 100, 300} {
				q := p
				q.Softcap = c
				best = min(best, score(q))
			}
		}
		return best
	}
	var vars []variant
	for _, pair := range maskedBiases(bias, masks, ch.params.Mask) {
		curBias, curMask = pair[0], pair[1]
		kinds := []exec.MaskKind{ch.params.Mask}
		if curBias != nil && ch.params.Mask == exec.MaskCausal {
			// a bias may carry the whole mask (causal over some rows
			// only): without the first stage's causal mask too
			kinds = append(kinds, exec.MaskNone)
		}
		// a band (a window around each query on a bidirectional
		// mask) is tried only where every other variant fails
		for _, band := range []bool{false, true} {
			if band && (ch.score <= tolerance(t.format) || ch.params.Mask != exec.MaskNone) {
				break
			}
			for _, kind := range kinds {
				for _, alibi := range []float32{-1, 0, float32(1 / math.Sqrt(float64(ch.headDim)))} {
					for _, win := range []bool{false, true} {
						if win && kind != exec.MaskCausal && !band || band && (!win || kind != exec.MaskNone) {
							continue
						}
						// -1: no ALiBi; 0: slopes as they are; else slopes times
						// 1/√d (ALiBi added before the scale)
						p := ch.params
						p.Mask = kind
						p.ALiBi, p.ALiBiScale = alibi >= 0, max(alibi, 0)
						if win {
							p = window(p)
							if p.Window == 0 {
								continue
							}
						}
						vars = append(vars, variant{p: p, bias: curBias, mask: curMask, win: win, probe: probe(p)})
					}
				}
			}
		}
		// blocks (queries attending their own block of keys, after keys
		// every query sees) likewise only where every other variant
		// fails, and only with such keys: blocks of the queries' own
		// keys alone are attention within frames, which the forms that
		// reshape the blocks into a batch read (and every backend runs)
		if ch.score > tolerance(t.format) && ch.params.Mask == exec.MaskNone && curMask == nil && ch.k.shape[1] > ch.q.shape[1] {
			if p := blocks(ch.params); p.Block > 0 {
				vars = append(vars, variant{p: p, bias: curBias, block: true, probe: probe(p)})
			}
		}
		// every bias is tried even after one fits: a fitted scale can
		// make the wrong form pass a narrow format's tolerance (exp(a·x)
		// at scale 0.255 where exp(a·softplus(x)) is exact at 1/√d)
	}
	slices.SortStableFunc(vars, func(a, b variant) int { return cmpFloat(a.probe, b.probe) })
	base := ch.score // the choice as it came, on the variants' measure
	if sm != nil {
		curBias, curMask = ch.bias, nil
		base = score(ch.params)
	}
	best, bestSc := ch.params, base
	var bestBias, bestMask *val
	for _, v := range vars[:min(refineVariants, len(vars))] {
		curBias, curMask = v.bias, v.mask
		p := continuous(v.p)
		if v.win {
			p = window(p)
		}
		if v.block {
			p = blocks(p)
		}
		if sc := score(p); sc < bestSc {
			best, bestSc, bestBias, bestMask = p, sc, curBias, curMask
		}
	}
	curBias, curMask = bestBias, bestMask
	if bestSc < base {
		sc, v := eval(best)
		if bestMask != nil {
			best.Mask = exec.MaskExplicit
		}
		if sc >= ch.score { // better on the sample only
			curBias, curMask = ch.bias, nil
			s.simplify(ch, evalAt, tolerance(t.format))
			return
		}
		ch.params, ch.score, ch.result, ch.bias = best, sc, v, bestBias
		ch.label += fmt.Sprintf(" window=%d block=%d alibi=%v softcap=%g scale=%g bias=%v key_mask=%v", best.Window, best.Block, best.ALiBi, best.Softcap, best.Scale, bestBias != nil, bestMask != nil)
	}
	s.simplify(ch, evalAt, tolerance(t.format))
}

// clamped tries a choice's q, k and v clamped to [−c, c] before RoPE
// (a clip of the projections inside the attention, where no boundary
// shows the clipped values), c searched on the attention's error; it
// keeps the clamp when it lowers the error below the format's tolerance.
func (s *synth) clamped(ch *attnChoice, t *val) {
	tol := tolerance(t.format)
	var lo, hi *val
	mk := func(c float64) (*attnChoice, float64) {
		hi = &val{shape: []int{1}, data: []float32{float32(c)}, format: f32}
		lo = &val{shape: []int{1}, data: []float32{float32(-c)}, format: f32}
		clamp := clampTo(s, lo, hi)
		c2 := *ch
		memo := map[*val]*val{}
		for _, p := range []**val{&c2.q, &c2.k, &c2.v} {
			if *p = substituted(s, *p, operandOf(*p), clamp, memo); *p == nil {
				return nil, math.Inf(1)
			}
		}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: c2.params}, args: []*val{c2.q, c2.k, c2.v, nil, c2.bias, c2.sinks}, out: t.format}
		v, sc := s.ev.score(e, t)
		if c2.q.shape[1] != t.shape[1] {
			full, err := s.ev.run(e)
			if err != nil {
				return nil, math.Inf(1)
			}
			v = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: c2.rows, End: c2.rows + t.shape[1]}, args: []*val{full}, out: full.format, label: "stream rows"})
			if v == nil {
				return nil, math.Inf(1)
			}
			sc = relRMS(t.format, v.data, t.data)
		}
		c2.result, c2.score = v, sc
		return &c2, sc
	}
	// the error is flat above the largest |x| (nothing clipped): a grid
	// first, then golden section between the grid points around its best;
	// a long target's at a sample of its rows, the clip found run whole
	sm := sampleAttention(ch, t)
	f := func(c float64) float64 { _, sc := mk(c); return sc }
	if sm != nil {
		f = func(c float64) float64 {
			hi = &val{shape: []int{1}, data: []float32{float32(c)}, format: f32}
			lo = &val{shape: []int{1}, data: []float32{float32(-c)}, format: f32}
			c2, memo := *ch, map[*val]*val{}
			for _, p := range []**val{&c2.q, &c2.k, &c2.v} {
				if *p = substituted(s, *p, operandOf(*p), clampTo(s, lo, hi), memo); *p == nil {
					return math.Inf(1)
				}
			}
			return sm.score(s, &c2, c2.params, nil, c2.bias, 0, t)
		}
	}
	grid := make([]float64, 33)
	bi, bestF := 0, math.Inf(1)
	for i := range grid {
		grid[i] = 0.05 * math.Pow(2000, float64(i)/float64(len(grid)-1))
		if e := f(grid[i]); e < bestF {
			bi, bestF = i, e
		}
	}
	c := s.searchParam(f, grid[max(bi-1, 0)], grid[min(bi+1, len(grid)-1)])
	if c <= 0 {
		return
	}
	best, sc := mk(c)
	if best == nil || sc > tol || sc >= ch.score {
		return
	}
	s.em.constScalar(hi)
	s.em.constScalar(lo)
	best.label += fmt.Sprintf(" clip=%g", c)
	best.clip = c
	*ch = *best
}

// clampTo is x ↦ max(min(x, hi), lo) made in the search's values.
func clampTo(s *synth, lo, hi *val) func(*val) *val {
	return func(x *val) *val {
		m := s.derive(&expr{op: program.OpMinimum, args: []*val{x, hi}, out: x.format, label: "clip"})
		return s.derive(&expr{op: program.OpMaximum, args: []*val{m, lo}, out: x.format, label: "clip"})
	}
}

// narrowRopeInputs tries, in a narrow run, a choice's rotated q and k
// with the value they were rotated from cast to the run's format first,
// where that value is f32 (a q/k norm run in f32, its output .to(dtype)
// before the rotary embedding: MAGI-1's): the attention reads q and k in
// its own format whichever way, and only the cast the forward made
// rounds as it did, so the variant is kept where it reproduces more of
// t's entries bit for bit and is no further from t.
func (s *synth) narrowRopeInputs(ch *attnChoice, t *val) {
	if t.format == precision.F32 || ch.rope == 0 || ch.result == nil || len(ch.result.data) != len(t.data) {
		return
	}
	c2 := *ch
	memo := map[*val]*val{}
	cast := func(x *val) *val {
		return s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{x}, out: t.format, label: "cast before rope"})
	}
	changed := false
	for _, p := range []**val{&c2.q, &c2.k} {
		x := operandOf(*p)
		if x == nil || x.format != precision.F32 || x == *p {
			continue
		}
		if *p = substituted(s, *p, x, cast, memo); *p == nil {
			return
		}
		changed = true
	}
	if !changed {
		return
	}
	e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: c2.params}, args: []*val{c2.q, c2.k, c2.v, nil, c2.bias, c2.sinks}, out: t.format}
	v, sc := s.ev.score(e, t)
	if v == nil || len(v.data) != len(t.data) || sc > ch.score || exactShare(v.data, t.data) <= exactShare(ch.result.data, t.data) {
		return
	}
	c2.result, c2.score = v, sc
	c2.label += " qk cast before rope"
	*ch = c2
}

// operandOf is the value an attention operand was made from: through
// RoPE, and the slices, joins and reshapes that place its rows.
func operandOf(v *val) *val {
	for v.from != nil {
		switch v.from.op {
		case program.OpRope, program.OpSlice, program.OpConcat, program.OpReshape:
			v = v.from.args[0]
			continue
		}
		break
	}
	return v
}

// substituted remakes v with x replaced by f(x) wherever v's expression
// reads it (memo: the values already remade).
func substituted(s *synth, v, x *val, f func(*val) *val, memo map[*val]*val) *val {
	if v == nil {
		return nil
	}
	if r, ok := memo[v]; ok {
		return r
	}
	var r *val
	switch {
	case v == x:
		r = f(x)
	case v.from == nil:
		r = v
	default:
		e := *v.from
		e.args = slices.Clone(e.args)
		e.node, e.sibling = nil, nil
		changed := false
		for i, a := range e.args {
			if a != nil {
				if na := substituted(s, a, x, f, memo); na != a {
					e.args[i], changed = na, true
				}
			}
		}
		r = v
		if changed {
			r = s.derive(&e)
		}
	}
	memo[v] = r
	return r
}

// maskedBiases are the (bias, key mask) pairs refine tries: none, each
// bias, and each key mask (replacing the choice's own mask, so only on
// choices without a causal one) alone.
func maskedBiases(bias, masks []*val, m exec.MaskKind) [][2]*val {
	out := [][2]*val{{nil, nil}}
	for _, b := range bias {
		out = append(out, [2]*val{b, nil})
	}
	if m == exec.MaskNone {
		for _, k := range masks {
			out = append(out, [2]*val{nil, k})
		}
	}
	return out
}

// searchParam minimises f over [lo, hi] by golden section on a log scale
// and returns the simplest number near the minimum that does as well.
func (s *synth) searchParam(f func(float64) float64, lo, hi float64) float64 {
	x := math.Exp(goldenMin(func(u float64) float64 { return f(math.Exp(u)) }, math.Log(lo), math.Log(hi), 60))
	at := f(x)
	return snap(x, func(y float64) bool { return f(y) <= 1.01*at+1e-12 })
}

// simplify replaces the fitted scale and cap by the simplest nearby
// numbers (jointly: the two trade off) that keep the error. eval runs
// the choice with other parameters under the given rounding points.
func (s *synth) simplify(ch *attnChoice, eval func(exec.AttentionParams, exec.Round) (float64, *val), tol float64) {
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
		for _, c := range simple.Candidates(float64(x)) {
			if math.Abs(c-float64(x)) <= within*math.Abs(float64(x)) {
				out = append(out, c)
			}
		}
		return append(out, float64(x))
	}
	limit := math.Max(1.05*ch.score, tol/2)
	caps := near(ch.params.Softcap)
	if ch.params.Softcap != 0 {
		// no cap at all first: a cap far above the scores bends them
		// less than a narrow format's rounding does, and fits that
		caps = append([]float64{0}, caps...)
	}
	// the default scale (1/√D) and no causal mask first: in a narrow
	// format a fitted scale or a mask over a few rows can buy a little
	// error that is only rounding (LeViT's 4 rows in bf16 fit causal at
	// 2.16 where the reference ran 1/√D unmasked)
	canon := s.qkScale[ch.q] // 0: 1/√D; 1/√dk for q padded per head
	scales := near(ch.params.Scale)
	if ch.params.Scale != canon {
		scales = append([]float64{float64(canon)}, scales...)
	}
	// the defaults within twice the fit's error (and the tolerance), the
	// simple numbers near the fit within its error
	canonLimit := math.Max(1.05*ch.score, math.Min(2*ch.score, tol/2))
	masks := []exec.MaskKind{ch.params.Mask}
	if ch.params.Mask == exec.MaskCausal && ch.q.shape[1] == ch.k.shape[1] {
		masks = []exec.MaskKind{exec.MaskNone, exec.MaskCausal}
	}
	// no ALiBi first, likewise: slopes of 2⁻⁸ on a few keys move the
	// scores by less than bf16's rounding (EfficientViT-M's 2×2 windows)
	alibis := []bool{ch.params.ALiBi}
	if ch.params.ALiBi {
		alibis = []bool{false, true}
	}
	for _, alibi := range alibis {
		for _, mask := range masks {
			for _, sc := range scales {
				for _, cap := range caps {
					p := ch.params
					p.Scale, p.Softcap, p.Mask = float32(sc), float32(cap), mask
					if !alibi {
						p.ALiBi, p.ALiBiScale = false, 0
					}
					if p == ch.params {
						return
					}
					lim, rounds := limit, []exec.Round{0}
					if p.Scale == canon || p.Mask != ch.params.Mask || p.ALiBi != ch.params.ALiBi {
						lim, rounds = canonLimit, canonRounds(tol)
					}
					for _, r := range rounds {
						if e, v := eval(p, r); v != nil && e <= lim {
							ch.params, ch.score, ch.result = p, e, v
							ch.label += fmt.Sprintf(" simplified scale=%g softcap=%g mask=%v alibi=%v round=%v", sc, cap, mask, p.ALiBi, r)
							return
						}
					}
				}
			}
		}
	}
}

// canonRounds are the arithmetics the defaults are tried under: the
// search's (the output rounded once) and, in a narrow format, written
// out step by step with the scaled scores or the scaled queries stored.
// On a few keys those roundings move the output as much as a fitted
// scale does (EfficientViT-M's q·scale in bf16 fitted 0.351 for 1/√8);
// the precision search then decides which one the reference ran.
func canonRounds(tol float64) []exec.Round {
	if tol <= 1e-3 {
		return []exec.Round{0}
	}
	return []exec.Round{0, exec.RoundEach | exec.RoundQuery, exec.RoundEach}
}

func anyWithin(cs []attnChoice, tol float64) bool {
	for _, c := range cs {
		if c.score <= tol {
			return true
		}
	}
	return false
}
