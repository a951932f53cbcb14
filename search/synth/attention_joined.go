package synth

import (
	"iter"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// Attention of one stream's rows over keys and values joined from two
// streams along the rows: the queried stream brings q, k and v, the other
// only k and v (it is not updated by the block: its rows are never
// queried). The triples are tried by attention's wide scan, where a RoPE
// table of q's rows rotates q and the joined keys' rows of q's stream, and
// a key mask of one stream's keys is joined with ones for the other's.

// maxJoinedTriples bounds the joined triples one target tries: the pieces
// multiply (q·k·v of one stream times k·v of the other).
const maxJoinedTriples = 96

// joinedKeysLabel marks the concat that joins two streams' keys; the
// choice reads the pieces' rows off it (joinedParts).
const joinedKeysLabel = "keys joined"

// joinedKV are the (q, k, v) triples of attention of t's rows over keys
// and values joined from two streams: q and the queried stream's k from
// the scope's values of t's rows (pool values, or a fused projection's
// first two cuts), its v a projection's result or a fused projection's
// third cut; the other stream's k and v from values of other rows, v a
// projection's result or the second half of a fused [k|v] projection, k
// a value of those rows or that projection's first half. Both orders.
func (s *synth) joinedKV(sc *scope, t *val) [][3]*val {
	rows, width := t.shape[1], t.shape[2]
	pool, fused := s.allOperands(sc, t)
	var qs, ks, vs []*val
	for _, v := range pool {
		if v.shape[1] != rows || !kvWidth(v.shape[2], width) {
			continue
		}
		if v.shape[2] == width {
			qs = append(qs, v)
		}
		ks = append(ks, v)
		if linearResult(v) {
			vs = append(vs, v)
		}
	}
	for _, f := range fused {
		if f[2].shape[1] == rows && f[2].shape[2] == width {
			vs = append(vs, f[2])
		}
	}
	var mine [][3]*val
	for _, q := range qs {
		for _, k := range ks {
			for _, v := range vs {
				if q != k && q != v && k != v && k.shape[2] == v.shape[2] {
					mine = append(mine, [3]*val{q, k, v})
				}
			}
		}
	}
	theirs := s.otherKV(sc, t, pool)
	alike := len(theirs)
	theirs = append(theirs, s.sameRowsKV(sc, t, pool)...)
	var out [][3]*val
	for _, m := range mine {
		for i, o := range theirs {
			if o[0].shape[2] != m[1].shape[2] || o[1].shape[2] != m[2].shape[2] {
				continue
			}
			if i >= alike && !otherSource(m, o) {
				// rows as many as the queried stream's: only a pair
				// projected from another input than q, k and v
				continue
			}
			// one order only, the stream of fewer rows first: softmax over
			// the keys does not depend on their order (the mask and RoPE
			// follow the keys), so the other order is the same result
			a, b := o, [2]*val{m[1], m[2]}
			if o[0].shape[1] > rows {
				a, b = b, a
			}
			k := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{a[0], b[0]}, out: a[0].format, label: joinedKeysLabel})
			v := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{a[1], b[1]}, out: a[1].format, label: "values joined"})
			if k != nil && v != nil {
				out = append(out, [3]*val{m[0], k, v})
			}
			if len(out) == maxJoinedTriples {
				return out
			}
		}
	}
	return out
}

// mayJoin reports, before anything is derived, whether t [B, S, W] may be
// attention over keys joined from two streams: the scope made values of
// other rows that could be another stream's k or v (width W or that of
// fewer heads, or a fused 2·W, or per head [B, H, S', D] with H·D so).
func mayJoin(t *val, sc *scope) bool {
	if len(t.shape) != 3 {
		return false
	}
	b, rows, w := t.shape[0], t.shape[1], t.shape[2]
	for _, v := range sc.vals {
		if !sc.own[v] || v.opaque || len(v.shape) == 0 || v.shape[0] != b {
			continue
		}
		switch len(v.shape) {
		case 3:
			if v.shape[1] != rows && (kvWidth(v.shape[2], w) || v.shape[2] == 2*w) {
				return true
			}
			if v.shape[1] == rows && (kvWidth(v.shape[2], w) || v.shape[2] == 2*w) && otherProjection(v, sc) {
				return true
			}
		case 4:
			if v.shape[2] != rows && kvWidth(v.shape[1]*v.shape[3], w) {
				return true
			}
		}
	}
	return false
}

// otherProjection reports whether the scope made a projection of v's
// rows from another input than v's: another stream of as many rows.
func otherProjection(v *val, sc *scope) bool {
	src := projectedFrom(v)
	if src == nil {
		return false
	}
	for _, u := range sc.vals {
		if sc.own[u] && u != v && len(u.shape) == 3 && u.shape[0] == v.shape[0] && u.shape[1] == v.shape[1] {
			if o := projectedFrom(u); o != nil && !sameEntries(o, src) {
				return true
			}
		}
	}
	return false
}

// otherKV are the (k, v) pairs of another stream (rows other than t's, the
// queried stream's width): each fused [k|v] projection's halves, in blocks
// or per head; a v of those rows from a projection with each k of those
// rows the scope made (a k normalised after the split).
func (s *synth) otherKV(sc *scope, t *val, pool []*val) [][2]*val {
	rows, width := t.shape[1], t.shape[2]
	var ks, vs []*val
	var pairs [][2]*val
	for _, v := range pool {
		if v.shape[1] != rows && kvWidth(v.shape[2], width) {
			ks = append(ks, v)
			if linearResult(v) {
				vs = append(vs, v)
			}
		}
	}
	for _, x := range recentFirst(sc.vals) {
		if !sc.own[x] || x.opaque || len(x.shape) != 3 || x.shape[0] != t.shape[0] || x.shape[1] == rows || x.shape[2] != 2*width {
			continue
		}
		for _, h := range s.halves(x, width) {
			pairs = append(pairs, h)
			vs = append(vs, h[1])
		}
	}
	for _, v := range vs {
		for _, k := range ks {
			if k != v && k.shape[1] == v.shape[1] && k.shape[2] == v.shape[2] {
				pairs = append(pairs, [2]*val{k, v})
			}
		}
	}
	// the other stream's keys rotated by a table of their own rows (each
	// stream's RoPE applied before the join): each pair again with its k
	// so rotated, heads as wide as the table
	n := len(pairs)
	for _, tb := range s.ropeTables(sc) {
		tw := tb[0].shape[len(tb[0].shape)-1]
		for _, p := range pairs[:n] {
			k := p[0]
			if tableRows(tb[0]) != k.shape[1] || tw%2 != 0 || k.shape[2]%tw != 0 {
				continue
			}
			for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
				if rk := s.rotate(k, tb, layout, k.shape[2]/tw, tw); rk != nil {
					pairs = append(pairs, [2]*val{rk, p[1]})
				}
			}
		}
	}
	return pairs
}

// sameRowsKV are the (k, v) pairs of another stream that happens to have
// as many rows as t (a caption of 16 tokens beside a map of 4×4 cells):
// two projections' results of t's rows and width made from one input,
// in both orders; and each fused [k|v] projection of t's rows cut in
// halves, its v half also paired with each value of its k half's shape
// made from that projection (a k normalised after the split). joinedKV
// keeps those whose input is not the queried stream's.
func (s *synth) sameRowsKV(sc *scope, t *val, pool []*val) [][2]*val {
	rows, width := t.shape[1], t.shape[2]
	var ps []*val
	for _, v := range pool {
		if v.shape[1] == rows && kvWidth(v.shape[2], width) && projectedFrom(v) != nil {
			ps = append(ps, v)
		}
	}
	var pairs [][2]*val
	for _, k := range ps {
		for _, v := range ps {
			if k != v && slices.Equal(k.shape, v.shape) && sameEntries(projectedFrom(k), projectedFrom(v)) {
				pairs = append(pairs, [2]*val{k, v})
			}
		}
	}
	for _, x := range recentFirst(sc.vals) {
		if !sc.own[x] || x.opaque || len(x.shape) != 3 || x.shape[0] != t.shape[0] || x.shape[1] != rows || x.shape[2] != 2*width || !linearResult(x) {
			continue
		}
		for _, h := range s.halves(x, width) {
			pairs = append(pairs, h)
			for _, k := range pool {
				if k != h[0] && slices.Equal(k.shape, h[0].shape) && madeFrom(k, x) {
					pairs = append(pairs, [2]*val{k, h[1]})
				}
			}
		}
	}
	return pairs
}

// madeFrom reports whether v is x or is made from x through a chain of
// first arguments (a cut, a move, a norm) of a few links.
func madeFrom(v, x *val) bool {
	for u := range firstArgs(v) {
		if u == x || sameEntries(u, x) {
			return true
		}
	}
	return false
}

// firstArgs yields v and the values it is made from through its first
// arguments, at most eight.
func firstArgs(v *val) iter.Seq[*val] {
	return func(yield func(*val) bool) {
		for range 8 {
			if v == nil || !yield(v) || v.from == nil || len(v.from.args) == 0 {
				return
			}
			v = v.from.args[0]
		}
	}
}

// otherSource reports whether the pair o's v is projected from one input
// and the triple m's k and v (and q, where it is a projection's) from
// another, the same for all (each through the cuts, moves and norms after
// its projection).
func otherSource(m [3]*val, o [2]*val) bool {
	mk, mv, ov := sourceOf(m[1]), sourceOf(m[2]), sourceOf(o[1])
	if mq := sourceOf(m[0]); mq != nil && !sameEntries(mq, mk) {
		return false
	}
	return mk != nil && mv != nil && ov != nil && sameEntries(mk, mv) && !sameEntries(mk, ov)
}

// sourceOf is the input of the projection v is made from through a chain
// of first arguments (a cut of a fused projection, a norm after it), nil
// where none is within a few links.
func sourceOf(v *val) *val {
	for u := range firstArgs(v) {
		if src := projectedFrom(u); src != nil {
			return src
		}
	}
	return nil
}

// projectedFrom is the input of the projection that made v (moved or
// not), nil where no linear did.
func projectedFrom(v *val) *val {
	u := through(v)
	if u == nil || u.fit == nil || u.fit.kind != "linear" || u.from == nil || len(u.from.args) == 0 {
		return nil
	}
	return through(u.from.args[0])
}

// sameEntries reports whether a and b hold the same entries in the same
// shape (two explanations of one boundary are distinct values).
func sameEntries(a, b *val) bool {
	return a == b || a != nil && b != nil && slices.Equal(a.shape, b.shape) && slices.Equal(a.data, b.data)
}

// kvWidth reports whether keys or values w wide may serve queries width
// wide: as wide, or the width of fewer heads (grouped-query attention).
func kvWidth(w, width int) bool { return w == width || w < width && width%w == 0 }

// halves cuts x [B, S, 2·W] into k and v: two blocks of W, or per head
// [k v] of every head width that divides W.
func (s *synth) halves(x *val, w int) [][2]*val {
	b, n := x.shape[0], x.shape[1]
	cut := func(v *val, ax, a, e int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: a, End: e}, args: []*val{v}, out: x.format})
	}
	out := [][2]*val{{cut(x, 2, 0, w), cut(x, 2, w, 2*w)}}
	for d := minHeadDim; d <= maxHeadDim && d < w; d *= 2 {
		if w%d != 0 {
			continue
		}
		g := s.reshape(x, []int{b, n, w / d, 2, d})
		if g == nil {
			continue
		}
		out = append(out, [2]*val{s.reshape(cut(g, 3, 0, 1), []int{b, n, w}), s.reshape(cut(g, 3, 1, 2), []int{b, n, w})})
	}
	return slices.DeleteFunc(out, func(p [2]*val) bool { return p[0] == nil || p[1] == nil })
}

// linearResult reports whether v is a projection's result, moved or not
// (attention reads v as the projection made it).
func linearResult(v *val) bool {
	f := through(v).fit
	return f != nil && f.kind == "linear"
}

// joinedParts are the rows of the two streams' pieces of joined keys k
// (made by joinedKV), or zeros.
func joinedParts(k *val) [2]int {
	if k == nil || k.from == nil || k.from.label != joinedKeysLabel || len(k.from.args) != 2 {
		return [2]int{}
	}
	return [2]int{k.from.args[0].shape[1], k.from.args[1].shape[1]}
}

// joinedOrder is the joint_order factor of attention over joined keys:
// the catalogue's first, text_first (the stream of fewer rows first, as
// joinedKV joins them), never decisive: the queried rows' result does not
// depend on the keys' order, so the trace cannot tell the orders apart.
func joinedOrder(a attnRecord) semantics.Factor {
	return semantics.Factor{Name: "joint_order", Scope: a.scope, Value: "text_first", Margin: 1,
		Candidates: []semantics.Candidate{{Value: "text_first", Score: a.choice.score}, {Value: "image_first", Score: a.choice.score}},
		Evidence: semantics.Evidence{Boundary: a.boundary, Metric: "rel_rms",
			Note: "keys and values joined from two streams, one stream queried: softmax over the keys does not depend on their order (the mask and RoPE follow them); the catalogue's first"}}
}

// joinedMasks are the scope's key-padding masks of one piece of joined
// keys (0/1, one entry per key of that piece and batch row), each joined
// with ones for the other piece's keys, laid out [B, 1, Sk].
func (s *synth) joinedMasks(sc *scope, b int, parts [2]int) []*val {
	if parts[0] == 0 {
		return nil
	}
	var out []*val
	for i, n := range parts {
		for _, v := range sc.vals {
			if v.opaque || !v.integral() || allOnes(v) || v.numel() != b*n || v.shape[len(v.shape)-1] != n || !zeroOne(v) {
				continue
			}
			m, ones := s.reshape(v, []int{b, 1, n}), s.ones(b, parts[1-i])
			if m == nil || ones == nil {
				continue
			}
			args := []*val{m, ones}
			if i == 1 {
				args = []*val{ones, m}
			}
			if j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: args, out: v.format, label: "key mask joined with ones"}); j != nil {
				out = append(out, j)
			}
			if len(out) == 2 {
				return out
			}
		}
	}
	return out
}

// ones is a [b, 1, n] mask of ones (every key attends).
func (s *synth) ones(b, n int) *val {
	one := s.reshape(s.constant(1), []int{1, 1, 1})
	if one == nil {
		return nil
	}
	row := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: 2}, args: []*val{one}, out: one.format, label: "ones"})
	if row == nil || b == 1 {
		return row
	}
	return s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: b, Axis: 0}, args: []*val{row}, out: row.format, label: "ones"})
}

// maxValuesJoined bounds the triples valuesJoined makes.
const maxValuesJoined = 16

// valuesJoined are triples (q, k, v) whose q and k are operands of the
// pool over a joined sequence of R rows while v is joined from two linear
// projections of the scope whose rows add up to R, in either order: each
// stream's value projection, then one attention over both streams' rows
// (a block whose q and k norms are calls over the joined rows and whose v
// is never captured joined). width is the attention's.
func (s *synth) valuesJoined(sc *scope, pool []*val, width int) [][3]*val {
	var own []*val // the projections' results, each stream's v
	for _, v := range recentFirst(sc.vals) {
		if sc.own[v] && !v.opaque && len(v.shape) == 3 && linearResult(v) {
			own = append(own, v)
		}
	}
	made := map[[2]*val]*val{}
	join := func(a, b *val) *val {
		if v, ok := made[[2]*val{a, b}]; ok {
			return v
		}
		v := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{a, b}, out: a.format, label: "values joined"})
		made[[2]*val{a, b}] = v
		return v
	}
	var out [][3]*val
	for _, q := range pool {
		for _, k := range pool {
			if q == k || q.shape[1] != k.shape[1] || q.shape[2] != width || !kvWidth(k.shape[2], width) {
				continue
			}
			rows, w := k.shape[1], k.shape[2]
			for i, a := range own {
				for _, b := range own[i+1:] {
					if a.shape[0] != k.shape[0] || b.shape[0] != k.shape[0] || a.shape[2] != w || b.shape[2] != w || a.shape[1]+b.shape[1] != rows || a == k || b == k {
						continue
					}
					for _, pair := range [][2]*val{{a, b}, {b, a}} {
						if v := join(pair[0], pair[1]); v != nil {
							out = append(out, [3]*val{q, k, v})
						}
						if len(out) == maxValuesJoined {
							return out
						}
					}
				}
			}
		}
	}
	return out
}

// joinedBiases are the scope's additive key masks of one piece of joined
// keys (float, one entry per key of that piece and batch row: a padding
// mask made (1 − m)·−10000 before the call), each joined with zeros for
// the other piece's keys, laid out [B, 1, 1, Sk] (a heads axis of one):
// the added-KV attention's mask padded inside its processor (unCLIP's
// decoder: the caption's keys first, the map's own after, attending).
func (s *synth) joinedBiases(sc *scope, b int, parts [2]int) []*val {
	if parts[0] == 0 {
		return nil
	}
	var out []*val
	for i, n := range parts {
		for _, v := range sc.vals {
			if v.opaque || v.intType || v.param || v.numel() != b*n || len(v.shape) < 2 || v.shape[len(v.shape)-1] != n || allZero(v.data) {
				continue
			}
			m := s.reshape(v, []int{b, 1, n})
			zeros := s.zeros([]int{b, 1, parts[1-i]}, v.format, "", "the other piece's keys: attended (zeros added to their scores)")
			if m == nil {
				continue
			}
			args := []*val{m, zeros}
			if i == 1 {
				args = []*val{zeros, m}
			}
			j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: args, out: v.format, label: "key bias joined with zeros"})
			if j = s.reshape(j, []int{b, 1, 1, parts[0] + parts[1]}); j != nil {
				out = append(out, j)
			}
			if len(out) == 2 {
				return out
			}
		}
	}
	return out
}
