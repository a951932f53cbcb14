package synth

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// jointAttention explains t as one stream's rows of attention over two
// streams joined along the sequence (each stream with its own q, k and v,
// in either order), RoPE applied to the joined rows or to one stream's.
// The joined attention is computed once for both streams (joint cache).
func (s *synth) jointAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	width := t.shape[2]
	pool, fused := s.allOperands(sc, t)
	byRows := map[int][]*val{}
	for _, v := range pool {
		if !v.used && v.shape[2] == width {
			byRows[v.shape[1]] = append(byRows[v.shape[1]], v)
		}
	}
	// two streams of as many rows as each other (a caption as long as the
	// image's patches) share one group: told apart by the input each
	// operand was projected from, the most recent few of each source
	var sources [][]*val
	if len(byRows) == 1 {
		sources = bySource(byRows[t.shape[1]])
	}
	// the most recent few per stream: the triples grow as the cube
	for r, vs := range byRows {
		if len(vs) > maxJointOperands {
			byRows[r] = vs[:maxJointOperands]
		}
	}
	tables := s.ropeTables(sc)
	if len(sources) > 1 {
		var pairs []streamPair
		for i, a := range sources {
			for j, b := range sources {
				if i != j {
					pairs = append(pairs, streamPair{mine: a, theirs: b})
				}
			}
		}
		if v := s.jointOver(t, sc, pairs, tables, s.triplesOf); v != nil {
			return v
		}
	}
	if v := s.jointOver(t, sc, streamPairs(byRows, t.shape[1]), tables, s.triplesOf); v != nil {
		return v
	}
	// keys zeroed on the rows a 0/1 mask of the scope drops (an image
	// stream padded to a fixed length: its padding rows' keys × 0, their
	// values as projected, still in every softmax): once plain keys fail
	if masks := rowMasks(sc, t.shape[0]); len(masks) > 0 {
		if v := s.jointOver(t, sc, streamPairs(byRows, t.shape[1]), tables, s.maskedKeys(masks)); v != nil {
			return v
		}
	}
	// each stream's q, k and v cut from one fused projection [q|k|v]
	// (torch's chunk(3): three contiguous slices; q and k normalised after
	// the cut by modules of their own, or read as cut): tried once the
	// separate projections fail
	withFused := map[int][]*val{}
	var parts [][3]*val
	for _, f := range fused {
		if f[2] == nil || f[2].shape[2] != width || f[2].from == nil || f[2].from.op != program.OpSlice {
			continue
		}
		parts = append(parts, f)
		withFused[f[2].shape[1]] = append(withFused[f[2].shape[1]], f[2])
	}
	if len(parts) == 0 {
		return nil
	}
	for r, vs := range byRows {
		withFused[r] = append(withFused[r], vs...)
	}
	triples := func(vs []*val) [][3]*val {
		var out [][3]*val
		for _, f := range parts {
			if !slices.Contains(vs, f[2]) {
				continue
			}
			qs := append([]*val{f[0]}, byRows[f[2].shape[1]]...)
			ks := append([]*val{f[1]}, byRows[f[2].shape[1]]...)
			for _, q := range qs {
				for _, k := range ks {
					if q != k {
						out = append(out, [3]*val{q, k, f[2]})
					}
				}
			}
		}
		return out
	}
	return s.jointOver(t, sc, streamPairs(withFused, t.shape[1]), tables, triples)
}

// streamPair is one pairing of a joint attention's streams: the operands
// of the stream scored and those of the other; same where both are one
// group of as many rows (each stream's triple from operands the other's
// does not use).
type streamPair struct {
	mine, theirs []*val
	same         bool
}

// streamPairs pairs the operands of rows rows with those of each other
// row count, or, where they are the only group, with themselves.
func streamPairs(byRows map[int][]*val, rows int) []streamPair {
	var out []streamPair
	for _, other := range slices.Sorted(maps.Keys(byRows)) {
		same := other == rows
		if same && len(byRows) > 1 {
			continue
		}
		out = append(out, streamPair{mine: byRows[rows], theirs: byRows[other], same: same})
	}
	return out
}

// bySource splits operands by the input their projection read (through
// per-row ops: a q normalised, rotated, reshaped after its projection),
// keeping the most recent maxJointOperands of each source; operands no
// projection made are left out.
func bySource(vs []*val) [][]*val {
	var srcs []*val
	var out [][]*val
	for _, v := range vs {
		src := streamSource(v)
		if src == nil {
			continue
		}
		i := slices.IndexFunc(srcs, func(x *val) bool { return sameEntries(x, src) })
		if i < 0 {
			srcs, out = append(srcs, src), append(out, nil)
			i = len(out) - 1
		}
		if len(out[i]) < maxJointOperands {
			out[i] = append(out[i], v)
		}
	}
	return out
}

// streamSource is the input of the projection that made v, followed back
// through the ops that keep its rows (norms, RoPE, moves); nil where none.
func streamSource(v *val) *val {
	for depth := 0; v != nil && depth < 16; depth++ {
		if src := projectedFrom(v); src != nil {
			return src
		}
		u := through(v)
		if u == nil || u.from == nil || len(u.from.args) == 0 || u.from.args[0] == nil || len(u.from.args[0].shape) < 2 || len(u.shape) < 2 || u.from.args[0].shape[1] != u.shape[1] {
			return nil
		}
		v = u.from.args[0]
	}
	return nil
}

// jointOver is jointAttention's search over the streams' operands (by
// their rows) and the triples one stream's operands give.
func (s *synth) jointOver(t *val, sc *scope, pairs []streamPair, tables [][2]*val, triplesOf func([]*val) [][3]*val) *val {
	rows := t.shape[1]
	// the best, and the best with the text rows first
	var best, textFirst *jointChoice
	var evidence []semantics.Candidate
	for _, sp := range pairs {
		theirs, same := sp.theirs, sp.same
		for _, a := range triplesOf(sp.mine) {
			pool := theirs
			if same {
				pool = slices.DeleteFunc(slices.Clone(theirs), func(v *val) bool { return slices.Contains(a[:], v) })
			}
			for _, b := range triplesOf(pool) {
				for _, mineFirst := range []bool{true, false} {
					first, second := a, b
					if !mineFirst {
						first, second = b, a
					}
					for _, d := range headDims(tables, t.shape[2]) {
						for _, rope := range jointRopes(tables, first[0].shape[1], second[0].shape[1]) {
							ch := s.tryJoint(t, sc, first, second, mineFirst, d, rope)
							if ch == nil {
								continue
							}
							evidence = append(evidence, semantics.Candidate{Value: ch.label, Score: finite(ch.score)})
							if best == nil || ch.score < best.score {
								best = ch
							}
							if s.jointOrder(ch.mineFirst, rows, ch.otherRows, false) == "text_first" && (textFirst == nil || ch.score < textFirst.score) {
								textFirst = ch
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
	// orders the trace cannot tell apart (both within tolerance, neither
	// decisively better) take the catalogue's first, text_first, as the
	// recipes do: the choice then does not depend on rounding noise
	if textFirst != nil && textFirst != best && textFirst.score <= tolerance(t.format) && textFirst.score < 2*best.score {
		best = textFirst
	}
	order := s.jointOrder(best.mineFirst, rows, best.otherRows, true)
	if best.otherRows == rows || !s.patchesDecide(rows, best.otherRows) {
		// streams of as many rows, or neither of the patches' count (an
		// image padded to a fixed length): the image's is the one made
		// from the latents, where exactly one is
		if mi, ti := s.madeFromLatents(best.mine), s.madeFromLatents(best.theirs); mi != ti {
			order = "text_first"
			if best.mineFirst == mi {
				order = "image_first"
			}
		}
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: best.attnChoice, scope: sc.module, boundary: t.origin, candidates: evidence, joint: order})
	return best.result
}

// jointOrder names the order of a joint sequence whose scored stream
// (rows its own, otherRows the other stream's) comes first or not. The
// image stream is the one whose rows are the latents' patches, where
// exactly one of them is. Else the text is taken as the stream of fewer
// rows (a caption is usually shorter than the image it describes; a long
// prompt over a small image is not, which is why the patches decide
// first); two streams of equal rows are named as before the patches
// decided: text first when the other stream leads (tie), image first when
// it does (label), so the documents of such traces do not change.
func (s *synth) jointOrder(mineFirst bool, rows, otherRows int, label bool) string {
	text := mineFirst == (rows < otherRows)
	if s.patchesDecide(rows, otherRows) {
		text = mineFirst != (rows == s.patchRows)
	} else if rows == otherRows && label {
		text = mineFirst
	}
	if text {
		return "text_first"
	}
	return "image_first"
}

// patchesDecide reports whether exactly one of two streams has as many
// rows as the latents have patches (which names it the image's).
func (s *synth) patchesDecide(rows, otherRows int) bool {
	return s.patchRows > 0 && (rows == s.patchRows) != (otherRows == s.patchRows)
}

// maxJointOperands bounds each stream's operands of a joint attention.
const maxJointOperands = 6

// jointChoice is one assignment of the joint attention search.
type jointChoice struct {
	attnChoice
	mineFirst bool
	otherRows int
	// mine and theirs are the streams' queries as the scope held them,
	// before any join or rotation (which is the image's, where the rows
	// cannot tell)
	mine, theirs *val
}

// jointRope is where RoPE goes in a joined sequence: nowhere, on the
// joined rows, or on the first or second stream's rows only.
type jointRope struct {
	layout exec.RopeLayout // 0: none
	tb     [2]*val
	part   int     // 0: joined rows, 1: first stream, 2: second stream, 3: each its own (tb, tb2)
	tb2    [2]*val // the second stream's tables (part 3)
}

func jointRopes(tables [][2]*val, r1, r2 int) []jointRope {
	out := []jointRope{{}}
	for _, tb := range tables {
		n := tableRows(tb[0])
		for _, l := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
			switch n {
			case r1 + r2:
				out = append(out, jointRope{layout: l, tb: tb})
			case r1:
				out = append(out, jointRope{layout: l, tb: tb, part: 1})
				for _, tb2 := range tables {
					if tb2 != tb && tableRows(tb2[0]) == r2 {
						out = append(out, jointRope{layout: l, tb: tb, tb2: tb2, part: 3})
					}
				}
			case r2:
				out = append(out, jointRope{layout: l, tb: tb, part: 2})
			}
		}
	}
	return out
}

// headDims are the head widths to try: the RoPE tables' widths, then the
// powers of two that divide the width.
func headDims(tables [][2]*val, width int) []int {
	var out []int
	for _, tb := range tables {
		if d := tb[0].shape[len(tb[0].shape)-1]; width%d == 0 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for d := minHeadDim; d <= maxHeadDim && d <= width; d *= 2 {
		if width%d == 0 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// triplesOf lists the ordered (q, k, v) triples of distinct values, v
// a projection's result as it came (values are not normalised or rotated
// before attention reads them).
func (s *synth) triplesOf(vs []*val) [][3]*val {
	var out [][3]*val
	for _, q := range vs {
		for _, k := range vs {
			for _, v := range vs {
				if q != k && q != v && k != v && through(v).fit != nil && through(v).fit.kind == "linear" {
					out = append(out, [3]*val{q, k, v})
				}
			}
		}
	}
	return out
}

// tryJoint scores one joint assignment: the streams' q, k, v joined,
// rotated as rope says, attention over the joined rows, t's rows cut out.
func (s *synth) tryJoint(t *val, sc *scope, first, second [3]*val, mineFirst bool, d int, rope jointRope) *jointChoice {
	heads := t.shape[2] / d
	r1 := first[0].shape[1]
	join := func(a, b *val) *val {
		if a == nil || b == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{a, b}, out: a.format, label: "joint"})
	}
	rot := func(x *val) *val {
		if rope.layout == 0 {
			return x
		}
		return s.rotate(x, rope.tb, rope.layout, heads, d)
	}
	rot2 := func(x *val) *val { return s.rotate(x, rope.tb2, rope.layout, heads, d) }
	var q, k *val
	switch rope.part {
	case 0:
		q, k = rot(join(first[0], second[0])), rot(join(first[1], second[1]))
	case 1:
		q, k = join(rot(first[0]), second[0]), join(rot(first[1]), second[1])
	case 2:
		q, k = join(first[0], rot(second[0])), join(first[1], rot(second[1]))
	case 3:
		q, k = join(rot(first[0]), rot2(second[0])), join(rot(first[1]), rot2(second[1]))
	}
	v := join(first[2], second[2])
	if q == nil || k == nil || v == nil {
		return nil
	}
	p := exec.AttentionParams{Heads: heads, KVHeads: heads}
	// without a bias, or with each the scope holds over the joined rows
	// (a mask added to the scores), as given or before the scale
	var best *jointChoice
	for _, bias := range append([]*val{nil}, s.withScaled(s.scoreBiases(sc, q, k), d)...) {
		ch := s.jointWith(t, q, k, v, nil, bias, p, mineFirst, r1)
		if ch == nil {
			continue
		}
		ch.headDim, ch.rope = d, rope.layout
		ch.otherRows = first[0].shape[1] + second[0].shape[1] - t.shape[1]
		ch.label = fmt.Sprintf("heads=%d causal=false rope=%s mine_first=%v bias=%v", heads, ropeName(rope.layout), mineFirst, bias != nil)
		if best == nil || ch.score < best.score {
			best = ch
		}
		if best.score <= tolerance(t.format) {
			break
		}
	}
	if best == nil || best.score > tolerance(t.format) {
		// a 0/1 key mask over the joined rows (a caption's padding
		// joined with ones for the image), or over one stream's rows
		// joined with ones for the other's: tried where no bias holds
		masks := append(s.keyMasks(sc, q, k), s.joinedMasks(sc, q.shape[0], [2]int{r1, second[0].shape[1]})...)
		for _, m := range masks {
			ch := s.jointWith(t, q, k, v, m, nil, p, mineFirst, r1)
			if ch == nil {
				continue
			}
			label := "key_mask=true"
			if ch.score > tolerance(t.format) {
				// the masked queries' rows zeroed: attention over the
				// valid tokens only, its result padded back with zeros
				if z := s.maskedRowsZeroed(t, ch, m, mineFirst, r1); z != nil {
					ch, label = z, "key_mask=true masked_rows_zero=true"
				}
			}
			ch.headDim, ch.rope = d, rope.layout
			ch.otherRows = first[0].shape[1] + second[0].shape[1] - t.shape[1]
			ch.label = fmt.Sprintf("heads=%d causal=false rope=%s mine_first=%v %s", heads, ropeName(rope.layout), mineFirst, label)
			if best == nil || ch.score < best.score {
				best = ch
			}
			if best.score <= tolerance(t.format) {
				break
			}
		}
	}
	if best != nil {
		best.mine, best.theirs = first[0], second[0]
		if !mineFirst {
			best.mine, best.theirs = second[0], first[0]
		}
	}
	return best
}

// maskedRowsZeroed is ch's result with the rows of t's stream whose keys
// the mask m [B, 1, Sk] drops set to zero (their queries attend nowhere:
// the attention runs over the valid tokens only and pads its result back
// with zeros); nil unless that reproduces t better.
func (s *synth) maskedRowsZeroed(t *val, ch *jointChoice, m *val, mineFirst bool, r1 int) *jointChoice {
	start := 0
	if !mineFirst {
		start = r1
	}
	b, n := t.shape[0], t.shape[1]
	rows := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: start, End: start + n}, args: []*val{m}, out: m.format, label: "queries' mask"})
	rows = s.reshape(rows, []int{b, n, 1})
	if rows == nil || allOnes(rows) {
		return nil
	}
	f := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{rows}, out: t.format})
	z := s.derive(&expr{op: program.OpMul, args: []*val{ch.result, f}, out: t.format, label: "masked rows zeroed"})
	if z == nil {
		return nil
	}
	sc := relRMS(t.format, z.data, t.data)
	if math.IsNaN(sc) || sc >= ch.score {
		return nil
	}
	out := *ch
	out.result, out.score = z, sc
	return &out
}

// jointWith runs one joint attention (memoised by its operands and the
// rows asked for) and scores this stream's rows of it: under a 0/1 key
// mask where mask is not nil, else with the bias (or none). Only this
// stream's query rows are computed (each row's attention reads its own
// query alone): a caption of 32 rows beside 512 image rows costs 32 rows'
// work, not 544.
func (s *synth) jointWith(t, q, k, v, mask, bias *val, p exec.AttentionParams, mineFirst bool, r1 int) *jointChoice {
	var bf *expr
	if bias != nil {
		bf = bias.from
	}
	if mask != nil {
		p.Mask = exec.MaskExplicit
	}
	start := 0
	if !mineFirst {
		start = r1
	}
	if sc, ok := s.screenJoint(t, q, k, v, mask, bias, p, start); ok && sc > jointScreenFactor*tolerance(t.format) {
		// far off on the sampled rows: scored there alone (no result)
		return &jointChoice{attnChoice: attnChoice{q: q, k: k, v: v, params: p, score: sc, bias: bias}, mineFirst: mineFirst}
	}
	key := fmt.Sprintf("%p %p %p %p %p %p %v %d", q.from, k.from, v.from, mask, bias, bf, p, start)
	out, ok := s.joint[key]
	if !ok {
		out = s.attentionRows(q, k, v, mask, bias, p, t.format, start, t.shape[1])
		if out == nil {
			return nil
		}
		s.joint[key] = out
	}
	sc := relRMS(t.format, out.data, t.data)
	if math.IsNaN(sc) {
		return nil
	}
	return &jointChoice{attnChoice: attnChoice{q: q, k: k, v: v, params: p, score: sc, result: out, bias: bias}, mineFirst: mineFirst}
}

// A joint attention of at least jointScreenRows rows is screened on
// jointScreen of them, evenly spaced, before its whole result is
// computed: a candidate missing there by more than jointScreenFactor
// tolerances keeps the sampled rows' score as its evidence (of hundreds
// of operand triples, orders and head widths, one is right).
const (
	jointScreenRows   = 128
	jointScreen       = 32
	jointScreenFactor = 16
)

// screenJoint scores the joint attention's rows [start, start+n) (n =
// t's rows) at jointScreen of them, the queries and any per-query axis of
// mask or bias gathered on the host; with a key mask, also with the rows
// it drops zeroed (maskedRowsZeroed), the lower score kept. ok is false
// for targets too short to screen or where the sample cannot be run.
func (s *synth) screenJoint(t, q, k, v, mask, bias *val, p exec.AttentionParams, start int) (float64, bool) {
	n := t.shape[1]
	if n < jointScreenRows || len(q.shape) != 3 || len(t.shape) != 3 || q.shape[1] < start+n {
		return 0, false
	}
	rel := make([]int, jointScreen)
	abs := make([]int, jointScreen)
	for i := range rel {
		rel[i] = i * n / jointScreen
		abs[i] = start + rel[i]
	}
	per := func(x *val) *val { // x's per-query axis gathered, if it has one
		if x == nil || len(x.shape) < 2 || x.shape[len(x.shape)-2] != q.shape[1] {
			return x
		}
		return takeRows(x, len(x.shape)-2, abs)
	}
	e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{takeRows(q, 1, abs), k, v, per(mask), per(bias)}, out: t.format}
	y, err := s.ev.run(e)
	want := takeRows(t, 1, rel)
	if err != nil || y.numel() != want.numel() {
		return 0, false
	}
	sc := relRMS(t.format, y.data, want.data)
	if mask != nil && len(mask.shape) == 3 && mask.shape[1] == 1 && mask.shape[0] == t.shape[0] {
		z := slices.Clone(y.data)
		sk, w := mask.shape[2], t.shape[2]
		for b := range t.shape[0] {
			for i, r := range abs {
				if r < sk && mask.data[b*sk+r] == 0 {
					clear(z[(b*jointScreen+i)*w:][:w])
				}
			}
		}
		sc = min(sc, relRMS(t.format, z, want.data))
	}
	if math.IsNaN(sc) {
		return 0, false
	}
	return sc, true
}

// takeRows is x with only the given indices of one axis, in their order
// (a host copy: a screen, not a value of the program).
func takeRows(x *val, axis int, idx []int) *val {
	outer, inner := 1, 1
	for _, d := range x.shape[:axis] {
		outer *= d
	}
	for _, d := range x.shape[axis+1:] {
		inner *= d
	}
	n := x.shape[axis]
	data := make([]float32, 0, outer*len(idx)*inner)
	for o := range outer {
		for _, r := range idx {
			data = append(data, x.data[(o*n+r)*inner:][:inner]...)
		}
	}
	shape := slices.Clone(x.shape)
	shape[axis] = len(idx)
	return &val{shape: shape, data: data, format: x.format}
}

// attentionRows is rows [start, start+n) of attention(q, k, v, mask,
// bias): the queries, and a mask's or bias's query axis where it has one
// of q's length, sliced first; nil where the attention fails.
func (s *synth) attentionRows(q, k, v, mask, bias *val, p exec.AttentionParams, f precision.Format, start, n int) *val {
	rows := func(x *val, axis int) *val {
		if x == nil || start == 0 && n == q.shape[1] || axis < 0 || x.shape[axis] != q.shape[1] || q.shape[1] == 1 {
			return x
		}
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: axis, Start: start, End: start + n}, args: []*val{x}, out: x.format, label: "stream rows"})
	}
	qs := rows(q, 1)
	var ms, bs *val
	if mask != nil {
		ms = rows(mask, len(mask.shape)-2)
	}
	if bias != nil {
		bs = rows(bias, len(bias.shape)-2)
	}
	if qs == nil || mask != nil && ms == nil || bias != nil && bs == nil {
		return nil
	}
	out := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{qs, k, v, ms, bs}, out: f})
	if out == nil || out.shape[1] != n {
		return nil
	}
	return out
}

func ropeName(l exec.RopeLayout) string {
	if l == 0 {
		return "none"
	}
	return l.String()
}

// madeFromLatents reports whether v is computed from the loop's latents
// through a chain of expressions that passes no attention (the image
// stream's values are, through their residuals, in every block; a
// caption's reach the latents only through a joint attention, which
// mixes the streams).
func (s *synth) madeFromLatents(v *val) bool {
	if s.latents == nil || v == nil {
		return false
	}
	seen := map[*val]bool{}
	var walk func(*val) bool
	walk = func(x *val) bool {
		if x == nil || seen[x] {
			return false
		}
		seen[x] = true
		if x == s.latents {
			return true
		}
		if x.from == nil || x.from.op == program.OpAttention {
			return false
		}
		return slices.ContainsFunc(x.from.args, walk)
	}
	return walk(v)
}

// rowMasks are the scope's 0/1 row masks of b samples, [b, S] or [b, S,
// 1], that drop some row.
func rowMasks(sc *scope, b int) []*val {
	var out []*val
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || v.shape[0] != b || (n != 2 && (n != 3 || v.shape[2] != 1)) || allOnes(v) || !zeroOne(v) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// maskedKeys is triplesOf with each k times a row mask of as many rows
// (maskKeys); a stream no mask has as many rows as keeps its triples.
func (s *synth) maskedKeys(masks []*val) func([]*val) [][3]*val {
	return func(vs []*val) [][3]*val {
		plain := s.triplesOf(vs)
		if out := s.maskKeys(masks, plain); len(out) > 0 {
			return out
		}
		return plain
	}
}

// maskKeys is each triple with its k times each row mask of as many rows
// as k, k·m[.., None] (none where no mask fits).
func (s *synth) maskKeys(masks []*val, triples [][3]*val) [][3]*val {
	var out [][3]*val
	for _, tr := range triples {
		k := tr[1]
		for _, m := range masks {
			if len(k.shape) != 3 || m.shape[1] != k.shape[1] {
				continue
			}
			col := s.reshape(m, []int{m.shape[0], m.shape[1], 1})
			if col != nil && m.format != k.format {
				col = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: k.format}, args: []*val{col}, out: k.format})
			}
			if col == nil {
				continue
			}
			if mk := s.derive(&expr{op: program.OpMul, args: []*val{k, col}, out: k.format, label: "keys masked"}); mk != nil {
				out = append(out, [3]*val{tr[0], mk, tr[2]})
			}
		}
	}
	return out
}
