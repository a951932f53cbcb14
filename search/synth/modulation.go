package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// vec is a per-sample, per-channel vector the scope holds or can cut:
// one chunk of a modulation projection, one row of a learned table, or
// the sum of both (a table added to a shared projection).
type vec struct {
	v     *val // [B, C]
	label string
	index int  // the chunk or row it is (for the chunk order)
	parts int  // how many chunks its source holds
	src   *val // the value chunked (not the table)
}

// vectors lists the [B, C] vectors the scope's values give: each value
// of B·k·C elements read as k chunks, each table [k, C] read as k rows
// (broadcast over B), and table rows plus chunks where both have k.
// spread gives a conditioning value of a smaller batch bb (dividing b)
// with each sample's vectors repeated b/bb times in turn, as the rows of
// a batch of frames share their video's conditioning (repeat_interleave
// over the batch); nil where v is not such a value.
func (s *synth) spread(v *val, b, c int) *val {
	if v.opaque || v.param || len(v.shape) < 2 || v.numel()%c != 0 {
		return nil
	}
	bb := v.shape[0]
	if bb == 0 || bb >= b || b%bb != 0 || v.numel()%(bb*c) != 0 || v.numel()/(bb*c) > 16 {
		return nil
	}
	w := v.numel() / bb
	r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: b / bb, Axis: 1}, args: []*val{s.reshape(v, []int{bb, 1, w})}, out: v.format, label: "per sample, spread over the batch"})
	return s.reshape(r, []int{b, w})
}

func (s *synth) vectors(sc *scope, b, c int) []vec {
	// keyed by the scope's size too: values added later (a second
	// modulation's chunks) join the pool
	key := fmt.Sprintf("%d/%d/%d", b, c, len(sc.vals))
	if v, ok := sc.vecs[key]; ok {
		return v
	}
	var out []vec
	var chunked, tables []*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || v.numel()%c != 0 {
			continue
		}
		switch {
		case v.numel()%(b*c) == 0 && (len(v.shape) < 3 || v.shape[len(v.shape)-2] != v.numel()/(b*c) || v.shape[0] == b) && !isRows(v, c):
			chunked = append(chunked, v)
		}
		if len(v.shape) >= 2 && v.shape[len(v.shape)-1] == c && v.numel()/c <= 16 && v.param {
			tables = append(tables, v) // a parameter [k, C] or [1, k, C]
		}
		if r := s.spread(v, b, c); r != nil {
			chunked = append(chunked, r)
		}
		if src := broadcastSource(v); src != nil && src.numel()%(b*c) == 0 && !slices.Contains(chunked, src) {
			// a vector the program broadcast over a new axis (one
			// modulation for every row): the vector itself
			chunked = append(chunked, src)
		}
	}
	piece := func(v *val, k, i, bb int) *val {
		r := s.reshape(v, []int{bb, k, c})
		if r == nil { // v not derived (the budget spent, or no such reshape)
			return nil
		}
		sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: i, End: i + 1}, args: []*val{r}, out: r.format})
		return s.reshape(sl, []int{bb, c})
	}
	for _, v := range chunked {
		k := v.numel() / (b * c)
		if k > 16 {
			continue
		}
		for i := range k {
			if p := piece(v, k, i, b); p != nil {
				out = append(out, vec{v: p, label: fmt.Sprintf("%s chunk %d/%d", v, i, k), index: i, parts: k, src: v})
			}
		}
	}
	for _, t := range tables {
		k := t.numel() / c
		for i := range k {
			if p := piece(t, k, i, 1); p != nil {
				out = append(out, vec{v: p, label: fmt.Sprintf("%s row %d/%d", t, i, k), index: i, parts: k})
			}
		}
		for _, v := range chunked {
			if v != t && v.numel() == b*c && k > 1 {
				// rows of the table plus one vector (broadcast over the rows)
				tr := s.reshape(t, []int{1, k, c})
				vr := s.reshape(v, []int{b, 1, c})
				sum := s.derive(&expr{op: program.OpAdd, args: []*val{tr, vr}, out: v.format, label: "table + vector"})
				for i := range k {
					if p := piece(sum, k, i, b); p != nil {
						out = append(out, vec{v: p, label: fmt.Sprintf("%s row + %s %d/%d", t, v, i, k), index: i, parts: k, src: v})
					}
				}
			}
			if v == t || v.numel() != b*k*c {
				continue
			}
			tr := s.reshape(t, []int{1, k, c})
			vr := s.reshape(v, []int{b, k, c})
			sum := s.derive(&expr{op: program.OpAdd, args: []*val{tr, vr}, out: v.format, label: "table + chunks"})
			for i := range k {
				if p := piece(sum, k, i, b); p != nil {
					out = append(out, vec{v: p, label: fmt.Sprintf("%s row + %s chunk %d/%d", t, v, i, k), index: i, parts: k, src: v})
				}
			}
		}
	}
	sc.vecs[key] = out
	return out
}

// vectorSum is u [B, k·C] plus the first k chunks of w [B, k'·C]
// (k ≤ k'), chunk i of it: two conditioning values summed before they
// are chunked, as an adaLN-LoRA norm adds its own projection to a shared
// timestep embedding (all of it, or its leading chunks).
type vectorSum struct {
	u, w *val
	k, i int
}

// sumPairs lists the scope's pairs of conditioning values a vectorSum
// may add: per-sample values of at most 16 chunks ([B, k·C] or
// [B, 1, k·C]), w at least as long as u.
func sumPairs(sc *scope, b, c int) [][2]*val {
	var chunked []*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || v.param || v.numel()%(b*c) != 0 || v.shape[0] != b || v.numel() > 16*b*c {
			continue
		}
		if len(v.shape) == 2 || len(v.shape) == 3 && v.shape[1] == 1 {
			chunked = append(chunked, v)
		}
	}
	var out [][2]*val
	for _, u := range chunked {
		for _, w := range chunked {
			if u != w && w.numel() >= u.numel() && (w.numel() > u.numel() || u.seq > w.seq) { // one order of an equal-sized pair
				out = append(out, [2]*val{u, w})
			}
		}
	}
	return out
}

// nearestOf is nearest over the scope's vectors, then, where none is
// within 10·tol, over the chunks of its summed pairs (vectorSum), scored
// on the host; only the winner is derived.
func (s *synth) nearestOf(sc *scope, b, c int, want []float64, f exec.ActKind, tol float64) (vec, float64) {
	v, e := nearest(s.vectors(sc, b, c), want, f, sc.activatedOf)
	if e <= 10*tol || len(want) != b*c {
		return v, e
	}
	w32 := make([]float32, len(want))
	for i, x := range want {
		w32[i] = float32(x)
	}
	got := make([]float32, b*c)
	var best *vectorSum
	be := e
	for _, p := range sumPairs(sc, b, c) {
		u, w := p[0], p[1]
		k, kw := u.numel()/(b*c), w.numel()/(b*c)
		for i := range k {
			for bi := range b {
				for ch := range c {
					x := u.data[bi*k*c+i*c+ch] + w.data[bi*kw*c+i*c+ch]
					if f != exec.ActIdentity {
						x = exec.Activate(f, x, 0)
					}
					got[bi*c+ch] = x
				}
			}
			if r := relRMS(u.format, got, w32); r < be {
				be, best = r, &vectorSum{u: u, w: w, k: k, i: i}
			}
		}
	}
	if best != nil && be <= 10*tol {
		if sv := s.sumVector(*best, b, c); sv.v != nil {
			return sv, be
		}
	}
	// then a table's row plus a summed pair (a table added to the sum of
	// two embedders' vectors)
	if p, te, ok := nearestTableSum(sc, b, c, want, f); ok && te < be && te <= 10*tol {
		if tv := s.tableSumVector(p, b, c); tv.v != nil {
			return tv, te
		}
	}
	// then a run of a table's rows plus chunks (the table longer)
	if p, re, ok := nearestTableRun(sc, b, c, want, f); ok && re < be {
		if rv := s.runVector(p, b, c); rv.v != nil {
			return rv, re
		}
	}
	// then chunks of three or four equal values summed in the order they
	// were made (several conditioning mappers' outputs added: a + a_sca +
	// a_crp, StableCascade's timestep blocks)
	if p, ne, ok := nearestManySum(sc, b, c, want, f); ok && ne < be && ne <= 10*tol {
		if nv := s.manySumVector(p, b, c); nv.v != nil {
			return nv, ne
		}
	}
	if best != nil {
		if sv := s.sumVector(*best, b, c); sv.v != nil {
			return sv, be
		}
	}
	return v, e
}

// maxSummedVectors bounds the equal conditioning values nearestManySum
// combines.
const maxSummedVectors = 8

// manySum is chunk i of k of the values in terms added in order.
type manySum struct {
	terms []*val
	k, i  int
}

// nearestManySum scores, on the host, chunk i of every sum of three or
// four of the scope's equal-sized per-sample values (sumPairs' kind) added
// in the order they were made, against want; the best and its error.
func nearestManySum(sc *scope, b, c int, want []float64, f exec.ActKind) (manySum, float64, bool) {
	bySize := map[int][]*val{}
	for _, p := range sumPairs(sc, b, c) {
		for _, v := range p {
			if !slices.Contains(bySize[v.numel()], v) {
				bySize[v.numel()] = append(bySize[v.numel()], v)
			}
		}
	}
	w32 := make([]float32, len(want))
	for i, x := range want {
		w32[i] = float32(x)
	}
	got := make([]float32, b*c)
	var best manySum
	be, found := math.Inf(1), false
	for _, vs := range bySize {
		if len(vs) < 3 {
			continue
		}
		slices.SortFunc(vs, func(x, y *val) int { return x.seq - y.seq })
		vs = vs[:min(len(vs), maxSummedVectors)]
		k := vs[0].numel() / (b * c)
		for _, set := range slices.Concat(subsets(len(vs), 3), subsets(len(vs), 4)) {
			terms := make([]*val, len(set))
			for j, ix := range set {
				terms[j] = vs[ix]
			}
			for i := range k {
				for bi := range b {
					for ch := range c {
						at := bi*k*c + i*c + ch
						x := terms[0].data[at]
						for _, t := range terms[1:] {
							x += t.data[at]
						}
						if f != exec.ActIdentity {
							x = exec.Activate(f, x, 0)
						}
						got[bi*c+ch] = x
					}
				}
				if r := relRMS(terms[0].format, got, w32); r < be {
					be, best, found = r, manySum{terms: terms, k: k, i: i}, true
				}
			}
		}
	}
	return best, be, found
}

// manySumVector derives a manySum's chunk.
func (s *synth) manySumVector(p manySum, b, c int) vec {
	sum := s.reshape(p.terms[0], []int{b, p.k * c})
	for _, t := range p.terms[1:] {
		if sum = s.derive(&expr{op: program.OpAdd, args: []*val{sum, s.reshape(t, []int{b, p.k * c})}, out: t.format, label: "vector + vector"}); sum == nil {
			return vec{}
		}
	}
	return s.chunkVector(sum, b, c, p.k, p.i, fmt.Sprintf("a sum of %d values chunk %d/%d", len(p.terms), p.i, p.k))
}

// chunkVector is chunk i of k of the per-sample sum [B, k·C], as a vector
// [B, C].
func (s *synth) chunkVector(sum *val, b, c, k, i int, label string) vec {
	r := s.reshape(sum, []int{b, k, c})
	sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: i, End: i + 1}, args: []*val{r}, out: sum.format})
	out := s.reshape(sl, []int{b, c})
	if out == nil {
		return vec{}
	}
	return vec{v: out, label: label, index: i, parts: k, src: sum}
}

// sumVector derives a vectorSum's chunk.
func (s *synth) sumVector(p vectorSum, b, c int) vec {
	kw := p.w.numel() / (b * c)
	wr := s.reshape(p.w, []int{b, kw * c})
	if kw > p.k && wr != nil {
		wr = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: p.k * c}, args: []*val{wr}, out: p.w.format, label: "leading chunks"})
	}
	ur := s.reshape(p.u, []int{b, p.k * c})
	if wr == nil || ur == nil {
		return vec{}
	}
	sum := s.derive(&expr{op: program.OpAdd, args: []*val{ur, wr}, out: p.u.format, label: "vector + vector"})
	if sum == nil {
		return vec{}
	}
	return s.chunkVector(sum, b, c, p.k, p.i, fmt.Sprintf("%s + %s chunk %d/%d", p.u, p.w, p.i, p.k))
}

// isRows: a value with rows of width c (a token sequence), not a vector.
func isRows(v *val, c int) bool { return len(v.shape) == 3 && v.shape[1] > 16 && v.shape[2] == c }

// affinePerChannel fits t[b, r, c] ≈ a[b, c]·x[b, r, c] + d[b, c] by
// least squares over the rows; ok is false when the fit leaves more than
// the format's tolerance. A sample whose rows of x are all equal in a
// channel (an unconditional caption of zeros, every row the projection's
// bias) shows no slope there: it takes another sample's (the batch of a
// guided step shares its modulation), its intercept what the rows then
// need; the caller's expression, checked against t, decides.
func affinePerChannel(x, t *val, tol float64) (a, d []float64, ok bool) {
	if len(t.shape) != 3 || !slices.Equal(x.shape, t.shape) || t.shape[1] < 2 {
		return nil, nil, false
	}
	B, R, C := t.shape[0], t.shape[1], t.shape[2]
	a, d = make([]float64, B*C), make([]float64, B*C)
	flat := make([]bool, B*C) // rows of x all equal: no slope to read
	for b := range B {
		for c := range C {
			var sx, sy, sxx, sxy float64
			for r := range R {
				i := (b*R+r)*C + c
				xv, yv := float64(x.data[i]), float64(t.data[i])
				sx, sy, sxx, sxy = sx+xv, sy+yv, sxx+xv*xv, sxy+xv*yv
			}
			n := float64(R)
			den := n*sxx - sx*sx
			if den <= 1e-12*n*sxx || den == 0 {
				flat[b*C+c] = true
				a[b*C+c], d[b*C+c] = sx/n, sy/n // the rows' means, for below
				continue
			}
			a[b*C+c] = (n*sxy - sx*sy) / den
			d[b*C+c] = (sy - a[b*C+c]*sx) / n
		}
	}
	for i, f := range flat {
		if !f {
			continue
		}
		c, mx, my := i%C, a[i], d[i]
		j := -1
		for b := range B {
			if k := b*C + c; !flat[k] {
				j = k
				break
			}
		}
		if j < 0 {
			return nil, nil, false // no sample shows this channel's slope
		}
		a[i], d[i] = a[j], my-a[j]*mx
	}
	fit := make([]float32, len(t.data))
	for b := range B {
		for r := range R {
			for c := range C {
				i := (b*R+r)*C + c
				fit[i] = float32(a[b*C+c]*float64(x.data[i]) + d[b*C+c])
			}
		}
	}
	return a, d, relRMS(t.format, fit, t.data) <= 2*tol
}

// nearest is the vector of the pool closest to want (after f), and its
// rel-RMS; act, when not nil, gives a vector's values after f (memoised).
func nearest(pool []vec, want []float64, f exec.ActKind, act func(*val, exec.ActKind) []float32) (vec, float64) {
	best, be := vec{}, math.Inf(1)
	w := make([]float32, len(want))
	for i, x := range want {
		w[i] = float32(x)
	}
	for _, p := range pool {
		if p.v.numel() != len(want) {
			continue
		}
		got := p.v.data
		switch {
		case f == exec.ActIdentity:
		case act != nil:
			got = act(p.v, f)
		default:
			got = activated(p.v.data, f)
		}
		if e := relRMS(p.v.format, got, w); e < be {
			best, be = p, e
		}
	}
	return best, be
}

// activated is f of each of xs.
func activated(xs []float32, f exec.ActKind) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = exec.Activate(f, x, 0)
	}
	return out
}

// actKey names a value's data after an activation.
type actKey struct {
	v *val
	f exec.ActKind
}

// activatedOf is v's data after f, memoised for the scope's life: the
// gate searches weigh the scope's vectors through the same activations
// for every target (a fifth of a Swin2SR search recomputed them).
func (sc *scope) activatedOf(v *val, f exec.ActKind) []float32 {
	k := actKey{v, f}
	if d, ok := sc.acts[k]; ok {
		return d
	}
	if sc.acts == nil {
		sc.acts = map[actKey][]float32{}
	}
	d := activated(v.data, f)
	sc.acts[k] = d
	return d
}

// modulated explains t = x·(1 + scale) + shift (or x·scale + shift, or
// without a shift) with scale and shift vectors of the scope.
func (s *synth) modulated(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) > 3 {
		if v := s.modulatedGrid(t, sc, vals); v != nil || len(t.shape) > 5 {
			return v
		}
		return s.modulatedMap(t, sc, vals)
	}
	if len(t.shape) != 3 {
		return nil
	}
	if t.shape[1] == 1 {
		if t.shape[0] > 1 {
			// rows laid out sequence first ([S, 1, C]: one sample): read
			// as the rows of that sample, [1, S, C], the same bytes
			proxy := *t
			proxy.shape = []int{1, t.shape[0], t.shape[2]}
			if r := s.reshape(s.modulated(&proxy, sc, vals), t.shape); r != nil {
				return r
			}
		}
		if t.shape[0] > 1 || s.splitting {
			// several samples of one row read as one sample's rows
			// above; a row split apart from the rest is no stream of
			// one row: a one-row reading of either fits any gated
			// residual (the residual's row as the shift)
			return nil
		}
		return s.modulatedOneRow(t, sc, vals)
	}
	tol := tolerance(t.format)
	B, C := t.shape[0], t.shape[2]
	// the six most recent values of t's shape that a per-channel affine
	// map takes to t (a cheap test on the host): a block that made many
	// values of the shape since its norm's (a second attention, its
	// residual) leaves the norm's output far down the recent ones
	var xs []*val
	for _, x := range sameShape(t, vals) {
		if len(xs) == 6 {
			break
		}
		if _, _, ok := affinePerChannel(x, t, tol); ok {
			xs = append(xs, x)
		}
	}
	modOf := func(x *val) *val {
		a, d, ok := affinePerChannel(x, t, tol)
		if !ok {
			return nil
		}
		var dn float64
		for _, v := range d {
			dn = math.Max(dn, math.Abs(v))
		}
		var cands []*expr
		info := map[*expr][2]vec{}
		for _, plus := range []bool{true, false} {
			want := slices.Clone(a)
			if plus {
				for i := range want {
					want[i]--
				}
			}
			scale, e1 := s.nearestOf(sc, B, C, want, exec.ActIdentity, tol)
			if e1 > 10*tol {
				continue
			}
			var shift *val
			var sh vec
			label := fmt.Sprintf("plus_one=%v scale=%s", plus, scale.label)
			if dn > 1e-6 {
				// a shift the pool holds; else none (the intercept of a
				// per-channel fit on rounded values is noise, not a shift:
				// the score decides)
				var e2 float64
				if sh, e2 = s.nearestOf(sc, B, C, d, exec.ActIdentity, tol); e2 <= 10*tol {
					shift = sh.v
					label += " shift=" + sh.label
				} else {
					sh = vec{}
				}
			}
			e := &expr{op: program.OpModulate, attrs: program.Attrs{Modulate: exec.ModulateParams{PlusOne: plus}},
				args: []*val{x, shift, scale.v}, out: t.format, label: label}
			cands = append(cands, e)
			info[e] = [2]vec{scale, sh}
		}
		if allNear(a, 1, 10*tol) && dn > 1e-6 {
			// no scale: x + shift (a shift-only modulation)
			if sh, e2 := s.nearestOf(sc, B, C, d, exec.ActIdentity, tol); e2 <= 10*tol {
				if col := s.reshape(sh.v, []int{B, 1, C}); col != nil {
					if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{x, col}, out: t.format, label: "shift=" + sh.label}}); w != nil {
						return w
					}
				}
			}
		}
		return s.bestModulation(t, sc, cands, info)
	}
	for _, x := range xs {
		if w := modOf(x); w != nil {
			return w
		}
	}
	// the rows of one sample laid out sequence first ([S, 1, C], the same
	// bytes as t's [1, S, C]): fitted on the host as t's shape first,
	// reshaped only where that fits
	for _, v := range vals {
		if v.opaque || B != 1 || len(v.shape) != 3 || v.shape[0] != t.shape[1] || v.shape[1] != 1 || v.shape[2] != C {
			continue
		}
		if _, _, ok := affinePerChannel(&val{shape: t.shape, data: v.data, format: v.format}, t, tol); !ok {
			continue
		}
		if x := s.reshape(v, t.shape); x != nil {
			if w := modOf(x); w != nil {
				return w
			}
		}
	}
	return nil
}

// modulatedOneRow explains t [1, 1, C], a stream of one row (a one-token
// caption's), as x·(1 + scale) + shift or x·scale + shift, x one
// of the six most recent values of t's shape. One row shows no slope per
// channel, so each of the scope's vectors is tried as the scale and the
// shift it then needs is looked up among them (none where it needs none):
// a wrong scale leaves a shift no vector holds.
func (s *synth) modulatedOneRow(t *val, sc *scope, vals []*val) *val {
	if t.numel() == 0 || t.integral() {
		return nil
	}
	tol := tolerance(t.format)
	B, C := t.shape[0], t.shape[2]
	xs := sameShape(t, vals)
	xs = xs[:min(6, len(xs))]
	// conditioning vectors only: not values of the stream (t's shape) nor
	// rows of values of several rows per sample read as chunks. A gated
	// residual x + g·y reads as y·g + x, the residual as the shift: that
	// is gated's reading, not a modulation
	pool := slices.DeleteFunc(slices.Clone(s.vectors(sc, B, C)), func(v vec) bool {
		src := v.src
		return src != nil && (slices.Equal(src.shape, t.shape) || len(src.shape) >= 3 && src.shape[len(src.shape)-1] == C && src.shape[len(src.shape)-2] > 1)
	})
	var cands []*expr
	info := map[*expr][2]vec{}
	var tn float64
	for _, y := range t.data {
		tn += float64(y) * float64(y)
	}
	want := make([]float64, B*C)
	for _, x := range xs {
		for _, scale := range pool {
			if scale.v == nil || len(scale.v.data) != B*C {
				continue
			}
			for _, plus := range []bool{true, false} {
				var wn float64
				for i := range want {
					a := float64(scale.v.data[i])
					if plus {
						a++
					}
					want[i] = float64(t.data[i]) - float64(x.data[i])*a
					wn += want[i] * want[i]
				}
				label := fmt.Sprintf("plus_one=%v scale=%s", plus, scale.label)
				var shift vec
				if wn > tol*tol*tn {
					sh, e := nearest(pool, want, exec.ActIdentity, sc.activatedOf)
					if e > 10*tol || sh.v == nil {
						continue
					}
					shift = sh
					label += " shift=" + sh.label
				}
				e := &expr{op: program.OpModulate, attrs: program.Attrs{Modulate: exec.ModulateParams{PlusOne: plus}},
					args: []*val{x, shift.v, scale.v}, out: t.format, label: label}
				cands = append(cands, e)
				info[e] = [2]vec{scale, shift}
			}
		}
	}
	return s.bestModulation(t, sc, cands, info)
}

// bestModulation is the best of the modulation candidates cands (each
// with its scale and shift in info), recorded for the factors with every
// candidate's score; nil where none reproduces t.
func (s *synth) bestModulation(t *val, sc *scope, cands []*expr, info map[*expr][2]vec) *val {
	w, ev := s.best(t, cands)
	if w == nil {
		return nil
	}
	w.fit = &leafFit{kind: "modulate", candidates: ev}
	in := info[w.from]
	s.mods = append(s.mods, modRecord{scope: sc.module, boundary: t.origin, plusOne: w.from.attrs.Modulate.PlusOne,
		scale: in[0], shift: in[1], candidates: ev})
	return w
}

// gated explains t = x + g(gate)·y, gate a vector of the scope and g
// the identity, tanh or sigmoid.
func (s *synth) gated(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	same := sameShape(t, vals)
	n := gatedOperands(t)
	more := slices.Concat(s.rowSlices(t, vals), s.imagesAsRows(t, vals))
	if r := s.gatedOf(t, sc, append(slices.Clone(same[:min(n, len(same))]), more...)); r != nil || len(same) <= n {
		return r
	}
	// a second stream of t's shape (a caption as long as the image's
	// patches) crowds the recent few: its residual lies further back
	return s.gatedOf(t, sc, append(slices.Clone(same[:min(maxGatedOperands, len(same))]), more...))
}

// maxGatedOperands bounds gated's second look over the scope's values of
// t's shape.
const maxGatedOperands = 32

// gatedOperands bounds the scope's most recent values of t's shape
// gated pairs: 8, or 24 where t has one row per sample (a one-token
// caption's stream), whose shape every per-sample vector of the scope
// shares: the modulation's chunks would crowd out the residual and its
// branch.
func gatedOperands(t *val) int {
	if t.shape[1] == 1 {
		return 24
	}
	return 8
}

// gatedMoved is gated with the values of t's size and width in another
// shape among the operands, reshaped to t's (a branch computed over the
// token grid [B, F, H, W, C], gated back onto the rows): tried once every
// other form failed.
func (s *synth) gatedMoved(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	var moved []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) < 2 || slices.Equal(v.shape, t.shape) || v.numel() != t.numel() || v.shape[len(v.shape)-1] != t.shape[2] {
			continue
		}
		if r := s.reshape(v, t.shape); r != nil {
			moved = append(moved, r)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > 8 {
		ops = ops[:8]
	}
	return s.gatedOf(t, sc, append(ops, moved...))
}

// gatedOf is gated over the operands ops: the first pair near exact
// (within looseFloor), else the pair with the least error within the
// tolerance (in a narrow format a wrong pair can come within it: the
// residual and the branch swapped, a gate near one).
func (s *synth) gatedOf(t *val, sc *scope, ops []*val) *val {
	tol := tolerance(t.format)
	B, R, C := t.shape[0], t.shape[1], t.shape[2]
	var best *val
	var bestRec gateRecord
	bestErr := math.Inf(1)
	for _, x := range ops {
		for _, y := range ops {
			if x == y {
				continue
			}
			g := make([]float64, B*C)
			for b := range B {
				for c := range C {
					var num, den float64
					for r := range R {
						i := (b*R+r)*C + c
						yv := float64(y.data[i])
						num += (float64(t.data[i]) - float64(x.data[i])) * yv
						den += yv * yv
					}
					if den > 0 {
						g[b*C+c] = num / den
					}
				}
			}
			var cands []*expr
			info := map[*expr]vec{}
			for _, f := range []exec.ActKind{exec.ActIdentity, exec.ActTanh, exec.ActSigmoid} {
				gate, e := s.nearestOf(sc, B, C, g, f, tol)
				if e > 10*tol {
					continue
				}
				ex := &expr{op: program.OpGatedResidual, attrs: program.Attrs{Act: f}, args: []*val{x, y, gate.v}, out: t.format,
					label: f.String()}
				cands = append(cands, ex)
				info[ex] = gate
			}
			if w, ev := s.best(t, cands); w != nil {
				w.fit = &leafFit{kind: "gated", act: w.from.attrs.Act, candidates: ev}
				rec := gateRecord{scope: sc.module, boundary: t.origin, fn: w.from.attrs.Act, gate: info[w.from], candidates: ev}
				e := relRMS(t.format, w.data, t.data)
				if e <= looseFloor(t.format) {
					s.gates = append(s.gates, rec)
					return w
				}
				if e < bestErr {
					best, bestRec, bestErr = w, rec, e
				}
			}
		}
	}
	if best != nil {
		s.gates = append(s.gates, bestRec)
	}
	return best
}

// modRecord is one modulation the search explained, for the factors.
type modRecord struct {
	scope, boundary string
	plusOne         bool
	scale, shift    vec
	candidates      []semantics.Candidate
}

// gateRecord is one gated residual the search explained.
type gateRecord struct {
	scope, boundary string
	fn              exec.ActKind
	gate            vec
	candidates      []semantics.Candidate
}

// rowSlices are the first and the last rows of the scope's longer
// sequences, cut to t's rows: one stream's part of a joined sequence
// (a residual computed over the joined rows, then split).
func (s *synth) rowSlices(t *val, vals []*val) []*val {
	var out []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != t.shape[0] || v.shape[2] != t.shape[2] || v.shape[1] <= t.shape[1] {
			continue
		}
		for _, start := range []int{0, v.shape[1] - t.shape[1]} {
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: start, End: start + t.shape[1]}, args: []*val{v}, out: v.format, label: "rows"}); c != nil {
				out = append(out, c)
			}
		}
		if len(out) >= 8 {
			break
		}
	}
	return out
}

// allNear reports whether every x is within tol of c (relative to c).
func allNear(xs []float64, c, tol float64) bool {
	for _, x := range xs {
		if math.Abs(x-c) > tol*math.Max(1, math.Abs(c)) {
			return false
		}
	}
	return true
}

// modulatedGrid explains a target that keeps its token grid ([B, F, h, w,
// C], the per-sample vectors broadcast as [:, None, None]) as modulated
// rows [B, F·h·w, C] of the values of its shape, then reshaped back.
func (s *synth) modulatedGrid(t *val, sc *scope, vals []*val) *val {
	B, C := t.shape[0], t.shape[len(t.shape)-1]
	rows := []int{B, t.numel() / (B * C), C}
	var xs []*val
	for _, x := range sameShape(t, vals) {
		if r := s.reshape(x, rows); r != nil {
			xs = append(xs, r)
		}
	}
	if len(xs) == 0 {
		return nil
	}
	proxy := *t
	proxy.shape = rows
	return s.reshape(s.modulated(&proxy, sc, xs), t.shape)
}

// modulatedMap explains a channels-first map t [B, C, H, W] (or a video
// map [B, C, T, H, W]) modulated per channel by per-sample vectors
// broadcast as [:, :, None, None] (a diffusion UNet's "scale_shift"
// residual blocks: norm2(x)·(1 + scale) + shift, the halves of a
// projected timestep embedding; a video VAE's timestep-conditioned
// blocks) as modulated rows [B, cells, C] of the map's cells, then moved
// back.
func (s *synth) modulatedMap(t *val, sc *scope, vals []*val) *val {
	r := len(t.shape)
	B, C := t.shape[0], t.shape[1]
	last, first := []int{0}, []int{0, r - 1} // channels last, and back
	cells := 1
	for a := 2; a < r; a++ {
		last = append(last, a)
		first = append(first, a-1)
		cells *= t.shape[a]
	}
	last = append(last, 1)
	rows := []int{B, cells, C}
	var xs []*val
	for _, x := range sameShape(t, vals) {
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: last}, args: []*val{x}, out: x.format, label: "channels last"})
		if r := s.reshape(p, rows); r != nil {
			xs = append(xs, r)
		}
	}
	// values already channels last (a norm applied through movedim)
	moved := append([]int{B}, t.shape[2:]...)
	for _, x := range vals {
		if !x.opaque && x.format == t.format && slices.Equal(x.shape, append(slices.Clone(moved), C)) {
			if r := s.reshape(x, rows); r != nil {
				xs = append(xs, r)
			}
		}
	}
	if len(xs) == 0 {
		return nil
	}
	proxy := s.readAs(t, rows, func(d []float32) []float32 { return permuteData(&val{shape: t.shape, data: d}, last) })
	m := s.reshape(s.modulated(proxy, sc, xs), append(moved, C))
	if m == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: first}, args: []*val{m}, out: m.format, label: "channels first"})
}

// headGated explains t [B, R, C] = x + f(p)·y where p is a parameter of
// the scope with one entry per head (H of them, C = H·D), each broadcast
// over its head's D channels: per-head outputs mixed before one output
// projection (self + tanh(gate)[h]·cross), f identity, tanh or sigmoid.
// x and y may keep their heads unmerged ([B, R, H, D]).
func (s *synth) headGated(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	tol := tolerance(t.format)
	B, R, C := t.shape[0], t.shape[1], t.shape[2]
	var gates []*val
	for _, v := range sc.vals {
		if v.param && !v.opaque && len(v.shape) == 1 && v.shape[0] > 1 && v.shape[0] < C && C%v.shape[0] == 0 {
			gates = append(gates, v)
		}
	}
	if len(gates) == 0 {
		return nil
	}
	// everything is scored on the host first (a reshape moves no
	// element): the program is derived only for a gate that fits
	var ops []*val
	for _, v := range vals {
		if len(ops) == 8 {
			break
		}
		if !v.opaque && v.numel() == t.numel() && len(v.shape) >= 3 && v.shape[0] == B {
			ops = append(ops, v)
		}
	}
	for _, x := range ops {
		for _, y := range ops {
			if x == y {
				continue
			}
			// the per-channel gate (t − x)·y / y·y over the rows
			g := make([]float64, C)
			for c := range C {
				var num, den float64
				for i := c; i < B*R*C; i += C {
					yv := float64(y.data[i])
					num += (float64(t.data[i]) - float64(x.data[i])) * yv
					den += yv * yv
				}
				if den > 0 {
					g[c] = num / den
				}
			}
			for _, p := range gates {
				d := C / p.numel()
				host := &val{shape: []int{1, C}, data: make([]float32, C), format: p.format}
				for c := range C {
					host.data[c] = p.data[c/d]
				}
				pool := []vec{{v: host}}
				fits := false
				for _, f := range []exec.ActKind{exec.ActIdentity, exec.ActTanh, exec.ActSigmoid} {
					_, e := nearest(pool, g, f, nil)
					fits = fits || e <= 10*tol
				}
				if !fits {
					continue
				}
				rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: d, Axis: 1}, args: []*val{s.reshape(p, []int{p.numel(), 1})}, out: p.format, label: "per head"})
				gv, xr, yr := s.reshape(rep, []int{1, C}), s.reshape(x, t.shape), s.reshape(y, t.shape)
				if gv == nil || xr == nil || yr == nil {
					continue
				}
				// every function scored, for the evidence
				var cands []*expr
				for _, f := range []exec.ActKind{exec.ActIdentity, exec.ActTanh, exec.ActSigmoid} {
					cands = append(cands, &expr{op: program.OpGatedResidual, attrs: program.Attrs{Act: f}, args: []*val{xr, yr, gv}, out: t.format, label: f.String()})
				}
				if w, ev := s.best(t, cands); w != nil {
					w.fit = &leafFit{kind: "gated", act: w.from.attrs.Act, candidates: ev}
					s.gates = append(s.gates, gateRecord{scope: sc.module, boundary: t.origin, fn: w.from.attrs.Act, gate: vec{v: gv, label: fmt.Sprintf("%s per head", p)}, candidates: ev})
					return w
				}
			}
		}
	}
	return nil
}

// aVector explains t [B, C] (or [B, 1, C]) as a row of a learned table
// [k, C] plus the k-th chunk of a value of B·k·C, on its own (a module
// that adds its table to the shared timestep projection and returns the
// chunks, before any block reads them): one of the scope's conditioning
// vectors. Tried once every other form failed, where the scope holds
// such a table and value.
func (s *synth) aVector(t *val, sc *scope) *val {
	if len(t.shape) < 2 || len(t.shape) > 3 || len(t.shape) == 3 && t.shape[1] != 1 {
		return nil
	}
	b, c := t.shape[0], t.shape[len(t.shape)-1]
	// a learned table [k, C] the scope holds, and a value of B·k·C it adds to
	table := slices.ContainsFunc(sc.vals, func(p *val) bool {
		k := p.numel() / c
		return p.param && len(p.shape) >= 2 && p.shape[len(p.shape)-1] == c && k >= 2 && k <= 16 &&
			slices.ContainsFunc(sc.vals, func(v *val) bool { return !v.param && !v.opaque && v.numel() == b*k*c })
	})
	if !table {
		return nil
	}
	tol := tolerance(t.format)
	for _, v := range s.vectors(sc, b, c) {
		if v.v == nil || relRMS(t.format, v.v.data, t.data) > tol {
			continue
		}
		if r := s.reshape(v.v, t.shape); r != nil && s.everyStep(r, t, tol) {
			return r
		}
	}
	return nil
}
