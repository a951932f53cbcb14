package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
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
	clip      float64          // q, k, v clamped to ±clip before RoPE (0: not)
	sinks     *val             // a per-head logit joined to each row's softmax (an attention sink), or nil
	rounded   precision.Format // q and k rounded to this format and read back (0: not)
	keyParts  [2]int           // rows of the two streams' pieces of joined keys (zeros: not joined)
	// temperature: how a cosine attention's per-head temperature is made
	// from its parameter (cosineAttention; "": not cosine)
	temperature string
}

// sortByScore sorts choices by score, best first, ties in their order:
// slices.SortStableFunc's order, reached by moving indices rather than
// the choices themselves (a first stage ranks thousands, each a few
// hundred bytes).
func sortByScore(choices []attnChoice) {
	idx := make([]int, len(choices))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(choices[a].score, choices[b].score) })
	sorted := make([]attnChoice, len(choices))
	for i, j := range idx {
		sorted[i] = choices[j]
	}
	copy(choices, sorted)
}

// attention explains target [B, S, H·D] as scaled dot-product attention
// over values the scope made (its children's results, and the pieces of a
// fused projection), each of q and k optionally rotated by RoPE tables
// the scope holds: staged, first the operands, head width, RoPE layout
// and causality, then the score scale.
func (s *synth) attention(t *val, sc *scope) *val { return s.attentionOf(t, sc, false) }

// batchOfOne is sc with its rank-2 and rank-3 values ([S, W] rows, [S, H,
// D] heads, [S, d] tables) of rows rows given a leading axis of 1, for a
// batchless target of those rows read as a batch of one; with any, values
// of other row counts too (keys and values joined from two streams);
// integer values (ids, indices) are left as they are, and so is the rest.
func (s *synth) batchOfOne(sc *scope, rows int, any bool) *scope {
	return sc.mapped(func(v *val) *val {
		if !v.opaque && (len(v.shape) == 2 || len(v.shape) == 3) && !v.integral() && v.shape[0] > 1 && (any || v.shape[0] == rows) {
			return s.reshape(v, append([]int{1}, v.shape...))
		}
		return nil
	})
}

// mapped is sc with each value v replaced by f(v) where that is not nil,
// own and argument as v was.
func (sc *scope) mapped(f func(*val) *val) *scope {
	l := sc.emptied()
	for _, v := range sc.vals {
		w := v
		if r := f(v); r != nil {
			w = r
		}
		l.vals = append(l.vals, w)
		if sc.own[v] {
			l.own[w] = true
		}
		if sc.arg[v] {
			l.arg[w] = true
		}
	}
	return l
}

// joinedAttention explains t as attention of its rows over keys and
// values joined from two streams (joinedKV): tried where every other
// attention form failed, as the pieces multiply.
func (s *synth) joinedAttention(t *val, sc *scope) *val {
	if len(t.shape) == 2 {
		return s.attentionOf(t, sc, true) // batchless: mayJoin asked of the batch of one
	}
	if !mayJoin(t, sc) {
		return nil
	}
	return s.attentionOf(t, sc, true)
}

// attentionOf is attention over the scope's operands or, joined, over
// keys and values joined from two streams only.
func (s *synth) attentionOf(t *val, sc *scope, joined bool) *val {
	if len(t.shape) == 4 && !t.reshapedFrom {
		// per-head results [B, S, H, D] (an attention module returning its
		// heads unmerged): explained merged, then split back; only where
		// the scope made a q of that shape ([B, H, S, S] probabilities
		// are not results)
		merged := []int{t.shape[0], t.shape[1], t.shape[2] * t.shape[3]}
		if !slices.ContainsFunc(sc.vals, func(v *val) bool { return !v.opaque && slices.Equal(v.shape, merged) }) {
			return nil
		}
		proxy := *t
		proxy.shape = merged
		proxy.reshapedFrom = true
		return s.reshape(s.attentionOf(&proxy, sc, joined), t.shape)
	}
	if len(t.shape) == 2 && !t.reshapedFrom && t.shape[0] > 1 {
		// packed rows without a batch axis ([S, H·D]: a request's
		// sequences laid end to end, as varlen kernels take them):
		// explained as a batch of one over the scope's values given a
		// leading axis of 1, the axis then dropped
		proxy := *t
		proxy.shape = []int{1, t.shape[0], t.shape[1]}
		proxy.reshapedFrom = true
		lifted := s.batchOfOne(sc, t.shape[0], joined)
		if joined && !mayJoin(&proxy, lifted) {
			return nil
		}
		return s.reshape(s.attentionOf(&proxy, lifted, joined), t.shape)
	}
	if len(t.shape) != 3 {
		return nil
	}
	// (values shared with rotated keys leave their columns' ranges)
	if !s.sharedKV && !s.attentionHeld(t, sc) {
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
	// q and k normalised after the split of a fused projection, v read
	// from it as it is: tried only when the plain triples fail (below)
	var mixed [][3]*val
	for _, f := range fused {
		for _, q := range pool {
			for _, k := range pool {
				if q != k && slices.Equal(f[2].shape, k.shape) {
					mixed = append(mixed, [3]*val{q, k, f[2]})
				}
			}
			// q alone made over again after the split (a depthwise
			// convolution of it: EfficientViT-M's), k and v as they are
			if slices.Equal(q.shape, f[0].shape) && !slices.Contains(f[:], q) {
				mixed = append(mixed, [3]*val{q, f[1], f[2]})
			}
		}
	}
	if s.sharedKV {
		// keys and values one value: only the triples (q, k, k)
		triples, mixed = nil, nil
		for _, q := range pool {
			for _, k := range pool {
				if q != k {
					triples = append(triples, [3]*val{q, k, k})
				}
			}
		}
	}
	var joinedTriples [][3]*val
	if joined {
		triples, mixed, joinedTriples = nil, nil, s.joinedKV(sc, t)
	}
	if len(triples) == 0 && len(mixed) == 0 && len(joinedTriples) == 0 && (joined || !hasSeparateHeads(sc, t) && !hasNarrowValues(sc, t)) {
		return nil
	}
	tables := s.ropeTables(sc)
	var headDims []int
	for _, tb := range tables {
		headDims = append(headDims, tb[0].shape[len(tb[0].shape)-1])
	}
	for d := minHeadDim; d <= maxHeadDim && d <= width; d *= 2 {
		if width%d == 0 && !slices.Contains(headDims, d) {
			headDims = append(headDims, d)
		}
	}
	// tables that rotate consecutive sections of each head, each gathered
	// by its own ids (a head cut in t/h/w thirds)
	sections := s.sectionTables(sc, t.shape[1])
	for _, sec := range sections {
		if d := sec.k * sec.w; width%d == 0 && !slices.Contains(headDims, d) {
			headDims = append(headDims, d)
		}
	}
	// the head widths of the attentions explained so far: a cross-attention
	// without RoPE has heads as wide as the self-attention's before it,
	// which its table showed (heads of 24, of 72: not powers of two)
	for _, r := range s.attn {
		if d := r.choice.headDim; d > 0 && width%d == 0 && !slices.Contains(headDims, d) {
			headDims = append(headDims, d)
		}
	}
	var all []attnChoice
	var evidence []semantics.Candidate
	sub := sampledRows(t)
	try := func(ch attnChoice) {
		if s.unitScale {
			ch.params.Scale = 1
			ch.label += " scale=1"
		}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, nil, ch.sinks}, out: t.format, label: ch.label}
		if ch.q.shape[1] == t.shape[1] && sub != nil {
			// a long sequence: scored on its first rows (every key, so
			// causal, windowed and ALiBi scores are the full run's);
			// the winner is run whole below
			qs := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: sub.shape[1]}, args: []*val{ch.q}, out: ch.q.format})
			if qs == nil {
				return
			}
			es := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{qs, ch.k, ch.v, nil, nil, ch.sinks}, out: t.format, label: ch.label}
			_, score := s.ev.score(es, sub)
			evidence = append(evidence, semantics.Candidate{Value: ch.label + fmt.Sprintf(" (first %d rows)", sub.shape[1]), Score: finite(score)})
			if !math.IsInf(score, 1) {
				ch.score, ch.result = score, nil
				all = append(all, ch)
			}
			return
		}
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
			score := relRMS(t.format, sl.data, t.data)
			evidence = append(evidence, semantics.Candidate{Value: ch.label, Score: finite(score)})
			c := ch
			c.score, c.result, c.rows = score, sl, start
			all = append(all, c)
		}
	}
	// each choice is tried as it is and with each sink the scope holds
	try = s.withSinks(sc, try)
	// q (or k) rotated once per table, layout, heads and rows, not once
	// per triple it joins: the scans pair each q with every k and v
	type rotation struct {
		x, cos, sin      *val
		layout           exec.RopeLayout
		heads, d, lo, hi int
	}
	rotations := map[rotation]*val{}
	rotateRows := func(x *val, tb [2]*val, layout exec.RopeLayout, heads, d int, rows [2]int) *val {
		key := rotation{x, tb[0], tb[1], layout, heads, d, rows[0], rows[1]}
		if r, ok := rotations[key]; ok {
			return r
		}
		r := s.rotateRows(x, tb, layout, heads, d, rows)
		rotations[key] = r
		return r
	}
	// scan tries every triple × head width × causality × RoPE choice;
	// wide adds the rarer forms (q rotated alone, tables re-laid for
	// adjacent pairs), which a second scan tries only when the first
	// finds nothing within tolerance.
	scan := func(triples [][3]*val, tables [][2]*val, wide bool) {
		for _, tr := range triples {
			q, k, v := tr[0], tr[1], tr[2]
			if q.shape[2] != width || q.shape[1] < t.shape[1] {
				continue
			}
			parts, joined := joinedParts(k), ""
			if parts[0] != 0 {
				joined = " keys_joined"
			}
			for _, d := range headDims {
				if width%d != 0 || k.shape[2] < d || k.shape[2]%d != 0 || (width/d)%(k.shape[2]/d) != 0 {
					continue
				}
				if dv, ok := s.qkWidth[q]; ok && d != dv {
					continue // a q padded per head of dv
				}
				p := exec.AttentionParams{Heads: width / d, KVHeads: k.shape[2] / d, Scale: s.qkScale[q]}
				for _, causal := range []bool{false, true} {
					pp := p
					if causal {
						pp.Mask = exec.MaskCausal
					}
					base := fmt.Sprintf("heads=%d kv=%d causal=%v", pp.Heads, pp.KVHeads, causal) + joined
					if !wide {
						try(attnChoice{q: q, k: k, v: v, headDim: d, params: pp, label: base + " rope=none", keyParts: parts})
					}
					for _, sec := range sections {
						if wide || sec.k*sec.w != d || k.shape[1] != q.shape[1] {
							continue
						}
						for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
							rq := s.rotateSections(q, sec, layout, pp.Heads)
							if rk := s.rotateSections(k, sec, layout, pp.KVHeads); rq != nil && rk != nil {
								try(attnChoice{q: rq, k: rk, v: v, headDim: d, rope: layout, params: pp,
									label: base + fmt.Sprintf(" rope=%s in %d sections", layout, sec.k), keyParts: parts})
							}
						}
					}
					for _, tb := range tables {
						tw := tb[0].shape[len(tb[0].shape)-1]
						// a table as wide as q and k rotates the whole width
						// before the heads split (each head its own
						// frequencies); otherwise one head's width
						hq, hk, rd := pp.Heads, pp.KVHeads, d
						if tw > d {
							if tw != width || k.shape[2] != width {
								continue
							}
							hq, hk, rd = 1, 1, width
						}
						for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
							for _, rows := range ropeRows(tb, q, k) {
								if !wide && k.shape[1] != q.shape[1] {
									continue // only q can rotate: the wide scan's q_only
								}
								rq := rotateRows(q, tb, layout, hq, rd, rows.q)
								if rq == nil {
									continue
								}
								if rk := rotateRows(k, tb, layout, hk, rd, rows.k); rk != nil {
									try(attnChoice{q: rq, k: rk, v: v, headDim: d, rope: layout, cos: tb[0], sin: tb[1], params: pp,
										label: base + " rope=" + layout.String() + rows.label, keyParts: parts})
									if s.sharedKV && k == v {
										// the values are the keys as rotated
										try(attnChoice{q: rq, k: rk, v: rk, headDim: d, rope: layout, cos: tb[0], sin: tb[1], params: pp,
											label: base + " rope=" + layout.String() + rows.label + " v=rotated k", keyParts: parts})
									}
								}
								if wide && rows.k == rows.q && q != k && !slices.Equal(q.data, k.data) {
									// q rotated, k not (cross-attention to text rows
									// that have no image positions)
									try(attnChoice{q: rq, k: k, v: v, headDim: d, rope: layout, cos: tb[0], sin: tb[1], params: pp,
										label: base + " rope=" + layout.String() + " q_only", keyParts: parts})
								}
							}
						}
					}
				}
			}
		}
	}
	// the scans go on while no choice is within refineGoal (a narrow
	// format's tolerance admits a wrong triple or a scale standing in for
	// a bias); a choice is taken within the format's tolerance
	tol, accept := refineGoal(t.format), tolerance(t.format)
	if joined {
		// one order of the pieces' operands and every RoPE span: the
		// plain scan (no RoPE), then the wide one
		scan(joinedTriples, tables, false)
		scan(joinedTriples, tables, true)
	} else if s.unitScale {
		scan(triples, tables, false) // unscaledAttention's one scan
	} else if s.sharedKV {
		// sharedKVAttention's scans: the scope's tables, then re-laid
		scan(triples, tables, false)
		if !anyWithin(all, tol) {
			scan(triples, slices.Concat(s.relaid(tables), s.doubled(tables), s.paired(tables)), false)
		}
	} else {
		if hinted := s.hintedHeadDims(sc, t); len(hinted) > 0 {
			// the scope's own scores or probabilities show the head count
			// (an eager attention's dropout argument): those widths
			// alone first, as a near-uniform attention's output can fit
			// another head count as well
			usual := headDims
			headDims = hinted
			scan(triples, tables, false)
			headDims = slices.DeleteFunc(slices.Clone(usual), func(d int) bool { return slices.Contains(hinted, d) })
			if !anyWithin(all, tol) {
				scan(triples, tables, false)
			}
			headDims = append(hinted, headDims...)
		} else {
			scan(triples, tables, false)
		}
		if !anyWithin(all, tol) {
			// heads of a width no power of two (12 of 48, MobileViT's):
			// the other divisors, once the usual widths have failed
			usual := headDims
			headDims = nil
			for d := minHeadDim; d <= maxHeadDim && d <= width; d++ {
				if width%d == 0 && !slices.Contains(usual, d) {
					headDims = append(headDims, d)
				}
			}
			scan(triples, tables, false)
			headDims = append(usual, headDims...)
		}
		if !anyWithin(all, tol) {
			// kernelised attention is cheap to try, the rarer softmax forms
			// below are not
			if v := s.linearAttention(t, sc); v != nil {
				return v
			}
			scan(mixed, tables, false)
		}
		if !anyWithin(all, tol) {
			scan(s.permutedQKV(sc, t), tables, false)
		}
		if !anyWithin(all, tol) {
			// keys zeroed on the rows a 0/1 mask of the scope drops
			// (padding rows' keys × 0, still in every softmax)
			if masks := rowMasks(sc, t.shape[0]); len(masks) > 0 {
				scan(s.maskKeys(masks, triples), tables, false)
			}
		}
		if !anyWithin(all, tol) {
			// values wider per head than queries and keys
			if u, dvs := s.unequalHeads(sc, pool, t); len(u) > 0 {
				for _, d := range dvs {
					if !slices.Contains(headDims, d) {
						headDims = append(headDims, d)
					}
				}
				n0 := len(all)
				scan(u, nil, false)
				// refined at once, each apart, the best kept: before their
				// position bias (LeViT's always has one) they rank below
				// choices that are no attention at all, and a loose fit of
				// one must not end the others' turn (a subsampled
				// attention's queries beside its argument of the same
				// width); only where the scope holds a table such a bias
				// may come from
				own := slices.Clone(all[n0:])
				if !slices.ContainsFunc(sc.vals, func(v *val) bool { return v.param && len(v.shape) == 2 }) {
					own = nil
				}
				// ranked with the scope's masks and position tables tried
				// at once (one run each): without its bias the right
				// triple can rank below wrong ones (EfficientViT-M's
				// cascaded heads, each reading a row of one table)
				sortByScore(own)
				s.rankUnderMasks(own, t, sc)
				var best *attnChoice
				for _, c := range own[:min(refineVariants, len(own))] {
					if r := s.refineBest([]attnChoice{c}, t, sc); r != nil && (best == nil || r.score < best.score) {
						best = r
					}
				}
				if best != nil && best.score <= accept {
					all = append(all[:n0], *best)
				}
			}
		}
		if !anyWithin(all, tol) {
			// values narrower per head than queries and keys: searched
			// padded, whole (its own refinement)
			if r := s.narrowValues(t, sc); r != nil {
				return r
			}
		}
		if !anyWithin(all, tol) {
			// q and k captured over a joined sequence, v only per stream
			scan(s.valuesJoined(sc, pool, width), tables, false)
		}
		if !anyWithin(all, tol) {
			relaid := append(s.relaid(tables), s.doubled(tables)...)
			scan(append(triples, mixed...), relaid, false)
			scan(append(triples, mixed...), append(slices.Clone(tables), relaid...), true)
		}
		if !anyWithin(all, tol) {
			ops := slices.Concat(triples, mixed)
			if side := s.sideBySideTables(sc, tables, ops, t.shape[1], width); len(side) > 0 {
				scan(ops, side, true)
			}
		}
		if !anyWithin(all, tol) {
			ops := slices.Concat(triples, mixed)
			if packed := s.packedTables(sc, tables, ops, t.shape[1], width); len(packed) > 0 {
				scan(ops, packed, true)
			}
		}
		if len(tables) == 0 && !anyWithin(all, tol) {
			s.inlineRope(t, sc, all, try) // try collects into all
		}
		if len(tables) == 0 && !anyWithin(all, tol) {
			s.inlineGridRope(t, all, try) // try collects into all
		}
		if !anyWithin(all, tol) {
			if bt := s.biasedTriples(sc, all, width); len(bt) > 0 {
				scan(bt, tables, false)
			}
		}
		if !anyWithin(all, tol) && len(tables) > 1 {
			s.ownTables(slices.Concat(triples, mixed), tables, headDims, t, try)
		}
	}
	if len(all) == 0 {
		return nil
	}
	// The operands, head width and RoPE first; what shapes the scores
	// (scale, window, ALiBi, cap, a bias) by coordinate descent on the
	// three best; on three more where the scope holds a bias (a mask the
	// first stage lacks can make a worse-scoring choice the right one).
	sortByScore(all)
	// choices that are the same computation over equal operands (a
	// value and its alias) take one refinement slot, not several
	all = slices.CompactFunc(all, func(a, b attnChoice) bool {
		return a.label == b.label && a.score == b.score && a.rows == b.rows
	})
	if !slices.ContainsFunc(all, func(c attnChoice) bool { return c.score < 1 }) && !s.holdsMasks(sc, all[0]) {
		// every choice is no nearer the target than zeros are (or ran to
		// a non-finite output), and the scope holds no mask that could
		// change that: no attention over these operands, which the
		// refinement would bend toward the target for thousands of runs
		// (a pooled key read as rows, MViTv2's)
		return nil
	}
	// q and k rounded to a narrower format (an f32 run casting them to
	// bf16): tried where no first-stage choice holds, on the three best;
	// kept apart so they take no refinement slot from the others
	if !anyWithin(all, tol) {
		// zero keys padded on and attended (a sink of logit ln n): fitted
		// on the three best, which try appends to all
		s.zeroKeys(bestUpToRowScale(all, t, 3), t, try)
		sortByScore(all)
	}
	var rounded []attnChoice
	if n := len(all); !anyWithin(all, tol) {
		s.roundedOperands(all[:min(3, n)], t.format, try) // try appends to all
		rounded = slices.Clone(all[n:])
		all = all[:n]
		sortByScore(rounded)
	}
	if s.wideRefine && !anyWithin(all, accept) && s.rankByScale(all, t) < minScaleGain {
		// no temperature changed what the first stage saw (its choices
		// were refined already, three of them, by the plain search)
		return nil
	}
	if !anyWithin(all, tol) {
		s.rankUnderMasks(all, t, sc)
	}
	var best *attnChoice
	if anyWithin(rounded, tol) {
		best = s.refineBest(rounded, t, sc)
	} else {
		best = s.refineBest(all, t, sc)
		if best == nil || best.score > tol {
			if r := s.refineBest(rounded, t, sc); r != nil && (best == nil || r.score < best.score) {
				best = r
			}
		}
	}
	if best == nil || best.score > accept {
		return nil
	}
	s.narrowRopeInputs(best, t)
	evidence = append(evidence, semantics.Candidate{Value: best.label, Score: finite(best.score)})
	if best.cos != nil && best.cos.fit != nil && best.cos.fit.kind == "rope_table" {
		s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: t.origin, fit: best.cos.fit})
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: *best, scope: sc.module, boundary: t.origin, candidates: evidence})
	return best.result
}

// holdsMasks reports whether the scope holds a mask or bias the
// refinement would try for ch (a far-off first stage is then no verdict:
// a mask can move every score).
func (s *synth) holdsMasks(sc *scope, ch attnChoice) bool {
	return len(biases(sc, ch.q, ch.k)) > 0 || len(s.keyMasks(sc, ch.q, ch.k)) > 0 || len(s.segmentMasks(sc, ch.q, ch.k)) > 0 || len(s.queryMasks(sc, ch.q, ch.k)) > 0
}

// refineGoal is the error below which refineBest stops refining: the
// format's tolerance, or in a narrow format a quarter of it. bf16's
// tolerance (1.5e-2) admits an attention whose fitted scale stands in
// for a missing position bias (LeViT's at random weights); the attention
// the reference ran is within a few roundings (≈2e-3).
func refineGoal(f precision.Format) float64 {
	if f == precision.BF16 || f == precision.F16 {
		return tolerance(f) / 4
	}
	return tolerance(f)
}

// refineBest runs the second stage on choices sorted best first: what
// shapes the scores (scale, window, ALiBi, cap, a bias, a clip) by
// coordinate descent on the three best, and on three more where the
// scope holds a bias or a key mask; the best result (nil: none ran).
func (s *synth) refineBest(all []attnChoice, t *val, sc *scope) *attnChoice {
	best := s.refineWith(all, t, sc, refineMasks)
	for _, pass := range []refinePass{refinePairwise, refineHeadsLast, refineBlocks} {
		if best != nil && best.score <= refineGoal(t.format) {
			break
		}
		// a 0/1 mask per query and key ([B, 1, Sq, Sk]: a caption's
		// pairwise padding mask), then a bias laid out heads last: each
		// tried only where the passes before it fail
		if b := s.refineWith(all, t, sc, pass); b != nil && (best == nil || b.score < best.score) {
			best = b
		}
	}
	return best
}

// refinePass is which scores' shapers a refineWith pass offers.
type refinePass uint8

const (
	refineMasks     refinePass = iota // the scope's biases and key masks
	refinePairwise                    // its per-query masks alone
	refineHeadsLast                   // its biases laid out [Sq, Sk, H] alone
	refineBlocks                      // cuts of its block-local biases alone (blockBiases)
)

// refineWith is refineBest's pass over the scope's key masks, or, where
// pairwise, over its per-query masks alone, or over its heads-last
// biases alone (choices no such value fits are not refined again).
func (s *synth) refineWith(all []attnChoice, t *val, sc *scope, pass refinePass) *attnChoice {
	var best *attnChoice
	pairwise := pass == refinePairwise
	for i := range min(6, len(all)) {
		ch := all[i]
		if pairwise && len(s.queryMasks(sc, ch.q, ch.k)) == 0 {
			continue
		}
		if reachBound(t, ch.v, ch.params.Heads, ch.params.KVHeads) > outOfReach {
			continue // no scale, mask, bias, window or cap brings it within tolerance
		}
		var lastBias []*val
		switch pass {
		case refineHeadsLast:
			lastBias = s.headsLastBiases(sc, ch.q, ch.k, ch.params.Heads)
		case refineBlocks:
			lastBias = s.blockBiases(sc, ch.q, ch.k, ch.params.Heads)
		}
		if (pass == refineHeadsLast || pass == refineBlocks) && len(lastBias) == 0 {
			continue
		}
		if ch.result == nil { // scored on sampled rows: run whole
			e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, nil, ch.sinks}, out: t.format, label: ch.label}
			v, score := s.ev.score(e, t)
			if v == nil {
				continue
			}
			ch.result, ch.score = v, score
		}
		masks := append(s.keyMasks(sc, ch.q, ch.k), s.joinedMasks(sc, ch.q.shape[0], ch.keyParts)...)
		bias := slices.Concat(s.scoreBiases(sc, ch.q, ch.k), s.segmentMasks(sc, ch.q, ch.k), s.joinedBiases(sc, ch.q.shape[0], ch.keyParts))
		offsets := s.absOffsetBiases(sc, ch.params.Heads, ch.q.shape[1], ch.k.shape[1])
		if ch.q.shape[1] == ch.k.shape[1] {
			offsets = append(offsets, s.offsetTableBiases(sc, ch.params.Heads, ch.q.shape[1])...)
		}
		bias = slices.Concat(bias, s.summedBiases(bias, ch.q.shape[0]), s.offsetBiasesSummed(offsets, bias, ch.q.shape[0]))
		bias = append(bias, s.queryPositionBiases(sc, ch)...)
		bias = append(bias, offsets...)
		switch pass {
		case refinePairwise:
			masks = s.queryMasks(sc, ch.q, ch.k)
		case refineHeadsLast, refineBlocks:
			masks, bias = nil, lastBias
		}
		if i >= 3 && len(bias) == 0 && len(masks) == 0 && !s.wideRefine {
			break
		}
		if ch.score > tolerance(t.format) && i < 3 && pass != refineHeadsLast && pass != refineBlocks {
			s.clamped(&ch, t) // before refine, whose scale would absorb part of a clip
		}
		if pairwise && ch.score > tolerance(t.format) {
			// a query the mask leaves no key gives 0, not NaN: the
			// first stage's choice under the mask, before refine
			if c := ch; s.emptyRowsZeroed(&c, t, masks) && c.score <= tolerance(t.format) {
				ch = c
			}
		}
		if ch.score > refineGoal(t.format) {
			s.refine(&ch, t, s.withScaled(bias, ch.headDim), masks)
		}
		if best == nil || ch.score < best.score {
			c := ch
			best = &c
		}
		if best.score <= refineGoal(t.format) {
			break
		}
	}
	return best
}

// sampleRows is how many leading rows score a long sequence's attention
// candidates (the winner is then run whole).
const sampleRows = 64

// sampledRows is t's first sampleRows rows when t [B, S, W] is long
// enough for sampling to pay, else nil.
func sampledRows(t *val) *val {
	if len(t.shape) != 3 || t.shape[1] <= 4*sampleRows {
		return nil
	}
	return &val{shape: []int{t.shape[0], sampleRows, t.shape[2]}, data: sliceData(t, 1, 0, sampleRows), format: t.format, origin: t.origin}
}

// The head widths the attention searches try besides the RoPE tables':
// the powers of two between these (tiny test models have heads of 4).
const (
	minHeadDim = 4
	maxHeadDim = 256
)

// unscaledAttention explains t as attention whose scores are not scaled
// at all (Gemma 4: q and k RMS-normed per head, the scale left to their
// norms' γ): the plain operand scan again with every choice at scale 1,
// then the usual refinement. Ranked at 1/√d, the right operands can lose
// their refinement slots to wrong ones that score better there; tried
// once every other form has failed.
func (s *synth) unscaledAttention(t *val, sc *scope) *val {
	// only a target read as it was captured, [B, S, W], beside a value of
	// the scope that could be its queries (S rows of W, or of H heads of
	// W/H): the operands are not even gathered elsewhere
	if t.reshapedFrom || len(t.shape) != 3 || !slices.ContainsFunc(sc.vals, func(v *val) bool {
		return sc.own[v] && !v.opaque && len(v.shape) >= 3 && len(v.shape) <= 4 && v.shape[0] == t.shape[0] && v.shape[1] == t.shape[1] && v.numel() == t.numel()
	}) {
		return nil
	}
	s.unitScale = true
	defer func() { s.unitScale = false }()
	return s.attentionOf(t, sc, false)
}

// hintedHeadDims are the head widths the scope's own values of per-head
// scores show: [B, H, Sq, Sk] with Sq t's rows (an eager attention's
// scores or probabilities, captured at a child: its dropout's argument),
// each giving width/H where H divides t's width.
func (s *synth) hintedHeadDims(sc *scope, t *val) []int {
	width := t.shape[2]
	var out []int
	for _, v := range sc.vals {
		if !sc.own[v] || len(v.shape) != 4 || v.shape[0] != t.shape[0] || v.shape[2] != t.shape[1] || v.shape[1] < 1 || width%v.shape[1] != 0 {
			continue
		}
		if d := width / v.shape[1]; d >= minHeadDim && d <= maxHeadDim && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
