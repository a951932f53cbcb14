package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxAddends bounds the values peeledAdd tries as the known term.
const maxAddends = 8

// peeledAdd explains t as a + b: b a value of the scope with t's elements
// (a learned position table, an embedding's rows looked up by position
// ids), a an expression glue's first forms find for t − b (the patches
// joined after a class token, then the table added: a ViT's embeddings).
// Tried once every other form failed on t; never inside itself, and only
// over the first forms (no attention is searched for t − b).
func (s *synth) peeledAdd(t *val, sc *scope, vals []*val) *val {
	if s.peeling || len(t.shape) < 2 || t.integral() {
		return nil
	}
	v := s.peeledWith(t, sc, s.addends(t, vals))
	if v != nil && (t.format == precision.F32 || relRMS(t.format, v.data, t.data) <= looseFloor(t.format)) {
		return v
	}
	// the known term with its axes moved: in a narrow format the small
	// term of a sum is lost to the sum's rounding once the large one is
	// peeled off, so the small one, moved into t's layout, is peeled
	// instead (a residual added to a convolution's output laid out
	// frames first, then flattened), kept where it comes nearer
	moved := s.movedAddends(t, vals)
	if t.format == precision.F32 {
		// f32's rounding leaves the other term whole, so a moved term
		// is tried only where what remains is a pattern of at most two
		// values (a mask: a bias computed heads last and permuted, plus
		// the mask made additive, LongT5's returned position bias)
		moved = slices.DeleteFunc(moved, func(b *val) bool { return !fewValuesLeft(t, b, 2) })
	}
	w := s.peeledWith(t, sc, moved)
	if w == nil || v != nil && relRMS(t.format, v.data, t.data) <= relRMS(t.format, w.data, t.data) {
		return v
	}
	return w
}

// movedAddends are values of t's elements in another layout, their axes
// moved so that merging neighbours gives t's shape: at most maxAddends.
func (s *synth) movedAddends(t *val, vals []*val) []*val {
	var out []*val
	for _, v := range vals {
		if v.opaque || v.param || v.integral() || v.numel() != t.numel() || slices.Equal(v.shape, t.shape) || len(v.shape) > 6 {
			continue
		}
		for _, perm := range permutations(len(v.shape)) {
			if isIdentity(perm) || !mergesTo(permuteShape(v.shape, perm), t.shape) {
				continue
			}
			m := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "axes moved"})
			if r := s.reshape(m, t.shape); r != nil {
				out = append(out, r)
			}
			if len(out) == maxAddends {
				return out
			}
		}
	}
	return out
}

// mergesTo reports whether shape a becomes b by merging runs of
// neighbouring axes (axes of one aside).
func mergesTo(a, b []int) bool {
	i := 0
	for _, n := range b {
		p := 1
		for p < n && i < len(a) {
			p *= a[i]
			i++
		}
		if p != n {
			return false
		}
	}
	for ; i < len(a); i++ {
		if a[i] != 1 {
			return false
		}
	}
	return true
}

// peeledWith is peeledAdd over the given known terms.
func (s *synth) peeledWith(t *val, sc *scope, addends []*val) *val {
	s.peeling = true
	defer func() { s.peeling = false }()
	tol := tolerance(t.format)
	// the first sum near exact wins; in a narrow format, else the nearest
	// within tolerance (a term peeled off a much larger one leaves the
	// other to a rounding of the sum, which f32's is far inside)
	var best *val
	bestErr := math.Inf(1)
	for _, b := range addends {
		rest := s.minus(t, b)
		a := s.glueIn(rest, sc)
		if a == nil || a.opaque {
			continue
		}
		w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "a value added to an expression"}})
		if w == nil {
			continue
		}
		if e := relRMS(t.format, w.data, t.data); e <= tol && e < bestErr && s.everyStep(w, t, tol) {
			best, bestErr = w, e
			if e <= looseFloor(t.format) || t.format == precision.F32 {
				break
			}
		}
	}
	return best
}

// addends are the values peeledAdd tries as the known term of t = a + b,
// in t's shape or broadcast to it (a table of one frame's rows added to
// every frame of a batch): the scope's parameters first (tables), then
// its other values, most recent first, skipping values that are t itself
// to the format's tolerance (a − nothing), then the parameters longer
// than t on one axis cut to it (tableCuts).
func (s *synth) addends(t *val, vals []*val) []*val {
	tol := tolerance(t.format)
	var params, others []*val
	for _, v := range vals {
		if v.opaque || v.integral() || v.numel() > t.numel() || v.numel() < 2 || v.numel() == t.numel() && relRMS(t.format, v.data, t.data) <= tol {
			continue
		}
		r := s.reshape(v, t.shape)
		if m := s.cellsAsRows(v, t); m != nil {
			// a map [B, C, H, W] added to rows [B, H·W, C] as its cells
			// (EdgeNeXt's Fourier positions, reshaped and permuted); the
			// map as it lies is still tried below
			others = append(others, m)
		}
		if v.numel() < t.numel() {
			r = nil
			switch {
			case broadcasts(v.shape, t.shape):
				r = v
			case len(v.shape) < len(t.shape):
				// torch aligns the trailing axes: a table [1, D] added to
				// rows [B, 1, D] (a pooled class token plus a position)
				lead := slices.Concat(slices.Repeat([]int{1}, len(t.shape)-len(v.shape)), v.shape)
				if broadcasts(lead, t.shape) {
					r = s.reshape(v, lead)
				}
			}
		}
		if r == nil {
			continue
		}
		if v.param {
			params = append(params, r)
		} else {
			others = append(others, r)
		}
	}
	out := append(append(params, others...), s.tableCuts(t, vals)...)
	if len(out) > maxAddends {
		out = out[:maxAddends]
	}
	return append(out, s.resizedTables(t, vals)...)
}

// cellsAsRows is v [B, C, H, W] read as rows [B, H·W, C], t's shape (nil
// where v is no such map of t's elements).
func (s *synth) cellsAsRows(v, t *val) *val {
	if len(v.shape) != 4 || len(t.shape) != 3 || v.shape[0] != t.shape[0] || v.shape[1] != t.shape[2] ||
		v.shape[2]*v.shape[3] != t.shape[1] || t.shape[1] == 1 {
		return nil
	}
	return s.mapRows(v)
}

// mapRows is the map v [B, C, H, W] as rows [B, H·W, C], channels last.
func (s *synth) mapRows(v *val) *val {
	flat := s.reshape(v, []int{v.shape[0], v.shape[1], v.shape[2] * v.shape[3]})
	if flat == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{flat}, out: v.format, label: "a map's cells as rows"})
}

// minus is t − b (b of t's shape or broadcast to it) as a target of its
// own, at every step t is known at.
func (s *synth) minus(t, b *val) *val {
	sub := func(d, e []float32) []float32 {
		if len(e) != len(d) {
			e = broadcastData(e, b.shape, t.shape)
		}
		out := make([]float32, len(d))
		for i := range d {
			out[i] = d[i] - e[i]
		}
		return out
	}
	r := &val{shape: t.shape, data: sub(t.data, b.data), format: t.format, origin: t.origin + " − " + b.origin, reshapedFrom: true}
	if s.hasSteps(t) {
		r.perStep = func(st int) []float32 {
			d, ok := s.at(t, st)
			e, ok2 := s.at(b, st)
			if !ok || !ok2 || len(d) != len(t.data) || len(e) != len(b.data) {
				return nil
			}
			return sub(d, e)
		}
	}
	return r
}

// insertedRows explains t as a value p's rows inserted into a sequence
// glue explains: t = cat(x[:k], p, x[k:]) along the rows, x found for t
// with p's rows taken out (register tokens put after a class token, once
// the class token, the patches and their position table are summed).
// p is a value of the scope equal to rows [k, k+m) of t; tried once every
// other form failed on t, never inside itself.
func (s *synth) insertedRows(t *val, sc *scope, vals []*val) *val {
	if s.inserting || len(t.shape) < 2 || t.integral() {
		return nil
	}
	ax := len(t.shape) - 2
	n, rest := t.shape[ax], t.numel()/t.shape[ax]
	tol := tolerance(t.format)
	for _, p := range vals {
		if p.opaque || p.numel()%rest != 0 {
			continue
		}
		m := p.numel() / rest
		if m == 0 || m >= n {
			continue
		}
		for k := range n - m + 1 {
			if relRMS(t.format, p.data, sliceData(t, ax, k, k+m)) > tol {
				continue
			}
			x := s.readAs(t, append(append(slices.Clone(t.shape[:ax]), n-m), t.shape[ax+1:]...), func(d []float32) []float32 {
				return dropRows(d, t.shape, ax, k, k+m)
			})
			x.reshapedFrom = true
			s.inserting = true
			w := s.glueIn(x, sc)
			s.inserting = false
			if w == nil || w.opaque {
				break // p is at k; no other place of it is tried
			}
			pr := s.reshape(p, append(append(slices.Clone(t.shape[:ax]), m), t.shape[ax+1:]...))
			var pieces []*val
			if k > 0 {
				pieces = append(pieces, s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: k}, args: []*val{w}, out: w.format, label: "rows before"}))
			}
			pieces = append(pieces, pr)
			if k < n-m {
				pieces = append(pieces, s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: k, End: n - m}, args: []*val{w}, out: w.format, label: "rows after"}))
			}
			if slices.Contains(pieces, nil) {
				break
			}
			if v, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: pieces, out: t.format, label: "a value's rows inserted"}}); v != nil && relRMS(t.format, v.data, t.data) <= tol && s.everyStep(v, t, tol) {
				return v
			}
			break
		}
	}
	return nil
}

// dropRows is d (of shape) without its entries [lo, hi) along ax.
func dropRows(d []float32, shape []int, ax, lo, hi int) []float32 {
	inner := 1
	for _, n := range shape[ax+1:] {
		inner *= n
	}
	dim := shape[ax]
	out := make([]float32, 0, len(d)-len(d)/dim*(hi-lo))
	for o := 0; o < len(d); o += dim * inner {
		out = append(out, d[o:o+lo*inner]...)
		out = append(out, d[o+hi*inner:o+dim*inner]...)
	}
	return out
}

// peeledAddLate is peeledAdd in glue's second pass, whose values include
// the tables of sub-modules no call holds (a position embedding whose
// weight the forward reads, resized, without calling it); t − b is still
// explained by glue's first forms, as peeledAdd's always is.
func (s *synth) peeledAddLate(t *val, sc *scope, vals []*val) *val {
	late := s.late
	s.late = false
	defer func() { s.late = late }()
	return s.peeledAdd(t, sc, vals)
}

// tableCuts are the parameters of t's rank longer than t on one axis and
// equal on the rest, cut to t's length there at their start and at their
// end: a position table with an entry for a class row the target has
// not (its rows after the first added to the patches). Where the class
// row is the larger term's peel, t − table is the small term to a
// rounding of the sum only, which a narrow format's sum loses; the table
// peeled leaves the large term, which survives it.
func (s *synth) tableCuts(t *val, vals []*val) []*val {
	var params []*val
	for _, v := range vals {
		if v.param && !v.opaque && !v.integral() && v.numel() > t.numel() {
			params = append(params, v)
		}
	}
	return s.windows(t, -1, params)
}

// fewValuesLeft reports whether t − b holds at most n distinct values.
func fewValuesLeft(t, b *val, n int) bool {
	if len(t.data) != len(b.data) {
		return false
	}
	seen := make([]float32, 0, n+1)
	for i, x := range t.data {
		d := x - b.data[i]
		if !slices.Contains(seen, d) {
			if seen = append(seen, d); len(seen) > n {
				return false
			}
		}
	}
	return true
}
