package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// mapsAttention explains t [B, C, h, w], a map laid out channels first,
// as attention over rows: t read as [B, h·w, C], the scope's maps of the
// batch ([B, C', h', w']: q, k and v made by convolutions) read as rows
// [B, h'·w', C'] the same way, the result laid back out as a map (LeViT's
// and EfficientViT's convolutional attentions, whose heads are views of
// conv outputs). The scope's own 4-D values stay beside their rows too:
// per-head scores [B, H, h·w, Sk] show the head count.
func (s *synth) mapsAttention(t *val, sc *scope, joined bool) *val {
	if s.rowsApart {
		return nil // a part of token rows split apart is no map
	}
	mapped := s.mapsAsRows(sc, t.shape[0])
	if mapped == nil {
		return nil // no map made inside the scope: nothing to attend with
	}
	proxy := s.mapAsRows(t)
	var part *val // the attention found as a part of t (plus or beside a value)
	attend := func(rest *val) *val {
		if !s.heldByValues(rest, mapped) {
			return nil // no value of the scope holds it: no attention's output
		}
		a := s.attentionOf(rest, mapped, joined)
		if a != nil {
			part = a
		}
		return a
	}
	r := s.attentionOf(proxy, mapped, joined)
	if r == nil {
		r = s.plusOwnRows(proxy, mapped, attend, "attention")
		if r == nil {
			r = s.besideOwnRows(proxy, mapped, attend)
		}
		if r != nil && part != nil {
			// the part stays in the scope as a map: a later boundary may
			// join it (EfficientViT-M's cascaded heads: each head's
			// output added to the next head's input, then all joined)
			back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{part}, out: part.format, label: "rows laid out as a map"})
			if m := s.reshape(back, slices.Concat([]int{t.shape[0], part.shape[2]}, t.shape[2:])); m != nil {
				sc.add(m, true)
			}
		}
	}
	if r == nil {
		return nil
	}
	back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{r}, out: r.format, label: "rows laid out as a map"})
	return s.reshape(back, t.shape)
}

// besideOwnRows explains t [B, N, W] as a value the program made, of
// [B, N, n], joined along the width with what explain makes of the rest
// (a head's attention joined after the heads before it:
// EfficientViT-M's cascaded heads), the value first or last.
func (s *synth) besideOwnRows(t *val, sc *scope, explain func(*val) *val) *val {
	tol := tolerance(t.format)
	for _, x := range sc.vals {
		if x.opaque || x.integral() || !sc.own[x] && x.from == nil || len(x.shape) != 3 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] {
			continue
		}
		if x.shape[2] >= t.shape[2] {
			if w := s.besideColumnsOf(t, x, explain); w != nil {
				return w
			}
			continue
		}
		same := func(sub *val) *val {
			if relRMS(t.format, x.data, sub.data) > tol {
				return nil
			}
			return x
		}
		if w := s.besideWidth(t, x.shape[2], same, explain, "attention joined with a value the program made"); w != nil {
			return w
		}
	}
	return nil
}

// besideColumnsOf explains t [B, N, W] as a run of x's columns [B, N,
// X], X ≥ W, kept where x holds them (t's last n columns x's last n, or
// its first n x's first n), joined with what explain makes of the rest
// (SHViT's single-head attention over the first channels of a map,
// joined with the channels it left alone). n is the longest run of
// columns that agree, each within t's tolerance.
func (s *synth) besideColumnsOf(t, x *val, explain func(*val) *val) *val {
	W, X := t.shape[2], x.shape[2]
	tol := tolerance(t.format)
	agree := func(tc, xc int) bool {
		a, b := sliceData(t, 2, tc, tc+1), sliceData(x, 2, xc, xc+1)
		return relRMS(t.format, b, a) <= tol
	}
	for _, last := range []bool{true, false} {
		n := 0
		for n < W-1 && (last && agree(W-1-n, X-1-n) || !last && agree(n, n)) {
			n++
		}
		if n == 0 {
			continue
		}
		lo := 0
		if last {
			lo = X - n
		}
		side := func(sub *val) *val {
			c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: lo, End: lo + n}, args: []*val{x}, out: x.format, label: "columns of a value kept where they were"})
			if c == nil || relRMS(t.format, c.data, sub.data) > tol {
				return nil
			}
			return c
		}
		if w := s.besideWidth(t, n, side, explain, "attention joined with columns the program kept"); w != nil {
			return w
		}
	}
	return nil
}

// besideWidth explains t [B, S, W] as two pieces joined along the width:
// n columns that side makes of t's own n columns (nil: not), first or
// last, and the rest as explain makes it (nil: not); the join must hold
// within t's tolerance.
func (s *synth) besideWidth(t *val, n int, side, explain func(*val) *val, label string) *val {
	W := t.shape[2]
	for _, last := range []bool{true, false} {
		lo, alo, ahi := W-n, 0, W-n // the side piece last: [rest, side]
		if !last {
			lo, alo, ahi = 0, n, W
		}
		c := side(s.part(t, 2, lo, lo+n))
		if c == nil {
			continue
		}
		rest := s.part(t, 2, alo, ahi)
		rest.reshapedFrom = true // explained as it is, not read in other shapes
		a := explain(rest)
		if a == nil {
			continue
		}
		pieces := []*val{a, c}
		if !last {
			pieces = []*val{c, a}
		}
		if w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: pieces, out: t.format, label: label}}); w != nil {
			return w
		}
	}
	return nil
}

// mapsAsRows is sc with each map of batch b ([B, C', h', w']: q, k and v
// made by convolutions) read as rows [B, h'·w', C'], and the scope's own
// 4-D values beside as they are too (per-head scores show the head count;
// probabilities are read as they are); nil where the scope made no map.
func (s *synth) mapsAsRows(sc *scope, b int) *scope {
	maps := 0
	mapped := sc.mapped(func(v *val) *val {
		if v.opaque || v.integral() || len(v.shape) != 4 || v.shape[0] != b {
			return nil
		}
		r := s.reshape(v, []int{b, v.shape[1], v.shape[2] * v.shape[3]})
		if r == nil {
			return nil
		}
		if sc.own[v] {
			maps++
		}
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{r}, out: v.format, label: "a map's cells as rows"})
	})
	if maps == 0 {
		return nil
	}
	// the maps as they are and the joins first, the least recent: they
	// take no place of the maps' rows among the operands a pool keeps
	// (recentFirst)
	var older []*val
	for _, v := range sc.vals {
		if len(v.shape) == 4 && sc.own[v] {
			older = append(older, v)
			mapped.own[v] = true
		}
	}
	for _, j := range slices.Concat(s.mapJoins(sc, b, false), sc.cutJoins) {
		if r := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}},
			args: []*val{s.reshape(j, []int{b, j.shape[1], j.shape[2] * j.shape[3]})}, out: j.format, label: "a map's cells as rows"}); r != nil {
			older = append(older, r)
			mapped.own[r] = true
		}
	}
	mapped.vals = append(older, mapped.vals...)
	return mapped
}

// maxMapJoins bounds how many joins mapJoins makes.
const maxMapJoins = 6

// mapJoins are runs of maps the scope made one after another, of batch b
// and one size of cells, joined along the channels (torch.cat of a
// projection and its multi-scale aggregations, read apart again as heads:
// EfficientViT's and DC-AE's multi-scale linear attention): each run of
// two or more, shortest first; with made, then the runs that hold a map
// the scope computed between its calls and handed to one (DC-AE's three
// linears' outputs joined and moved channels-first, the first of the
// run: read by joinedMapCut alone, which hands the join it cut from to
// the attention search; all of them as its operands would multiply its
// candidates).
func (s *synth) mapJoins(sc *scope, b int, made bool) []*val {
	isMap := func(v *val) bool {
		return !v.opaque && !v.integral() && len(v.shape) == 4 && v.shape[0] == b
	}
	var own, all []*val
	for _, v := range sc.vals {
		switch {
		case sc.own[v] && isMap(v):
			own = append(own, v)
			all = append(all, v)
		case made && !sc.arg[v] && v.used && v.from != nil && isMap(v):
			all = append(all, v)
		}
	}
	out := s.joinRuns(own, nil, maxMapJoins)
	if len(all) > len(own) {
		out = append(out, s.joinRuns(all, func(run []*val) bool {
			return slices.ContainsFunc(run, func(v *val) bool { return !sc.own[v] })
		}, maxMapJoins)...)
	}
	return out
}

// joinedMapCut explains t [B, G, c, N] as a part of a join of the
// scope's maps (mapJoins) read as G groups of channels over its N cells
// (reshape(torch.cat(maps, 1), [B, G, C/G, N]).chunk(…, dim=2)): the
// heads of a multi-scale linear attention's q, k or v, read apart before
// the attention (a ReLU module's input).
func (s *synth) joinedMapCut(t *val, sc *scope) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	b, g, n := t.shape[0], t.shape[1], t.shape[3]
	fits := func(v *val) bool {
		return len(v.shape) == 4 && v.shape[0] == b && v.shape[2]*v.shape[3] == n && v.shape[1]%g == 0
	}
	if !slices.ContainsFunc(sc.vals, func(v *val) bool { return sc.own[v] && fits(v) }) {
		return nil
	}
	for _, j := range s.mapJoins(sc, b, true) {
		if !fits(j) {
			continue
		}
		if v := s.reshape(j, []int{b, g, j.shape[1] / g, n}); v != nil {
			if w := s.cut(t, []*val{v}); w != nil {
				if !slices.Contains(sc.cutJoins, j) {
					sc.cutJoins = append(sc.cutJoins, j)
				}
				return w
			}
		}
	}
	return nil
}

// joinRuns joins each run of two or more consecutive maps of one size of
// cells and one format along the channels, shortest first, at most limit,
// only the runs keep accepts (all where keep is nil).
func (s *synth) joinRuns(maps []*val, keep func([]*val) bool, limit int) []*val {
	var out []*val
	for n := 2; n <= len(maps); n++ {
		for i := 0; i+n <= len(maps); i++ {
			run := maps[i : i+n]
			if slices.ContainsFunc(run, func(v *val) bool { return !slices.Equal(v.shape[2:], run[0].shape[2:]) || v.format != run[0].format }) {
				continue
			}
			if keep != nil && !keep(run) {
				continue
			}
			if j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: slices.Clone(run), out: run[0].format, label: "maps joined along the channels"}); j != nil {
				out = append(out, j)
			}
			if len(out) == limit {
				return out
			}
		}
	}
	return out
}

// mapAsRows is the map t [B, C, h, w] read as rows [B, h·w, C], a target
// of its own.
func (s *synth) mapAsRows(t *val) *val {
	b, c, n := t.shape[0], t.shape[1], t.shape[2]*t.shape[3]
	proxy := s.readAs(t, []int{b, n, c}, func(d []float32) []float32 {
		return permuteData(&val{shape: []int{b, c, n}, data: d}, []int{0, 2, 1})
	})
	proxy.reshapedFrom = true
	return proxy
}

// heldByValues reports whether some own value v [B, M, C] of the scope
// holds t [B, N, C] within its rows' range, channel by channel (an
// attention's output is a convex combination of its values' rows), or
// some wider own value holds it in C columns in a row (the values a
// slice of a fused projection: each column within its column's range
// over every row): a screen before an attention search whose target is a
// difference.
func (s *synth) heldByValues(t *val, sc *scope) bool {
	if t.numel()*t.shape[1] <= smallRank {
		// a few rows: the search is cheap, and a difference's rounding
		// (bf16's, of a sum far larger than the part) can leave a
		// single row's column just outside its value's
		return true
	}
	own := s.columnSpans(t)
	for _, v := range sc.vals {
		if !sc.own[v] || v.opaque || len(v.shape) != 3 || v.shape[0] != t.shape[0] || v.shape[2] < t.shape[2] {
			continue
		}
		if v.shape[2] == t.shape[2] && windowsHeld(t, v, 1) {
			return true
		}
		cols := s.columnSpans(v)
		for o := 0; o+len(own) <= len(cols); o++ {
			if columnsWithin(own, cols[o:o+len(own)]) {
				return true
			}
		}
	}
	return false
}

// columnsWithin reports whether each span of t lies within the span of
// the same place of v, give or take 2% of v's magnitude.
func columnsWithin(t, v []span) bool {
	for i, c := range t {
		slack := 0.02*max(-v[i].lo, v[i].hi) + 1e-6
		if c.lo < v[i].lo-slack || c.hi > v[i].hi+slack {
			return false
		}
	}
	return true
}

// plusOwnRows explains t as what explain makes of t minus one of the
// scope's own values of t's shape, plus that value (a convolution of the
// values added to an attention's output before the maps are laid back:
// EfficientFormer v2's local value path); each such value is tried, and
// the sum must hold within t's tolerance.
func (s *synth) plusOwnRows(t *val, sc *scope, explain func(*val) *val, what string) *val {
	for _, x := range slices.Concat(sc.vals, s.argParts(t, sc)) {
		if x.opaque || x.integral() || !sc.own[x] && x.from == nil || !slices.Equal(x.shape, t.shape) {
			continue
		}
		a := explain(s.minus(t, x))
		if a == nil {
			continue
		}
		if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, x}, out: t.format, label: what + " plus a value the scope made"}}); w != nil {
			return w
		}
	}
	return nil
}

// maxArgParts bounds how many pieces of one argument argParts cuts.
const maxArgParts = 8

// argParts are the pieces of t's width of the scope's arguments of t's
// batch and rows, cut along the last axis (x.chunk(n, dim=1) of a map
// read as rows: EfficientViT-M's cascaded heads, each head's input a
// chunk of the argument plus the previous head's output).
func (s *synth) argParts(t *val, sc *scope) []*val {
	var out []*val
	w := t.shape[len(t.shape)-1]
	for _, x := range sc.vals {
		if !sc.arg[x] || x.opaque || len(x.shape) != len(t.shape) || !slices.Equal(x.shape[:len(x.shape)-1], t.shape[:len(t.shape)-1]) {
			continue
		}
		xw := x.shape[len(x.shape)-1]
		if xw <= w || xw%w != 0 || xw/w > maxArgParts {
			continue
		}
		for at := 0; at < xw; at += w {
			if p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: len(x.shape) - 1, Start: at, End: at + w}, args: []*val{x}, out: x.format, label: "a piece of an argument"}); p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// blocksAttention explains t [B, T, N, C] as attention within each of T
// blocks of N rows (NesT's blocks, a window axis kept apart from the
// batch): t read as [B·T, N, C], the scope's values [B, T, N', X] read
// the same way, per-head scores [B, H, T, N, N'] as [B·T, H, N, N'] (they
// show the head count). Only where the scope made a value of t's blocks.
func (s *synth) blocksAttention(t *val, sc *scope) *val {
	b, nb, n, c := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	made := 0
	mapped := sc.mapped(func(v *val) *val {
		switch {
		case len(v.shape) == 4 && v.shape[0] == b && v.shape[1] == nb && !v.opaque && !v.integral():
			if sc.own[v] {
				made++
			}
			return s.reshape(v, []int{b * nb, v.shape[2], v.shape[3]})
		case len(v.shape) == 5 && v.shape[0] == b && v.shape[2] == nb && v.shape[3] == n:
			// shapes only: the scores are read for their head count
			return &val{shape: []int{b * nb, v.shape[1], n, v.shape[4]}, format: v.format, opaque: true}
		}
		return nil
	})
	if made == 0 {
		return nil
	}
	proxy := s.readAs(t, []int{b * nb, n, c}, func(d []float32) []float32 { return d })
	proxy.reshapedFrom = true
	r := s.attentionOf(proxy, mapped, false)
	if r == nil {
		// heads merged last: the scores' head counts where the scope
		// shows them, else each power-of-two head width
		dims := s.hintedHeadDims(mapped, proxy)
		if len(dims) == 0 {
			for d := minHeadDim; d < c; d *= 2 {
				if c%d == 0 {
					dims = append(dims, d)
				}
			}
		}
		r = s.headsLastAttention(proxy, mapped, dims)
	}
	return s.reshape(r, t.shape)
}

// headsLastAttention explains t [B, S, H·D] as attention whose heads are
// merged last, each row's channels (d, h) rather than (h, d) ((attn @
// v).permute(.., 3, 1): NesT's): t read with its channels regrouped as
// (h, d) is explained as attention, then regrouped back, for each head
// width of dims.
func (s *synth) headsLastAttention(t *val, sc *scope, dims []int) *val {
	if len(t.shape) != 3 {
		return nil
	}
	b, rows, w := t.shape[0], t.shape[1], t.shape[2]
	for _, d := range dims {
		h := w / d
		if h < 2 || d < 2 {
			continue
		}
		proxy := s.readAs(t, t.shape, func(x []float32) []float32 {
			return permuteData(&val{shape: []int{b, rows, d, h}, data: x}, []int{0, 1, 3, 2})
		})
		proxy.reshapedFrom = true
		r := s.attentionOf(proxy, sc, false)
		if r == nil {
			continue
		}
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 3, 2}}, args: []*val{s.reshape(r, []int{b, rows, h, d})}, out: r.format, label: "heads merged last"})
		if v := s.reshape(p, t.shape); v != nil {
			return v
		}
	}
	return nil
}
