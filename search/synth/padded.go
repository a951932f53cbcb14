package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// padded explains t [B, S, C] as rows of a value where a mask of the
// request is 1 and rows of a learned padding P [S, C] (a parameter of the
// scope), or one learned pad token [1, C] on every padded row, where it
// is 0: x·m + P·(1 − m), torch.where(mask, x, P). The
// rows equal to P's give m; x is a value of t's shape or two values joined
// along the rows, compared on the other rows only; m is made from the
// scope's integer masks when they, joined, are it (else a constant of
// the request).
func (s *synth) padded(t *val, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	B, S, C := t.shape[0], t.shape[1], t.shape[2]
	tol := tolerance(t.format)
	for _, P := range vals {
		// a padding row per row [S, C], or one learned token [1, C]
		// (or [C]) written to every padded row
		one := P.numel() == C && (len(P.shape) == 1 || len(P.shape) == 2 && P.shape[0] == 1)
		if !P.param || !slices.Equal(P.shape, []int{S, C}) && !one {
			continue
		}
		prow := func(r int) []float32 {
			if one {
				return P.data
			}
			return P.data[r*C : (r+1)*C]
		}
		keep := make([]float32, B*S)
		kept, padded := 0, 0
		for b := range B {
			for r := range S {
				row := t.data[(b*S+r)*C : (b*S+r+1)*C]
				if relRMS(t.format, row, prow(r)) <= tol {
					padded++
					continue
				}
				keep[b*S+r] = 1
				kept++
			}
		}
		if kept == 0 || padded == 0 {
			continue
		}
		x := s.keptRows(t, keep, vals)
		if x == nil {
			continue
		}
		m := s.rowMask(keep, B, S, vals)
		inv := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), m}, out: m.format, label: "1 − mask"})
		xm := s.derive(&expr{op: program.OpMul, args: []*val{x, m}, out: t.format, label: "kept rows"})
		pv := P
		if one {
			pv = s.reshape(P, []int{1, 1, C})
		}
		pm := s.derive(&expr{op: program.OpMul, args: []*val{pv, inv}, out: t.format, label: "padding rows"})
		if inv == nil || xm == nil || pm == nil {
			continue
		}
		if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{xm, pm}, out: t.format, label: "where(mask, x, padding)"}}); w != nil {
			return w
		}
	}
	return nil
}

// keptRows finds x of t's shape that matches t on the rows keep marks: a
// value, or two values joined along the rows (either order).
func (s *synth) keptRows(t *val, keep []float32, vals []*val) *val {
	B, S, C := t.shape[0], t.shape[1], t.shape[2]
	tol := tolerance(t.format)
	match := func(x *val) bool {
		var a, b []float32
		for i, k := range keep {
			if k != 0 {
				a = append(a, x.data[i*C:(i+1)*C]...)
				b = append(b, t.data[i*C:(i+1)*C]...)
			}
		}
		return relRMS(t.format, a, b) <= tol
	}
	var rows []*val // the values as [B, n, C]
	for _, v := range vals {
		if v.opaque || v.param || v.numel()%(B*C) != 0 || v.shape[len(v.shape)-1] != C {
			continue
		}
		if r := s.reshape(v, []int{B, v.numel() / (B * C), C}); r != nil {
			if r.shape[1] == S && match(r) {
				return r
			}
			rows = append(rows, r)
		}
	}
	for _, a := range rows {
		for _, b := range rows {
			if a == b || a.shape[1]+b.shape[1] != S {
				continue
			}
			j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{a, b}, out: a.format, label: "joined rows"})
			if j != nil && match(j) {
				return j
			}
		}
	}
	return nil
}

// rowMask is keep [B·S] as a [B, S, 1] value: the scope's integer masks
// joined along the rows where they are it, else a constant.
func (s *synth) rowMask(keep []float32, B, S int, vals []*val) *val {
	var masks []*val
	for _, v := range vals {
		if !v.opaque && v.integral() && len(v.shape) == 2 && v.shape[0] == B && zeroOne(v) {
			masks = append(masks, v)
		}
	}
	for _, a := range masks {
		if a.shape[1] == S && slices.Equal(a.data, keep) {
			return s.reshape(a, []int{B, S, 1})
		}
		for _, b := range masks {
			if a == b || a.shape[1]+b.shape[1] != S {
				continue
			}
			j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{a, b}, out: a.format, label: "masks joined"})
			if j != nil && slices.Equal(j.data, keep) {
				return s.reshape(j, []int{B, S, 1})
			}
		}
	}
	m := &val{shape: []int{B, S, 1}, data: keep, format: f32, origin: "row mask"}
	s.em.constant(m, "1 on the rows a value keeps, 0 where the reference put its learned padding (a constant of the request)")
	return m
}

// edgePadded explains t [.., S, C] as rows made another way (a value
// moved, patched or cut) followed by copies of their last row: a
// sequence padded to a multiple of some length by repeating its last
// token (later overwritten by a learned pad token, or masked). The rows
// from n on all equal row n − 1 in every sample; the first n are
// explained as a piece, then joined with the copies.
func (s *synth) edgePadded(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	ax := len(t.shape) - 2
	S, C := t.shape[ax], t.shape[ax+1]
	lead := t.numel() / (S * C)
	if S < 2 || C < 2 {
		return nil
	}
	n := 1 // the rows before the copies, in the sample that has most
	for b := range lead {
		blk := t.data[b*S*C : (b+1)*S*C]
		m := S
		for m > 1 && slices.Equal(blk[(m-1)*C:m*C], blk[(m-2)*C:(m-1)*C]) {
			m--
		}
		n = max(n, m)
	}
	if n >= S {
		return nil
	}
	head := s.part(t, ax, 0, n)
	var piece *val
	for _, try := range []func(*val, []*val) *val{s.moved, s.patched, s.cut} {
		if v := try(head, vals); v != nil && relRMS(head.format, v.data, head.data) <= tolerance(t.format) && s.everyStep(v, head, tolerance(t.format)) {
			piece = v
			break
		}
	}
	if piece == nil {
		return nil
	}
	piece = s.reshape(piece, head.shape)
	last := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: n - 1, End: n}, args: []*val{piece}, out: piece.format, label: "last row"})
	if last == nil {
		return nil
	}
	rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: S - n, Axis: ax}, args: []*val{last}, out: piece.format, label: "last row repeated"})
	if rep == nil {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: []*val{piece, rep}, out: t.format, label: "padded with its last row"}})
	return w
}

// zeroPadded explains t as a value made another way (moved, patched, cut
// or joined, in t's axis order or with its axes then moved) with, along
// one axis, entries that are all zero after it or before it: a sequence
// zero-padded at its end to a multiple of a patch or window (F.pad(x, (0,
// 0, 0, n))) before a strided convolution reads it channels first, or at
// its start before a causal convolution (F.pad(x, (k − 1, 0))). The zeros
// are constants of the request's shape; the rest is explained as a
// piece, then joined with them.
func (s *synth) zeroPadded(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) < 2 || len(t.shape) > 5 || t.integral() {
		return nil
	}
	if w := s.zeroPaddedAxes(t, sc, vals); w != nil {
		return w
	}
	for ax := 1; ax < len(t.shape); ax++ {
		S := t.shape[ax]
		n := S // the entries along ax before the zeros at the end
		for n > 0 && allZero(sliceData(t, ax, n-1, n)) {
			n--
		}
		lead := 0 // the zeros at the start
		for lead < n && allZero(sliceData(t, ax, lead, lead+1)) {
			lead++
		}
		if n == 0 || lead == 0 && n == S {
			continue
		}
		piece := s.padHead(s.part(t, ax, lead, n), sc, vals)
		if piece == nil {
			continue
		}
		zeros := func(k int, where string) *val {
			shape := slices.Clone(t.shape)
			shape[ax] = k
			return s.zeros(shape, t.format, t.origin+"/zero-padding-"+where, "zeros padding a value at its "+where+" along one axis (made from the request's shape)")
		}
		parts := []*val{piece}
		if lead > 0 {
			parts = append([]*val{zeros(lead, "start")}, parts...)
		}
		if n < S {
			parts = append(parts, zeros(S-n, "end"))
		}
		if w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: t.format, label: "padded with zeros"}}); w != nil {
			return w
		}
	}
	return nil
}

// zeroPaddedAxes is zeroPadded along two or more axes at once: a map
// padded with zeros on its borders (F.pad(x, (l, r, t, b)) before a
// convolution, TensorFlow's 'same' padding split unevenly: HF MobileNet's).
// The part inside every axis's zeros is explained as zeroPadded's piece
// is, then joined with zeros along each axis in turn; nil where fewer
// than two axes hold zeros at an end.
func (s *synth) zeroPaddedAxes(t *val, sc *scope, vals []*val) *val {
	type pad struct{ ax, lead, n int } // entries [lead, n) of ax are the core
	var pads []pad
	core := t
	for ax := 1; ax < len(t.shape); ax++ {
		S := t.shape[ax]
		n := S
		for n > 0 && allZero(sliceData(t, ax, n-1, n)) {
			n--
		}
		lead := 0
		for lead < n && allZero(sliceData(t, ax, lead, lead+1)) {
			lead++
		}
		if n == 0 {
			return nil
		}
		if lead > 0 || n < S {
			pads = append(pads, pad{ax, lead, n})
			core = s.part(core, ax, lead, n)
		}
	}
	if len(pads) < 2 {
		return nil
	}
	cur := s.padHead(core, sc, vals)
	for _, p := range pads {
		if cur == nil {
			return nil
		}
		zeros := func(k int, where string) *val {
			shape := slices.Clone(cur.shape)
			shape[p.ax] = k
			return &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: t.format, origin: fmt.Sprintf("%s/zero-padding-%d-%s", t.origin, p.ax, where),
				constNote: "zeros padding a map at its " + where + " along one axis (made from the request's shape)"}
		}
		parts := []*val{cur}
		if p.lead > 0 {
			parts = append([]*val{zeros(p.lead, "start")}, parts...)
		}
		if p.n < t.shape[p.ax] {
			parts = append(parts, zeros(t.shape[p.ax]-p.n, "end"))
		}
		cur = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: p.ax}, args: parts, out: t.format, label: "padded with zeros"})
	}
	if cur == nil || relRMS(t.format, cur.data, t.data) > tolerance(t.format) || !s.everyStep(cur, t, tolerance(t.format)) {
		return nil
	}
	return cur
}

// padHead explains a zero-padded value's head: by the forms that bring a
// value to a shape (moved, patched, cut, joined, a part times a
// rearrangement) in its own axis order,
// else in another order then permuted (the padded value is read channels
// first after the padding).
func (s *synth) padHead(head *val, sc *scope, vals []*val) *val {
	tol := tolerance(head.format)
	forms := []func(*val) *val{
		func(h *val) *val { return s.moved(h, vals) },
		func(h *val) *val { return s.patched(h, vals) },
		func(h *val) *val { return s.cut(h, vals) },
		func(h *val) *val { return s.joined(h, sc, vals) },
		func(h *val) *val { return s.viewTimesPart(h, sc, vals) },
		func(h *val) *val { return s.framePairsAveraged(h, vals) },
	}
	try := func(h *val) *val {
		for _, f := range forms {
			if v := f(h); v != nil && relRMS(h.format, v.data, h.data) <= tol && s.everyStep(v, h, tol) {
				return v
			}
		}
		return nil
	}
	if v := try(head); v != nil {
		return s.reshape(v, head.shape)
	}
	if len(head.shape) > 4 {
		return nil // 119 orders of five axes: a video's map is padded in its own order
	}
	for _, perm := range permutations(len(head.shape))[1:] {
		inv := make([]int, len(perm))
		for i, a := range perm {
			inv[a] = i
		}
		shape := make([]int, len(perm)) // the proxy's: permute(proxy, perm) has head's shape
		for i, a := range perm {
			shape[a] = head.shape[i]
		}
		proxy := s.readAs(head, shape, func(d []float32) []float32 { return permuteData(&val{shape: head.shape, data: d}, inv) })
		if v := try(proxy); v != nil {
			return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(v, shape)}, out: v.format, label: "axes moved"})
		}
	}
	return nil
}

// allZero reports whether every entry of d is zero.
func allZero(d []float32) bool {
	for _, x := range d {
		if x != 0 {
			return false
		}
	}
	return true
}
