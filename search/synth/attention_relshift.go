package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// relShiftAttention explains t [B, S, H·D] as self-attention whose
// scores add to the content term a position term read off a table of
// relative offsets (Transformer-XL's, section 3.3):
//
//	scores[b, h, i, j] = ((q + u)·kᵀ)[i, j]·scale + shift((q + w)·Pᵀ)[i, j]·scale
//
// P [1 or B, 2S − 1, H·D] a value of the scope with a row per offset (a
// projection of a sinusoid table of offsets), u and w the scope's
// parameters of H·D numbers each ([H, D] or [H·D]: per-head biases a
// module keeps for the content and the position terms; either may be
// absent), and shift the relative shift: (q + w)·Pᵀ has a column per
// row of P, and query i reads column S − 1 − i + j for key j (P's rows
// run from offset S − 1 down to −(S − 1)), or column S − 1 + i − j (the
// rows the other way). Written in the vocabulary: the content term is
// the attention op's, the position term its additive bias, made from
// the queries by a per-head matmul and the shift as the reference's pad
// and view trick does it, a flat slice and a reshape, then a cut of the
// first S columns. The operands, the table, the biases' places and the
// shift's direction are searched: each (q, k, v) triple with each table
// and the two parameters both ways, then every variant around the best
// (one parameter, none, the other direction, the raw table, no scale) as
// the evidence. Tried once the plain attention forms have failed, and
// only where the scope holds a value of 2S − 1 rows.
func (s *synth) relShiftAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom || t.shape[1] < 2 {
		return nil
	}
	b, n, width := t.shape[0], t.shape[1], t.shape[2]
	tables := relOffsetTables(sc, b, n, width)
	if len(tables) == 0 {
		return nil
	}
	params, dims := relBiasParams(sc, width)
	if len(dims) == 0 {
		dims = s.headDims(width)
	}
	pool, _ := s.operands(sc, t)
	var ops []*val
	for _, v := range pool {
		if v.shape[1] == n && !v.integral() && !slices.Contains(tables, v) {
			ops = append(ops, v)
		}
	}
	var triples [][3]*val
	triples = append(triples, distinctTriples(ops, func(q, k, v *val) bool {
		return q.shape[2] == width && slices.Equal(k.shape, v.shape)
	})...)
	if len(triples) == 0 {
		return nil
	}
	// the places of the biases: [content, position], -1 none
	var places [][2]int
	switch len(params) {
	case 0:
		places = [][2]int{{-1, -1}}
	case 1:
		places = [][2]int{{0, 0}, {0, -1}, {-1, 0}}
	default:
		for i := range params {
			for j := range params {
				if i != j {
					places = append(places, [2]int{i, j})
				}
			}
		}
	}
	type cand struct {
		rc     relShiftChoice
		score  float64
		result *val
		bias   *val
		q      *val
	}
	var all []cand
	var evidence []semantics.Candidate
	try := func(rc relShiftChoice) *cand {
		q, bias := s.relShiftOperands(rc, params)
		if q == nil || bias == nil {
			return nil
		}
		p := exec.AttentionParams{Heads: width / rc.d, KVHeads: rc.k.shape[2] / rc.d}
		if rc.unscaled {
			p.Scale = 1
		}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, rc.k, rc.v, nil, bias, nil}, out: t.format, label: rc.label(params)}
		v, score := s.ev.score(e, t)
		evidence = append(evidence, semantics.Candidate{Value: e.label, Score: finite(score)})
		if v == nil {
			return nil
		}
		all = append(all, cand{rc: rc, score: score, result: v, bias: bias, q: q})
		return &all[len(all)-1]
	}
	// the operands, the table and the head width, the biases both ways
	goal := refineGoal(t.format)
	var best *cand
	first := func() {
		for _, tr := range triples {
			for _, d := range dims {
				if width%d != 0 || tr[1].shape[2]%d != 0 || (width/d)%(tr[1].shape[2]/d) != 0 {
					continue
				}
				for _, tb := range tables {
					for _, pl := range places {
						c := try(relShiftChoice{q: tr[0], k: tr[1], v: tr[2], table: tb, d: d, content: pl[0], position: pl[1]})
						if c != nil && (best == nil || c.score < best.score) {
							cc := *c
							best = &cc
						}
						if best != nil && best.score <= goal {
							return
						}
					}
				}
			}
		}
	}
	first()
	if best == nil || best.score >= 1 {
		// no choice nearer the target than zeros: no such attention
		return nil
	}
	// the variants around the best, for the evidence (and a better fit
	// where one is)
	w := best.rc
	var variants []relShiftChoice
	for _, ci := range append([]int{-1}, rangeN(len(params))...) {
		for _, pi := range append([]int{-1}, rangeN(len(params))...) {
			if ci != w.content || pi != w.position {
				r := w
				r.content, r.position = ci, pi
				variants = append(variants, r)
			}
		}
	}
	r := w
	r.reversed = !w.reversed
	variants = append(variants, r)
	r = w
	r.unscaled = true
	variants = append(variants, r)
	for _, tb := range tables {
		if tb != w.table {
			r = w
			r.table = tb
			variants = append(variants, r)
		}
	}
	for _, rc := range variants {
		if c := try(rc); c != nil && c.score < best.score {
			cc := *c
			best = &cc
		}
	}
	if best.score > tolerance(t.format) {
		return nil
	}
	rc := best.rc
	evidence = append(evidence, semantics.Candidate{Value: rc.label(params), Score: finite(best.score)})
	var shifts, places2 []semantics.Candidate
	for _, c := range all {
		if c.rc.sameBut(rc, "reversed") {
			shifts = append(shifts, semantics.Candidate{Value: c.rc.direction(), Score: finite(c.score)})
		}
		if c.rc.sameBut(rc, "places") {
			places2 = append(places2, semantics.Candidate{Value: c.rc.terms(), Score: finite(c.score)})
		}
	}
	ch := attnChoice{q: best.q, k: rc.k, v: rc.v, headDim: rc.d, params: exec.AttentionParams{Heads: width / rc.d, KVHeads: rc.k.shape[2] / rc.d},
		label: rc.label(params), score: best.score, result: best.result, bias: best.bias, rows: 0}
	if rc.unscaled {
		ch.params.Scale = 1
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: ch, scope: sc.module, boundary: t.origin, candidates: evidence})
	s.relShifts = append(s.relShifts, relShiftRecord{scope: sc.module, boundary: t.origin, direction: rc.direction(), terms: rc.terms(), shifts: shifts, placesTried: places2})
	return best.result
}

// relShiftChoice is one assignment of relShiftAttention's search.
type relShiftChoice struct {
	q, k, v, table    *val
	d                 int
	content, position int // the parameter added to q for each term (-1: none)
	reversed          bool
	unscaled          bool
}

// sameBut reports whether c and o differ at most in the named aspect.
func (c relShiftChoice) sameBut(o relShiftChoice, aspect string) bool {
	switch aspect {
	case "reversed":
		o.reversed = c.reversed
	case "places":
		o.content, o.position = c.content, c.position
	}
	return c == o
}

// direction names which column of the table's product query i reads
// for key j.
func (c relShiftChoice) direction() string {
	if c.reversed {
		return "query_minus_key"
	}
	return "key_minus_query"
}

// terms names which of the two terms adds a parameter to q (the
// factor's value): content_and_position, content, position, none, or
// shared (one parameter for both).
func (c relShiftChoice) terms() string {
	switch {
	case c.content >= 0 && c.content == c.position:
		return "shared"
	case c.content >= 0 && c.position >= 0:
		return "content_and_position"
	case c.content >= 0:
		return "content"
	case c.position >= 0:
		return "position"
	}
	return "none"
}

// places names the parameters added to q for the content and the
// position terms.
func (c relShiftChoice) places(params []*val) string {
	name := func(i int) string {
		if i < 0 {
			return "none"
		}
		return params[i].origin
	}
	return fmt.Sprintf("content+%s position+%s", name(c.content), name(c.position))
}

func (c relShiftChoice) label(params []*val) string {
	l := fmt.Sprintf("heads=%d kv=%d causal=false rope=none relative_shift=%s %s table=%s", c.q.shape[2]/c.d, c.k.shape[2]/c.d, c.direction(), c.places(params), c.table.origin)
	if c.unscaled {
		l += " scale=1"
	}
	return l
}

// relShiftOperands are the attention's queries (q plus the content
// bias) and its additive bias (the shifted position term, scaled as the
// content term is) for rc; nil where a step does not derive.
func (s *synth) relShiftOperands(rc relShiftChoice, params []*val) (*val, *val) {
	plus := func(i int) *val {
		if i < 0 {
			return rc.q
		}
		p := s.reshape(params[i], []int{rc.q.shape[2]})
		if p == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpAdd, args: []*val{rc.q, p}, out: rc.q.format, label: "queries plus a bias of their own"})
	}
	qc, qp := plus(rc.content), plus(rc.position)
	if qc == nil || qp == nil {
		return nil, nil
	}
	bd := s.relShifted(qp, rc.table, rc.d, rc.reversed)
	if bd == nil || rc.unscaled {
		return qc, bd
	}
	scaled := s.derive(&expr{op: program.OpMul, args: []*val{bd, s.constant(1 / math.Sqrt(float64(rc.d)))}, out: bd.format, label: "position term scaled as the content term"})
	return qc, scaled
}

// relShifted is the position term of relative attention, [B, H, S, S]:
// per head, q [B, S, H·D] times the table P [1 or B, 2S − 1, H·D]
// transposed, [S, 2S − 1] per batch entry and head, shifted so that
// query i reads column S − 1 − i + j for key j (reversed: P's rows taken
// last first, so column S − 1 + i − j). The shift is the reference's pad
// and view: each head's rows laid end to end, S − 1 entries skipped, the
// next S·(2S − 2) read as S rows of 2S − 2, and their first S columns
// kept. nil where the shapes do not fit.
func (s *synth) relShifted(q, table *val, d int, reversed bool) *val {
	b, n, width := q.shape[0], q.shape[1], q.shape[2]
	h, l := width/d, 2*n-1
	tb := table
	if len(tb.shape) == 2 {
		tb = s.reshape(tb, []int{1, tb.shape[0], tb.shape[1]})
	}
	if tb == nil || len(tb.shape) != 3 || tb.shape[1] != l || tb.shape[2] != width || (tb.shape[0] != 1 && tb.shape[0] != b) || n < 2 {
		return nil
	}
	pb := tb.shape[0]
	if reversed {
		// the rows last first: [L, pb·W] gathered at L − 1 … 0
		rows := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{tb}, out: tb.format, label: "table rows first"})
		rows = s.reshape(rows, []int{l, pb * width})
		idx := s.relConst(fmt.Sprintf("reversed%d", l), []int{l}, reversedRows(l), fmt.Sprintf("rows %d…0: a table of %d relative offsets read last first (made from the request's shape)", l-1, l))
		idx.intType = true
		rows = s.derive(&expr{op: program.OpGather, args: []*val{rows, idx}, out: tb.format, label: "table rows last first"})
		rows = s.reshape(rows, []int{l, pb, width})
		if rows == nil {
			return nil
		}
		tb = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{rows}, out: tb.format, label: "table batch first"})
		if tb == nil {
			return nil
		}
	}
	// per head: queries [G, M, D] times the table [G, D, L]
	qh := s.reshape(q, []int{b, n, h, d})
	ph := s.reshape(tb, []int{pb, l, h, d})
	if qh == nil || ph == nil {
		return nil
	}
	var lead []int // the product's leading axes, then rows and columns
	if pb == 1 {
		// one table for the batch: every batch entry's rows beside each
		// other per head, [H, B·S, D]
		qh = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1, 3}}, args: []*val{qh}, out: q.format, label: "queries per head"})
		qh = s.reshape(qh, []int{h, b * n, d})
		ph = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 3, 1}}, args: []*val{ph}, out: tb.format, label: "table per head, transposed"})
		ph = s.reshape(ph, []int{h, d, l})
		lead = []int{h, b}
	} else {
		qh = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{qh}, out: q.format, label: "queries per head"})
		ph = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 3, 1}}, args: []*val{ph}, out: tb.format, label: "table per head, transposed"})
		lead = []int{b, h}
	}
	if qh == nil || ph == nil {
		return nil
	}
	raw := s.derive(&expr{op: program.OpMatMul, args: []*val{qh, ph}, out: q.format, label: "queries times the offsets' rows"})
	// the shift: rows end to end, S − 1 skipped, S rows of 2S − 2 read
	flat := s.reshape(raw, slices.Concat(lead, []int{n * l}))
	if flat == nil {
		return nil
	}
	cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: n - 1, End: n - 1 + n*(l-1)}, args: []*val{flat}, out: q.format, label: "relative shift"})
	cut = s.reshape(cut, slices.Concat(lead, []int{n, l - 1}))
	if cut == nil {
		return nil
	}
	cut = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: n}, args: []*val{cut}, out: q.format, label: "a column per key"})
	if cut == nil || pb != 1 {
		return cut
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2, 3}}, args: []*val{cut}, out: q.format, label: "batch first"})
}

// reversedRows are the indices l − 1, …, 0.
func reversedRows(l int) []float32 {
	out := make([]float32, l)
	for i := range out {
		out[i] = float32(l - 1 - i)
	}
	return out
}

// rangeN is 0, …, n − 1.
func rangeN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// relOffsetTables are the scope's values with a row per relative offset
// of n places (2n − 1 rows) of width numbers, [1 or b, 2n − 1, width] or
// [2n − 1, width]: a table of offsets or its projection; at most three,
// the most recent first.
func relOffsetTables(sc *scope, b, n, width int) []*val {
	var out []*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || v.param || v.integral() || slices.Contains(out, v) {
			continue
		}
		k := len(v.shape)
		if (k == 3 && (v.shape[0] == 1 || v.shape[0] == b) || k == 2) && v.shape[k-2] == 2*n-1 && v.shape[k-1] == width {
			out = append(out, v)
		}
		if len(out) == 3 {
			break
		}
	}
	return out
}

// relBiasParams are the scope's parameters of width numbers, [width] or
// [H, D] with H·D = width (at most four, in scope order), and the head
// widths the [H, D] ones show.
func relBiasParams(sc *scope, width int) ([]*val, []int) {
	var ps []*val
	var dims []int
	for _, v := range sc.vals {
		if !v.param || v.numel() != width || len(v.shape) > 2 || slices.Contains(ps, v) {
			continue
		}
		if len(v.shape) == 2 {
			if d := v.shape[1]; v.shape[0] > 1 && !slices.Contains(dims, d) {
				dims = append(dims, d)
			}
		}
		if ps = append(ps, v); len(ps) == 4 {
			break
		}
	}
	return ps, dims
}

// relShiftRecord is what relShiftAttention found in one scope, for the
// document's factors.
type relShiftRecord struct {
	scope, boundary     string
	direction, terms    string
	shifts, placesTried []semantics.Candidate
}
