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
		if slices.Equal(v.data[:sk], q.data[:min(sk, len(q.data))]) || slices.Equal(v.data[:sk], k.data[:min(sk, len(k.data))]) {
			continue // the queries or keys split into heads as wide as the keys are many, not a bias
		}
		out = append(out, v)
		if len(out) == 4 {
			break
		}
	}
	return out
}

// scoreBiases are biases' values, and each rank-3 one of one row per
// sample ([B, Sq or 1, Sk], B > 1: a padding mask made additive per
// sample, as diffusers hands encoder_attention_mask to its processors)
// with a heads axis too ([B, 1, Sq or 1, Sk]): the attention op reads a
// rank-3 bias as [B·H, …], which it is only with one head.
func (s *synth) scoreBiases(sc *scope, q, k *val) []*val {
	bs := biases(sc, q, k)
	b := q.shape[0]
	if b < 2 {
		return bs
	}
	for _, v := range bs {
		if len(v.shape) != 3 || v.shape[0] != b {
			continue
		}
		w, ok := s.headsAxis[v]
		if !ok {
			w = s.reshape(v, []int{b, 1, v.shape[1], v.shape[2]})
			if s.headsAxis == nil {
				s.headsAxis = map[*val]*val{}
			}
			s.headsAxis[v] = w
		}
		if w != nil {
			bs = append(bs, w)
		}
	}
	return bs
}

// summedBiases are two of the scope's score biases added together, each
// laid out [B, H or 1, Sq, Sk] (a [B, Sq, Sk] one given a heads axis of
// 1): a position bias per head and a mask per batch row, both added to
// the scores (Swin's shifted windows: the relative position bias and the
// windows' mask). At most two sums, of the first biases.
func (s *synth) summedBiases(bs []*val, batch int) []*val {
	var out []*val
	for i, a := range bs {
		for _, b := range bs[i+1:] {
			if sum := s.biasSum(a, b, batch); sum != nil {
				out = append(out, sum)
			}
			if len(out) == 2 {
				return out
			}
		}
	}
	return out
}

// offsetBiasesSummed are each bias made from a table of window offsets
// added to each of the scope's own biases (a shifted window's mask beside
// a parameter table's position bias: timm's Swin).
func (s *synth) offsetBiasesSummed(offsets, bs []*val, batch int) []*val {
	var out []*val
	for _, a := range offsets {
		for _, b := range bs {
			if sum := s.biasSum(a, b, batch); sum != nil {
				out = append(out, sum)
			}
		}
	}
	return out
}

// biasSum is a + b, each laid out [B, H or 1, Sq, Sk] (a [B, Sq, Sk] one
// given a heads axis of 1); nil where they do not broadcast.
func (s *synth) biasSum(a, b *val, batch int) *val {
	four := func(v *val) *val {
		if len(v.shape) == 3 && v.shape[0] == batch && batch > 1 {
			return s.reshape(v, []int{batch, 1, v.shape[1], v.shape[2]})
		}
		return v
	}
	a4, b4 := four(a), four(b)
	if a4 == nil || b4 == nil || len(a4.shape) != len(b4.shape) {
		return nil
	}
	if _, err := exec.Broadcast(a4.shape, b4.shape); err != nil {
		return nil
	}
	return s.derive(&expr{op: program.OpAdd, args: []*val{a4, b4}, out: a.format, label: "two score biases added"})
}

// headsLastBiases are the scope's score biases laid out heads last
// ([.., Sq, Sk, H], leading axes of 1: an embedding of relative position
// buckets read per query and key, one column per head, as T5 computes
// its bias in the attention that first needs it), each moved to [1, H,
// Sq, Sk]. Tried only where every bias of the scope's own layout fails.
func (s *synth) headsLastBiases(sc *scope, q, k *val, heads int) []*val {
	var out []*val
	sq, sk := q.shape[1], k.shape[1]
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || v.integral() || n < 3 || heads < 2 || v.shape[n-3] != sq || v.shape[n-2] != sk || v.shape[n-1] != heads || v.numel() != sq*sk*heads {
			continue
		}
		r := s.reshape(v, []int{sq, sk, heads})
		if r == nil {
			continue
		}
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1}}, args: []*val{r}, out: v.format, label: "bias heads first"})
		if p = s.reshape(p, []int{1, heads, sq, sk}); p != nil {
			out = append(out, p)
		}
		if len(out) == 2 {
			break
		}
	}
	return out
}

// blockBiases are the scope's score biases laid out for block-local
// attention, each block of L queries over 3L keys (the block before, its
// own, the block after: LongT5's local attention), heads first [.., H,
// L, 3L] or heads last [L, 3L, H], cut to a sequence that fits in one
// block (Sq = Sk ≤ L): rows [0, Sq), keys [L, L + Sk), as [1, H, Sq, Sk].
// Longer sequences span blocks, which no cut reads: none offered.
func (s *synth) blockBiases(sc *scope, q, k *val, heads int) []*val {
	sq, sk := q.shape[1], k.shape[1]
	if sq != sk || heads < 1 {
		return nil
	}
	var out []*val
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || v.integral() || n < 2 {
			continue
		}
		var hf *val // [H, L, 3L]
		switch l := v.shape[n-2]; {
		case v.shape[n-1] == 3*l && l >= sq && v.numel() == heads*l*3*l:
			hf = s.reshape(v, []int{heads, l, 3 * l})
		case n >= 3 && v.shape[n-1] == heads && v.shape[n-2] == 3*v.shape[n-3] && v.shape[n-3] >= sq && v.numel() == heads*3*v.shape[n-3]*v.shape[n-3]:
			l := v.shape[n-3]
			if r := s.reshape(v, []int{l, 3 * l, heads}); r != nil {
				hf = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1}}, args: []*val{r}, out: v.format, label: "bias heads first"})
			}
		}
		if hf == nil {
			continue
		}
		l := hf.shape[1]
		rows := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: sq}, args: []*val{hf}, out: v.format, label: "the first block's queries"})
		if rows == nil {
			continue
		}
		own := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: l, End: l + sk}, args: []*val{rows}, out: v.format, label: "the block's own keys"})
		if own = s.reshape(own, []int{1, heads, sq, sk}); own != nil {
			out = append(out, own)
		}
		if len(out) == 2 {
			break
		}
	}
	return out
}

// biasedTriples are the operands of the best first-stage choices (at
// most three, without RoPE) with the scope's own vector parameters of
// the attention's width added to some of them: biases a module keeps
// apart from its projection and adds to q and v in the forward
// (DeBERTa's q_bias and v_bias beside a bias-free fused in_proj). Each
// parameter joins at most one operand, no two the same; tried only where
// every other attention form fails.
func (s *synth) biasedTriples(sc *scope, all []attnChoice, width int) [][3]*val {
	var vecs []*val
	for _, v := range sc.vals {
		if v.param && len(v.shape) == 1 && v.shape[0] == width && !slices.Contains(vecs, v) {
			vecs = append(vecs, v)
		}
	}
	if len(vecs) == 0 || len(vecs) > 3 {
		return nil
	}
	ranked := slices.Clone(all)
	sortByScore(ranked)
	var bases [][3]*val
	for _, ch := range ranked {
		tr := [3]*val{ch.q, ch.k, ch.v}
		if ch.rope != 0 || ch.q.shape[2] != width || slices.Contains(bases, tr) {
			continue
		}
		if bases = append(bases, tr); len(bases) == 3 {
			break
		}
	}
	var out [][3]*val
	// at[i]: the operand vector i joins (3: none)
	at := make([]int, len(vecs))
	var assign func(i int)
	assign = func(i int) {
		if i == len(vecs) {
			used := map[int]bool{}
			for _, a := range at {
				if a < 3 && used[a] {
					return
				}
				used[a] = true
			}
			if len(used) == 1 && used[3] {
				return // none added
			}
			for _, base := range bases {
				tr := base
				ok := true
				for j, a := range at {
					if a == 3 {
						continue
					}
					if tr[a].shape[2] != width {
						ok = false
						break
					}
					tr[a] = s.derive(&expr{op: program.OpAdd, args: []*val{tr[a], vecs[j]}, out: tr[a].format, label: "bias of its own"})
					if tr[a] == nil {
						ok = false
						break
					}
				}
				if ok {
					out = append(out, tr)
				}
			}
			return
		}
		for a := range 4 {
			at[i] = a
			assign(i + 1)
		}
	}
	assign(0)
	return out
}

// keyMasks are the scope's key-padding masks for attention of q over k:
// integer 0/1 values with one entry per key and batch row ([B, Sk], or
// with unit axes between), not all ones, each laid out [B, 1, Sk] for an
// explicit mask (nonzero: attend).
func (s *synth) keyMasks(sc *scope, q, k *val) []*val {
	var out []*val
	b, sk := q.shape[0], k.shape[1]
	for _, v := range sc.vals {
		if v.opaque || !v.integral() || allOnes(v) || v.numel() != b*sk || v.shape[len(v.shape)-1] != sk || !zeroOne(v) {
			continue
		}
		if m := s.reshape(v, []int{b, 1, sk}); m != nil {
			out = append(out, m)
		}
		if len(out) == 2 {
			break
		}
	}
	return out
}

// queryMasks are the scope's 0/1 masks of one entry per query and key
// ([B, Sq, Sk], or with unit axes between: a padding mask made pairwise,
// m_i·m_j), not all ones, each laid out [B, Sq, Sk] for an explicit mask
// (nonzero: attend).
func (s *synth) queryMasks(sc *scope, q, k *val) []*val {
	var out []*val
	b, sq, sk := q.shape[0], q.shape[1], k.shape[1]
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || !v.integral() || n < 3 || v.shape[n-1] != sk || v.shape[n-2] != sq || sq == 1 || v.numel() != b*sq*sk || allOnes(v) || !zeroOne(v) {
			continue
		}
		if m := s.reshape(v, []int{b, sq, sk}); m != nil {
			out = append(out, m)
		}
		if len(out) == 2 {
			break
		}
	}
	return out
}

// zeroOne reports whether every element is 0 or 1.
func zeroOne(v *val) bool {
	for _, x := range v.data {
		if x != 0 && x != 1 {
			return false
		}
	}
	return true
}

// withScaled adds each bias times 1/√d: a bias added to the scores
// before they are scaled ((q·k + alibi)/√d, Falcon's ALiBi).
func (s *synth) withScaled(bs []*val, d int) []*val {
	if d <= 0 {
		return bs
	}
	out := slices.Clone(bs)
	c := s.constant(1 / math.Sqrt(float64(d)))
	for _, b := range bs {
		if v := s.derive(&expr{op: program.OpMul, args: []*val{b, c}, out: b.format, label: "bias before the scale"}); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// ropeSpan is where a table of fewer rows than q or k rotates each: all
// rows ([0, 0]), or rows [start, end); label names a span of k's own.
type ropeSpan struct {
	q, k  [2]int
	label string
}

// ropeRows are where tables of fewer rows than q and k may apply: all
// rows, or the first or the last rows of the sequence (one stream's rows
// of a joined sequence); a table of q's rows over keys joined from q's
// stream and another (joinedKV) also rotates the keys' piece of q's stream.
func ropeRows(tb [2]*val, q, k *val) []ropeSpan {
	r := tableRows(tb[0])
	n, m := q.shape[1], k.shape[1]
	switch {
	case r == n:
		// k of other rows (cross-attention): only q can rotate (q_only)
		out := []ropeSpan{{}}
		// (both where the two pieces have as many rows: either may be q's)
		parts := joinedParts(k)
		if parts[0] == n {
			out = append(out, ropeSpan{k: [2]int{0, n}, label: " k_first_rows"})
		}
		if parts[1] == n {
			out = append(out, ropeSpan{k: [2]int{m - n, m}, label: " k_last_rows"})
		}
		return out
	case r < n && m == n:
		return []ropeSpan{{q: [2]int{0, r}, k: [2]int{0, r}}, {q: [2]int{n - r, n}, k: [2]int{n - r, n}}}
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
	// a cut the evaluator did not make (the search's deadline passed
	// mid-way) is no operand: nothing to rotate
	mid := cut(rows[0], rows[1])
	if mid == nil {
		return nil
	}
	parts = append(parts, s.rotate(mid, tb, layout, heads, d))
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

// tableRows is the positions a RoPE table [.., r] rotates: its rows, or
// the S of a per-head table [S, H, r].
func tableRows(t *val) int {
	if t.perHead > 0 {
		return t.shape[0]
	}
	if t.samples > 0 {
		return t.numel() / t.shape[len(t.shape)-1] / t.samples
	}
	return t.numel() / t.shape[len(t.shape)-1]
}

// rotate applies RoPE to x [B, S, H·d] with tables tb (cos, sin).
func (s *synth) rotate(x *val, tb [2]*val, layout exec.RopeLayout, heads, d int) *val {
	if x == nil || tb[0] == nil || tb[1] == nil {
		return nil
	}
	r := tb[0].shape[len(tb[0].shape)-1]
	rows := tableRows(tb[0])
	if rows != x.shape[1] || r%2 != 0 {
		return nil
	}
	p := exec.RopeParams{Heads: heads, Layout: layout, RotaryDim: r}
	if r == d {
		p.RotaryDim = 0
	}
	if h := tb[0].perHead; h > 0 {
		// each head its own angles: the heads laid along the rows
		// ([B, S·H, d], one head a row), the table [S·H, r]
		if h != heads {
			return nil
		}
		b := x.shape[0]
		p.Heads = 1
		cos, sin := s.reshape(tb[0], []int{rows * h, r}), s.reshape(tb[1], []int{rows * h, r})
		y := s.derive(&expr{op: program.OpRope, attrs: program.Attrs{Rope: p}, args: []*val{s.reshape(x, []int{b, rows * h, d}), cos, sin}, out: x.format, label: layout.String() + " per head"})
		return s.reshape(y, x.shape)
	}
	if n := tb[0].samples; n > 0 {
		// one table per sample: the samples' rows laid end to end
		// ([1, B·S, H·d]), each row turned by its own sample's angles
		if x.shape[0] != n {
			return nil
		}
		y := s.derive(&expr{op: program.OpRope, attrs: program.Attrs{Rope: p}, args: []*val{s.reshape(x, []int{1, n * rows, x.shape[2]}), tb[0], tb[1]}, out: x.format, label: layout.String() + " per sample"})
		return s.reshape(y, x.shape)
	}
	cos, sin := s.reshape(tb[0], []int{rows, r}), s.reshape(tb[1], []int{rows, r})
	return s.derive(&expr{op: program.OpRope, attrs: program.Attrs{Rope: p}, args: []*val{x, cos, sin}, out: x.format, label: layout.String()})
}

// perSampleTables lays a table pair [B, S, r] that holds one table per
// sample of a batch of B > 1 out as [B·S, r] marked per sample (rotate
// turns each sample's rows by its own); nil where the pair is not that
// (its leading axis not the batch's, or a single row per sample).
func (s *synth) perSampleTables(c, sn *val) [][2]*val {
	b := s.batch()
	if b < 2 || len(c.shape) != 3 || c.shape[0] != b || c.shape[1] < 2 {
		return nil
	}
	n, r := c.shape[0]*c.shape[1], c.shape[2]
	pc := s.derive(&expr{op: program.OpReshape, attrs: program.Attrs{Shape: []int{n, r}}, args: []*val{c}, out: c.format, label: "one table per sample"})
	ps := s.derive(&expr{op: program.OpReshape, attrs: program.Attrs{Shape: []int{n, r}}, args: []*val{sn}, out: sn.format, label: "one table per sample"})
	if pc == nil || ps == nil {
		return nil
	}
	pc.samples, ps.samples = b, b
	return [][2]*val{{pc, ps}}
}

// batch is the flow loop's batch (the latents' leading axis), 0 where the
// run has no latents bound.
func (s *synth) batch() int {
	if s.latents == nil || len(s.latents.shape) == 0 {
		return 0
	}
	return s.latents.shape[0]
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
		case 2:
			// [B, W] where the target has one row ([B, 1, W]): one query
			// per sample (class attention's q of the class token alone)
			if t.shape[1] == 1 && v.shape[0] == t.shape[0] {
				add(s.reshape(v, []int{v.shape[0], 1, v.shape[1]}))
			}
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
			if w > wq && (w-wq)%2 == 0 {
				fused = append(fused, s.groupedQKV(v, wq, (w-wq)/2)...)
			}
			if w == 2*wq {
				// [q|k] of one projection, v another's (TNT's qk
				// linear): each half an operand
				for _, at := range []int{0, wq} {
					add(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: at, End: at + wq}, args: []*val{v}, out: v.format}))
				}
			}
			if w > 3*wq {
				// [q|k|v|rest] or [rest|q|k|v]: the leading or the
				// trailing blocks of a projection fused with another's
				// input (a parallel block's MLP)
				for _, at := range []int{0, w - 3*wq} {
					var tr [3]*val
					for i := range 3 {
						tr[i] = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: at + i*wq, End: at + (i+1)*wq}, args: []*val{v}, out: v.format})
					}
					if tr[0] != nil && tr[1] != nil && tr[2] != nil {
						fused = append(fused, tr)
					}
				}
			}
			if w == 3*wq {
				for d := minHeadDim; d <= maxHeadDim && d <= wq; d *= 2 {
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

// ropeTables are the (cos, sin) pairs among the scope's values: cos and
// sin of a table of angles the search fitted (angleTables), then two
// consecutive values of one shape with cos² + sin² = 1.
func (s *synth) ropeTables(sc *scope) [][2]*val {
	out := s.angleTables(sc)
	for _, v := range sc.vals {
		if c, sn := s.complexTable(v); c != nil {
			out = append(out, [2]*val{c, sn})
		}
		if c, sn := s.stackedTables(v); c != nil {
			out = append(out, [2]*val{c, sn})
		}
		if _, shape, ok := rotationPairs(v); ok && !v.opaque {
			// rotation matrices: their first columns are a complex table
			n := len(v.shape)
			col := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: 0, End: 1}, args: []*val{v}, out: v.format, label: "first columns"})
			if z := s.reshape(col, shape); z != nil {
				if c, sn := s.complexTable(z); c != nil {
					out = append(out, [2]*val{c, sn})
				}
			}
		}
	}
	for i := 0; i+1 < len(sc.vals); i++ {
		c, sn := sc.vals[i], sc.vals[i+1]
		if c.opaque && sn.opaque {
			// a table the program cannot make is still usable: taken as a constant
		}
		if slices.Equal(c.shape, sn.shape) && len(c.shape) >= 2 && onCircle(c, sn) && !allOnes(c) {
			out = append(out, [2]*val{c, sn})
			out = append(out, s.perSampleTables(c, sn)...)
		}
	}
	for i := 0; i+1 < len(sc.vals); i++ {
		// per-head tables [S, H, r/2] (each head its own angles, each once
		// a row): laid out interleaved or half for heads of r
		c, sn := sc.vals[i], sc.vals[i+1]
		if slices.Equal(c.shape, sn.shape) && len(c.shape) == 3 && c.shape[0] > 1 && c.shape[1] > 1 && onCircle(c, sn) && !allOnes(c) {
			out = append(out, s.perHeadTables(c, sn)...)
		}
	}
	for _, v := range sc.vals {
		// per-head tables packed in one value [H, S, 2·D] ([sin | cos]
		// or [cos | sin] along the last axis, each already laid out for
		// heads of D: timm's mixed RoPE handed to its blocks)
		out = append(out, s.packedPerHeadTables(v)...)
	}
	for i := 0; i+1 < len(sc.vals); i++ {
		// tables some of whose rows are averages of rotations (a table
		// pooled to a strided convolution's tokens, joined with plain
		// rows): tried after the tables on one circle
		c, sn := sc.vals[i], sc.vals[i+1]
		if slices.Equal(c.shape, sn.shape) && len(c.shape) >= 2 && !onCircle(c, sn) && mostlyOnUnitCircle(c, sn) {
			out = append(out, [2]*val{c, sn})
		}
	}
	return out
}

// takenValues are the values already tables or attention operands,
// which the late table forms leave alone.
func takenValues(tables [][2]*val, operands [][3]*val) map[*val]bool {
	taken := map[*val]bool{}
	for _, tb := range tables {
		taken[tb[0]], taken[tb[1]] = true, true
	}
	for _, op := range operands {
		for _, v := range op {
			taken[v] = true
		}
	}
	return taken
}

// sideBySideTables read each value [.., S', 2w] (S' ≤ S) of the scope that no
// other table form took as a rotation table's two halves kept side by
// side ([sin | cos] as RoFormer hands every attention, or [cos | sin]):
// (cos, sin) for heads of 2w, each angle twice in a row (interleaved) or
// the half joined to itself (half), or for heads of w as they are (each
// half a whole table: timm's [sin | cos] of tables already laid out). The values need not lie on the unit
// circle (a table parameter drawn at random rotates as any other), so
// both orders are tried: a fallback, after every table on the circle.
func (s *synth) sideBySideTables(sc *scope, tables [][2]*val, operands [][3]*val, rows, width int) [][2]*val {
	taken := takenValues(tables, operands)
	var out [][2]*val
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || v.integral() || taken[v] || n < 2 || v.shape[n-2] > rows || v.shape[n-2] < 2 || v.shape[n-1]%2 != 0 || v.shape[n-1] < 4 || v.shape[n-1] > width {
			continue // rows: the sequence's, or fewer (the rows after a class token, ropeRows)
		}
		if v.shape[n-1] == width && !ropeMade(v) {
			continue // as wide as q: an activation, unless the search made it as RoPE tables
		}
		if v.numel() != v.shape[n-2]*v.shape[n-1] {
			continue // one table for every sample and head: its leading axes all 1
		}
		w := v.shape[n-1] / 2
		half := func(start int) *val {
			return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: start, End: start + w}, args: []*val{v}, out: v.format, label: "half of a side-by-side table"})
		}
		a, b := half(0), half(w)
		if a == nil || b == nil {
			continue
		}
		lead := slices.Clone(v.shape[:n-1])
		inter := func(t *val) *val {
			col := s.reshape(t, append(slices.Clone(lead), w, 1))
			rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: 2, Axis: n}, args: []*val{col}, out: t.format, label: "each angle twice"})
			return s.reshape(rep, append(slices.Clone(lead), 2*w))
		}
		joined := func(t *val) *val {
			return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: n - 1}, args: []*val{t, t}, out: t.format, label: "half"})
		}
		asIs := func(t *val) *val { return t }         // each half laid out already (every angle twice, or the half twice)
		for _, cs := range [][2]*val{{b, a}, {a, b}} { // [sin | cos] first
			for _, lay := range []func(*val) *val{inter, joined, asIs} {
				if c, sn := lay(cs[0]), lay(cs[1]); c != nil && sn != nil {
					out = append(out, [2]*val{c, sn})
				}
			}
		}
	}
	return out
}

// perHeadTables are a per-head table pair [S, H, w] laid out for heads
// of 2w: each angle twice in a row (interleaved) or the row twice (half).
func (s *synth) perHeadTables(c, sn *val) [][2]*val {
	S, h, w := c.shape[0], c.shape[1], c.shape[2]
	inter := func(t *val) *val {
		rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: 2, Axis: 3}, args: []*val{s.reshape(t, []int{S, h, w, 1})}, out: t.format, label: "interleaved"})
		return s.reshape(rep, []int{S, h, 2 * w})
	}
	half := func(t *val) *val {
		return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{t, t}, out: t.format, label: "half"})
	}
	var out [][2]*val
	for _, lay := range []func(*val) *val{inter, half} {
		a, b := lay(c), lay(sn)
		if a == nil || b == nil {
			continue
		}
		a.perHead, b.perHead = h, h
		out = append(out, [2]*val{a, b})
	}
	return out
}

// packedPerHeadTables reads v [H, S, 2·D] as per-head (cos, sin) tables
// [S, H, D] (perHead H), both orders of its halves; nil unless the halves
// lie on the unit circle.
func (s *synth) packedPerHeadTables(v *val) [][2]*val {
	if v.opaque || v.integral() || len(v.shape) != 3 || v.shape[0] < 2 || v.shape[2]%2 != 0 || v.shape[2] < 4 {
		return nil
	}
	d := v.shape[2] / 2
	half := func(at int) *val {
		x := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: at, End: at + d}, args: []*val{v}, out: v.format, label: "half of a packed per-head table"})
		t := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{x}, out: v.format, label: "positions first"})
		if t != nil {
			t.perHead = v.shape[0]
		}
		return t
	}
	if !unitCircle(&val{data: sliceData(v, 2, 0, d)}, &val{data: sliceData(v, 2, d, 2*d)}) {
		return nil
	}
	a, b := half(0), half(d)
	if a == nil || b == nil {
		return nil
	}
	return [][2]*val{{b, a}, {a, b}} // [sin | cos] first (timm's), then [cos | sin]
}

// mostlyOnUnitCircle reports whether no (c, s) pair lies outside the unit
// circle and at least half lie on it.
func mostlyOnUnitCircle(c, s *val) bool {
	on := 0
	for i := range c.data {
		r := math.Hypot(float64(c.data[i]), float64(s.data[i]))
		if r > 1.025 {
			return false
		}
		if r > 0.975 {
			on++
		}
	}
	return len(c.data) > 0 && 2*on >= len(c.data)
}

// reversed are tables with the sine negated: a rotation the other way
// (rotate_half written as cat(x2, −x1)), as some models rotate.
func (s *synth) reversed(tables [][2]*val) [][2]*val {
	var out [][2]*val
	for _, tb := range tables {
		if neg := s.derive(&expr{op: program.OpMul, args: []*val{tb[1], s.constant(-1)}, out: tb[1].format, label: "−sin"}); neg != nil {
			out = append(out, [2]*val{tb[0], neg})
		}
	}
	return out
}

// relaid are the tables of the half layout among tables, re-laid for
// rotation of adjacent pairs (pairedHalf).
func (s *synth) relaid(tables [][2]*val) [][2]*val {
	var out [][2]*val
	for _, tb := range tables {
		if c, sn := s.pairedHalf(tb[0]), s.pairedHalf(tb[1]); c != nil && sn != nil {
			out = append(out, [2]*val{c, sn})
		}
	}
	return out
}

// doubled are tables of half a head's width laid out for the half
// layout: each table joined to itself along its last axis ([f | f]), as
// code that rotates x = [x1 | x2] by x1·cos − x2·sin, x2·cos + x1·sin with
// a table of D/2 columns computes.
func (s *synth) doubled(tables [][2]*val) [][2]*val {
	var out [][2]*val
	for _, tb := range tables {
		var two [2]*val
		for i, t := range tb {
			n := len(t.shape)
			two[i] = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: n - 1}, args: []*val{t, t}, out: t.format, label: "a half-width table joined to itself"})
		}
		if two[0] != nil && two[1] != nil {
			out = append(out, two)
		}
	}
	return out
}

// pairedHalf re-lays a table of the half layout ([f | f]: its two halves
// equal) for rotation of adjacent pairs: the first half's channels each
// repeated for its pair (cos[..., :D/2].repeat_interleave(2)), as models
// that share one table module between both layouts do. nil otherwise.
func (s *synth) pairedHalf(v *val) *val {
	n := len(v.shape)
	d := v.shape[n-1]
	if v.opaque || d%2 != 0 || d < 4 {
		return nil
	}
	for i := 0; i < len(v.data); i += d {
		if !slices.Equal(v.data[i:i+d/2], v.data[i+d/2:i+d]) {
			return nil
		}
	}
	lead := slices.Clone(v.shape[:n-1])
	first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: 0, End: d / 2}, args: []*val{v}, out: v.format})
	col := s.reshape(first, append(slices.Clone(lead), d/2, 1))
	if col == nil {
		return nil
	}
	rep := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: n}, args: []*val{col, col}, out: v.format, label: "pairs"})
	return s.reshape(rep, append(lead, d))
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
// for its pair (a padding row of zeros, or pairs a model pads with
// zeros, give zero tables there, as the complex product does). nil when v
// is not one.
func (s *synth) complexTable(v *val) (*val, *val) {
	n := len(v.shape)
	if v.opaque || n < 2 || v.shape[n-1] != 2 || v.numel() < 4 {
		return nil, nil
	}
	if _, ok := unitRows(v); !ok && !unitOrZeroPairs(v) { // rows that rotate, padding rows or pairs of zeros
		return nil, nil
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
	sortByScore(base)
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
					if c, ok := s.roped(ch, [2]*val{cosT, sinT}, p, layout, fmt.Sprintf("%s theta=%g rotary=%d", layout, theta, r), ""); ok {
						try(c)
					}
				}
			}
		}
	}
}

// roped is ch with q and k rotated by tables (cos, sin) that rope_table
// made with p, pairs laid out as layout; desc names the tables in the
// fit's candidates, note (when set) is added to the label. false where
// either cannot rotate.
func (s *synth) roped(ch attnChoice, tb [2]*val, p exec.RopeTableParams, layout exec.RopeLayout, desc, note string) (attnChoice, bool) {
	fit := &leafFit{kind: "rope_table", rope: p, candidates: []semantics.Candidate{{Value: desc, Score: 0}}}
	tb[0].fit, tb[1].fit = fit, fit
	rq, rk := s.rotate(ch.q, tb, layout, ch.params.Heads, ch.headDim), s.rotate(ch.k, tb, layout, ch.params.KVHeads, ch.headDim)
	if rq == nil || rk == nil {
		return ch, false
	}
	c := ch
	c.q, c.k, c.rope, c.cos, c.sin = rq, rk, layout, tb[0], tb[1]
	c.label = fmt.Sprintf("heads=%d kv=%d causal=%v rope=%s%s", ch.params.Heads, ch.params.KVHeads, ch.params.Mask == exec.MaskCausal, layout, note)
	return c, true
}

// rotated explains a per-head value t [B, H, S, D] as RoPE applied to a
// projection of the scope outside attention (a model that normalises q
// and k after rotating them): the tables among the scope's values, both
// layouts.
func (s *synth) rotated(t *val, sc *scope) *val {
	if len(t.shape) != 4 && len(t.shape) != 3 {
		return nil
	}
	tables := s.ropeTables(sc)
	if len(tables) == 0 {
		return nil
	}
	tables = append(tables, s.relaid(tables)...)
	tables = append(tables, s.reversed(tables)...)
	if len(t.shape) == 3 {
		return s.rotatedRows(t, sc, tables)
	}
	pool, _ := s.allOperands(sc, t)
	// the heads before the rows ([B, H, N, D], moved for attention) or
	// after them ([B, N, H, D], the projection only split)
	for _, headsFirst := range []bool{true, false} {
		b, h, n, d := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
		if !headsFirst {
			h, n = n, h
		}
		for _, x := range pool {
			if x.shape[0] != b || x.shape[1] != n || x.shape[2] != h*d {
				continue
			}
			var cands []*expr
			for _, tb := range tables {
				for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
					y := s.reshape(s.rotate(x, tb, layout, h, d), []int{b, n, h, d})
					switch {
					case y == nil:
					case headsFirst:
						cands = append(cands, &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{y}, out: t.format, label: layout.String()})
					default:
						cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: layout.String()})
					}
				}
			}
			if w, _ := s.best(t, cands); w != nil {
				return w
			}
		}
	}
	return nil
}

// permutedQKV cuts the scope's fused projections of width 3·W (W the
// target's) laid out in G equal groups, each holding q, k and v of W/G in
// some order ([q v k] in CodeGen's four groups): every G in 1, 2, 4, 8 and
// every order but [q k v] with G = 1 (the plain cut, tried first).
func (s *synth) permutedQKV(sc *scope, t *val) [][3]*val {
	wq := t.shape[2]
	perms := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	var out [][3]*val
	for _, v := range recentFirst(sc.vals) {
		if !sc.own[v] || v.opaque || len(v.shape) != 3 || v.shape[2] != 3*wq {
			continue
		}
		b, n := v.shape[0], v.shape[1]
		for _, g := range []int{1, 2, 4, 8} {
			if wq%g != 0 {
				continue
			}
			x := s.reshape(v, []int{b, n, g, 3, wq / g})
			if x == nil {
				continue
			}
			part := make([]*val, 3)
			for i := range 3 {
				c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: i, End: i + 1}, args: []*val{x}, out: v.format})
				part[i] = s.reshape(c, []int{b, n, wq})
			}
			if part[0] == nil || part[1] == nil || part[2] == nil {
				continue
			}
			for _, p := range perms {
				if g == 1 && p == [3]int{0, 1, 2} {
					continue
				}
				// p[i] is where role i (q, k, v) sits in the group
				out = append(out, [3]*val{part[p[0]], part[p[1]], part[p[2]]})
			}
		}
	}
	return out
}

// groupedQKV cuts a fused projection laid out per kv head as [q…q k v]
// (the group's G query heads, then its key and value: Falcon's
// grouped layout), for every head width that fits; G = 1 is the
// per-head [q k v] layout, which the caller tries itself.
func (s *synth) groupedQKV(v *val, wq, wkv int) [][3]*val {
	var out [][3]*val
	b, n := v.shape[0], v.shape[1]
	for d := minHeadDim; d <= maxHeadDim && d <= wkv; d *= 2 {
		if wq%d != 0 || wkv%d != 0 {
			continue
		}
		h, kv := wq/d, wkv/d
		if h%kv != 0 || h == kv {
			continue
		}
		g := h / kv
		x := s.reshape(v, []int{b, n, kv, g + 2, d})
		if x == nil {
			continue
		}
		cut := func(a, e, width int) *val {
			c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: a, End: e}, args: []*val{x}, out: v.format})
			return s.reshape(c, []int{b, n, width})
		}
		q, k, vv := cut(0, g, wq), cut(g, g+1, wkv), cut(g+1, g+2, wkv)
		if q != nil && k != nil && vv != nil {
			out = append(out, [3]*val{q, k, vv})
		}
	}
	return out
}

// roundedOperands retries choices with q and k rounded to a format
// narrower than the run's and read back (rotated q and k stored
// .to(torch.bfloat16), then .type_as(query), in an f32 run): only a
// choice already within f's tolerance, a miss rounding to f explains;
// try collects the new choices.
func (s *synth) roundedOperands(best []attnChoice, run precision.Format, try func(attnChoice)) {
	if run != precision.F32 && run != precision.F64 {
		return
	}
	for _, ch := range best {
		for _, f := range []precision.Format{precision.BF16, precision.F16} {
			if !(ch.score <= tolerance(f)) {
				continue // off by more than rounding to f would explain
			}
			q, k := s.roundTrip(ch.q, f), s.roundTrip(ch.k, f)
			if q == nil || k == nil {
				continue
			}
			c := ch
			c.q, c.k, c.rounded = q, k, f
			c.label = ch.label + " qk=" + f.String()
			try(c)
		}
	}
}

// roundTrip is x cast to f and back to x's format.
func (s *synth) roundTrip(x *val, f precision.Format) *val {
	r := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: f}, args: []*val{x}, out: f, label: "cast"})
	if r == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: x.format}, args: []*val{r}, out: x.format, label: "cast"})
}

// ropeSections are RoPE tables that rotate k consecutive sections of w
// channels of every head, section i by its own table at its own ids (a
// head cut in time, height and width thirds): the gathered tables laid
// one after another along the rows, [k·S, w].
type ropeSections struct {
	cos, sin *val
	k, w     int
}

// sectionTables finds, for S rows, k ≥ 2 table pairs of one width and k
// integer id vectors of S entries in the scope, paired in the scope's
// order (the i-th pair read at the i-th ids), and gathers them.
func (s *synth) sectionTables(sc *scope, rows int) []ropeSections {
	var pairs [][2]*val
	for i := 0; i+1 < len(sc.vals); i++ {
		c, sn := sc.vals[i], sc.vals[i+1]
		if c.opaque || sn.opaque || len(c.shape) != 2 || !slices.Equal(c.shape, sn.shape) || !onCircle(c, sn) || allOnes(c) {
			continue
		}
		pairs = append(pairs, [2]*val{c, sn})
		i++
	}
	var ids []*val
	for _, v := range sc.vals {
		if !v.opaque && v.numel() == rows && v.integral() && !slices.Contains(ids, v) {
			ids = append(ids, v)
		}
	}
	if len(pairs) < 2 || len(ids) != len(pairs) {
		return nil
	}
	w := pairs[0][0].shape[1]
	var cs, ss []*val
	for i, p := range pairs {
		if p[0].shape[1] != w || w%2 != 0 {
			return nil
		}
		for _, x := range ids[i].data {
			if x < 0 || int(x) >= p[0].shape[0] {
				return nil
			}
		}
		id := s.reshape(ids[i], []int{rows})
		c := s.derive(&expr{op: program.OpGather, args: []*val{p[0], id}, out: p[0].format, label: "section table"})
		sn := s.derive(&expr{op: program.OpGather, args: []*val{p[1], id}, out: p[1].format, label: "section table"})
		c, sn = s.reshape(c, []int{rows, w}), s.reshape(sn, []int{rows, w})
		if c == nil || sn == nil {
			return nil
		}
		cs, ss = append(cs, c), append(ss, sn)
	}
	c := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: cs, out: cs[0].format, label: "sections' tables"})
	sn := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: ss, out: ss[0].format, label: "sections' tables"})
	if c == nil || sn == nil {
		return nil
	}
	return []ropeSections{{cos: c, sin: sn, k: len(pairs), w: w}}
}

// rotateSections applies sectioned RoPE to x [B, S, H·k·w]: the sections
// moved onto the rows ([B, k·S, H·w]), rotated there as heads of w by
// the tables laid along the rows, and moved back.
func (s *synth) rotateSections(x *val, sec ropeSections, layout exec.RopeLayout, heads int) *val {
	if len(x.shape) != 3 || x.shape[2] != heads*sec.k*sec.w {
		return nil
	}
	b, n := x.shape[0], x.shape[1]
	x5 := s.reshape(x, []int{b, n, heads, sec.k, sec.w})
	if x5 == nil {
		return nil
	}
	p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2, 4}}, args: []*val{x5}, out: x.format, label: "sections onto rows"})
	r := s.reshape(p, []int{b, sec.k * n, heads * sec.w})
	if r == nil {
		return nil
	}
	rot := s.rotate(r, [2]*val{sec.cos, sec.sin}, layout, heads, sec.w)
	back := s.reshape(rot, []int{b, sec.k, n, heads, sec.w})
	if back == nil {
		return nil
	}
	q := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 3, 1, 4}}, args: []*val{back}, out: x.format, label: "sections back"})
	return s.reshape(q, x.shape)
}

// rotatedRows explains t [B, S, W] as a value of the scope of t's shape
// rotated by one of the tables, W cut into heads of the tables' width
// (RoPE applied to a projection's input before it is projected: one
// rotated input read by the q and k projections, as in a conformer).
func (s *synth) rotatedRows(t *val, sc *scope, tables [][2]*val) *val {
	var cands []*expr
	for _, x := range sc.vals {
		if x.opaque || x.integral() || !slices.Equal(x.shape, t.shape) {
			continue
		}
		for _, tb := range tables {
			d := tb[0].shape[len(tb[0].shape)-1]
			if d < 2 || t.shape[2]%d != 0 || tableRows(tb[0]) != t.shape[1] {
				continue
			}
			for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
				if y := s.reshape(s.rotate(x, tb, layout, t.shape[2]/d, d), t.shape); y != nil {
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: layout.String() + " before the projection"})
				}
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// stackedTables reads v [2, .., S, D] as a cos and a sin table stacked on
// its first axis (torch.stack([cos, sin]), one value handed to every
// layer), each [S, D]; nil where the halves are not on the unit circle.
func (s *synth) stackedTables(v *val) (*val, *val) {
	n := len(v.shape)
	if v.opaque || v.integral() || n < 3 || v.shape[0] != 2 || v.shape[n-1] < 2 {
		return nil, nil
	}
	d := v.shape[n-1]
	rows := v.numel() / 2 / d
	half := func(i int) *val {
		h := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: i, End: i + 1}, args: []*val{v}, out: v.format, label: "one of stacked tables"})
		return s.reshape(h, []int{rows, d})
	}
	c, sn := half(0), half(1)
	if c == nil || sn == nil || !onCircle(c, sn) || allOnes(c) {
		return nil, nil
	}
	return c, sn
}

// ropeMade reports whether the search explained v as RoPE tables (a
// rope_table node's or coordinates' tables, perhaps joined side by side).
func ropeMade(v *val) bool {
	return v.fit != nil && (v.fit.kind == "rope_table" || v.fit.kind == "rope_coords")
}

// distinctTriples are the (q, k, v) of three different values of ops, in
// ops' order, that ok accepts (every one where ok is nil).
func distinctTriples(ops []*val, ok func(q, k, v *val) bool) [][3]*val {
	var out [][3]*val
	for _, q := range ops {
		for _, k := range ops {
			for _, v := range ops {
				if q != k && q != v && k != v && (ok == nil || ok(q, k, v)) {
					out = append(out, [3]*val{q, k, v})
				}
			}
		}
	}
	return out
}
