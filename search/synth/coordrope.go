package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitCoordRope explains cos and sin tables made from float position
// coordinates among the call's arguments ([.., A, N] or [.., N, A], or
// with a trailing bound pair reduced by its mean): per axis an affine
// map u = 2·(m/max) − 1, angles u·f_i over a frequency ladder, laid out
// frequency-major or axis-major, each angle twice (interleaved) or the
// two halves, after leading channels that never turn (cos 1, sin 0).
// The map and the ladder are read off the angles (readCoordRope), never
// assumed; the tables are recomputed by the program's own f32 ops (the
// midpoint, the map, the product, cos, sin) and must reproduce both.
// Tried where every table of integer ids fails. Trailing channels whose
// cos and sin are both 0 on every row (pairs a model pads with zeros,
// which zero those channels of q and k: deadTail) are left out of the
// fit and joined back as zeros after the recomputed tables.
func (s *synth) fitCoordRope(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	dead := deadTail(cosT, sinT, d)
	if dead == 0 {
		return s.fitCoordRopeLive(xs, cosT, sinT)
	}
	if d-dead < 2 {
		return nil, nil
	}
	rows := cosT.numel() / d
	live := func(t *val) *val {
		v := &val{shape: []int{rows, d - dead}, data: make([]float32, 0, rows*(d-dead)), format: t.format, origin: t.origin}
		for r := range rows {
			v.data = append(v.data, t.data[r*d:r*d+d-dead]...)
		}
		return v
	}
	cv, sv := s.fitCoordRopeLive(xs, live(cosT), live(sinT))
	if cv == nil || sv == nil {
		return nil, nil
	}
	pad := func(v, t *val) *val {
		col := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: 1}, args: []*val{v}, out: v.format})
		zero := s.derive(&expr{op: program.OpSub, args: []*val{col, col}, out: v.format, label: "dead pairs (cos = sin = 0)"})
		if dead > 1 {
			zero = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: dead, Axis: 1}, args: []*val{zero}, out: v.format})
		}
		w := s.reshape(s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{v, zero}, out: v.format, label: "live channels, then the dead"}), t.shape)
		if w == nil || relRMS(t.format, w.data, t.data) > tolerance(t.format) {
			return nil
		}
		w.fit = v.fit
		return w
	}
	cw, sw := pad(cv, cosT), pad(sv, sinT)
	if cw == nil || sw == nil {
		return nil, nil
	}
	return cw, sw
}

// deadTail is the number of trailing channels of tables [.., d] whose cos
// and sin are both exactly 0 on every row (an even count: whole pairs in
// either layout's tail); 0 where none is, or every channel is.
func deadTail(cosT, sinT *val, d int) int {
	n := 0
	for c := d - 1; c >= 0; c-- {
		for r := 0; r < len(cosT.data); r += d {
			if cosT.data[r+c] != 0 || sinT.data[r+c] != 0 {
				if n == d || n%2 != 0 {
					return 0
				}
				return n
			}
		}
		n++
	}
	return 0
}

// fitCoordRopeLive is fitCoordRope on tables every channel of which turns
// or is still (cos² + sin² = 1).
func (s *synth) fitCoordRopeLive(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	pad := stillLead(cosT, sinT, d)
	if rows < 2 || d-pad < 2 {
		return nil, nil
	}
	var best *coordCand
	for _, x := range xs {
		if x.intType || x.opaque && x.from == nil && len(x.keys) == 0 {
			continue
		}
		for _, in := range s.coordMidpoints(x, rows) {
			for _, layout := range tailLayouts(cosT, sinT, d, pad) {
				for _, c := range s.coordCands(in, layout, pad, cosT, sinT) {
					if c.score <= tolerance(cosT.format) && (best == nil || c.score < best.score) {
						best = c
					}
				}
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	for _, c := range append(best.consts, best.in.consts...) {
		switch {
		case c.name != "":
		case c.origin == "":
			s.em.constScalar(c)
		default:
			s.em.constant(c, strings.TrimPrefix(c.origin, cosT.origin+"/")+": read off the RoPE tables' angles at the coordinates (readCoordRope)")
		}
	}
	fit := &leafFit{kind: "rope_coords", label: best.label}
	best.cos.fit, best.sin.fit = fit, fit
	s.coordRopes = append(s.coordRopes, s.coordRecord(best, cosT, sinT))
	return best.cos, best.sin
}

// coordInput is one reading of an argument as coordinates: m [rows, A].
type coordInput struct {
	m      *val
	axes   int
	note   string
	consts []*val // scalars the midpoint reads
}

// coordCand is one recomputed pair of tables and how it was made.
type coordCand struct {
	in     coordInput
	read   coordReading
	layout exec.RopeLayout
	pad    int
	mul    bool // u = m·(2/max) − 1 rather than (m/max)·2 − 1
	order  string
	slot   func(i, ax int) int
	f      int
	cos    *val
	sin    *val
	score  float64
	consts []*val
	label  string
	exact  float64 // the fraction of both tables' entries equal to the bit
}

// coordMidpoints reads x as coordinates of rows positions over 1 to 4
// axes: axes before the positions ([.., A, N]) or after ([.., N, A]),
// with or without a trailing pair of bounds ((start + end)/2).
func (s *synth) coordMidpoints(x *val, rows int) []coordInput {
	sh := x.shape
	n := len(sh)
	var out []coordInput
	for _, bounds := range []bool{true, false} {
		base, msh := x, sh
		var two *val
		if bounds {
			if n < 2 || sh[n-1] != 2 {
				continue
			}
			lo := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: 0, End: 1}, args: []*val{x}, out: x.format})
			hi := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: 1, End: 2}, args: []*val{x}, out: x.format})
			sum := s.derive(&expr{op: program.OpAdd, args: []*val{lo, hi}, out: precision.F32, label: "start + end"})
			two = &val{shape: []int{1}, data: []float32{2}, format: precision.F32}
			msh = sh[:n-1]
			base = s.reshape(s.derive(&expr{op: program.OpDiv, args: []*val{sum, two}, out: precision.F32, label: "midpoint"}), msh)
			if base == nil {
				continue
			}
		}
		k := len(msh)
		if k >= 2 && msh[k-2] >= 1 && msh[k-2] <= 4 && exec.Numel(msh)/msh[k-2] == rows {
			a, p := msh[k-2], base
			if a > 1 {
				perm := make([]int, k)
				for i := range perm {
					perm[i] = i
				}
				perm[k-2], perm[k-1] = k-1, k-2
				p = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{base}, out: base.format, label: "axes last"})
			}
			if m := s.reshape(p, []int{rows, a}); m != nil {
				out = append(out, coordInput{m, a, fmt.Sprintf("axes first, bounds %v", bounds), scalars(two)})
			}
		}
		if a := exec.Numel(msh) / rows; a > 1 && a <= 4 && a*rows == exec.Numel(msh) && msh[k-1] == a {
			if m := s.reshape(base, []int{rows, a}); m != nil {
				out = append(out, coordInput{m, a, fmt.Sprintf("axes last, bounds %v", bounds), scalars(two)})
			}
		}
	}
	return out
}

// scalars lists the non-nil ones.
func scalars(vs ...*val) []*val {
	var out []*val
	for _, v := range vs {
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

// stillLead is the number of leading channels that never turn.
func stillLead(cosT, sinT *val, d int) int {
	for c := range d {
		for r := 0; r < len(cosT.data); r += d {
			if cosT.data[r+c] != 1 || sinT.data[r+c] != 0 {
				return c
			}
		}
	}
	return d
}

// tailLayouts are the layouts of the channels after pad: each angle
// twice in a row (interleaved) or the two halves equal.
func tailLayouts(cosT, sinT *val, d, pad int) []exec.RopeLayout {
	w := d - pad
	if w%2 != 0 {
		return nil
	}
	eq := func(a, b int) bool {
		for r := 0; r < len(cosT.data); r += d {
			if cosT.data[r+a] != cosT.data[r+b] || sinT.data[r+a] != sinT.data[r+b] {
				return false
			}
		}
		return true
	}
	pairs, halves := true, true
	for j := range w / 2 {
		pairs = pairs && eq(pad+2*j, pad+2*j+1)
		halves = halves && eq(pad+j, pad+w/2+j)
	}
	var out []exec.RopeLayout
	if pairs {
		out = append(out, exec.RopeInterleaved)
	}
	if halves {
		out = append(out, exec.RopeHalf)
	}
	return out
}

// coordCands reads the tables' angles at in's coordinates in both slot
// orders and recomputes the tables of every reading, in both forms of
// the map.
func (s *synth) coordCands(in coordInput, layout exec.RopeLayout, pad int, cosT, sinT *val) []*coordCand {
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	k := (d - pad) / 2
	a := in.axes
	if k%a != 0 {
		return nil
	}
	f := k / a
	phi := make([][]float64, rows)
	for r := range rows {
		phi[r] = make([]float64, k)
		for j := range k {
			c := r*d + pad + j
			if layout == exec.RopeInterleaved {
				c = r*d + pad + 2*j
			}
			phi[r][j] = math.Atan2(float64(sinT.data[c]), float64(cosT.data[c]))
		}
	}
	m := make([][]float32, rows)
	for r := range rows {
		m[r] = in.m.data[r*a : (r+1)*a]
	}
	orders := []struct {
		name string
		slot func(i, ax int) int
	}{{"frequency-major", func(i, ax int) int { return i*a + ax }}, {"axis-major", func(i, ax int) int { return ax*f + i }}}
	if a == 1 || f == 1 {
		orders = orders[:1] // the two orders are one
	}
	var out []*coordCand
	for _, o := range orders {
		for _, rd := range readCoordRope(phi, m, a, f, o.slot, angleNoise(cosT.format)) {
			for _, mul := range []bool{false, true} {
				c := &coordCand{in: in, read: rd, layout: layout, pad: pad, mul: mul, order: o.name, slot: o.slot, f: f}
				if s.coordTables(c, cosT, sinT) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// coordTables builds c's tables: u from the midpoints, u·f laid out,
// the still channels joined before, cos and sin; scored against both.
func (s *synth) coordTables(c *coordCand, cosT, sinT *val) bool {
	rows, a, f := c.in.m.shape[0], c.in.axes, c.f
	lit := func(name string, shape []int, data []float32) *val {
		v := &val{shape: shape, data: data, format: precision.F32, origin: cosT.origin + "/" + name}
		c.consts = append(c.consts, v)
		return v
	}
	u := c.in.m
	if slices.ContainsFunc(c.read.maxes, func(x float32) bool { return x != 0 }) {
		if slices.Contains(c.read.maxes, 0) {
			return false // one map for every axis: mixed forms are not read
		}
		one := &val{shape: []int{1}, data: []float32{1}, format: precision.F32}
		c.consts = append(c.consts, one)
		if c.mul {
			inv := make([]float32, a)
			for i, mx := range c.read.maxes {
				inv[i] = 2 / mx
			}
			g := s.derive(&expr{op: program.OpMul, args: []*val{u, lit("2 over the position maxima", []int{1, a}, inv)}, out: precision.F32, label: "m·(2/max)"})
			u = s.derive(&expr{op: program.OpSub, args: []*val{g, one}, out: precision.F32, label: "− 1"})
		} else {
			g := s.derive(&expr{op: program.OpDiv, args: []*val{u, lit("position maxima", []int{1, a}, slices.Clone(c.read.maxes))}, out: precision.F32, label: "m/max"})
			two := &val{shape: []int{1}, data: []float32{2}, format: precision.F32}
			c.consts = append(c.consts, two)
			g = s.derive(&expr{op: program.OpMul, args: []*val{g, two}, out: precision.F32, label: "·2"})
			u = s.derive(&expr{op: program.OpSub, args: []*val{g, one}, out: precision.F32, label: "− 1"})
		}
	}
	ushape, fshape := []int{rows, 1, a}, []int{1, f, a}
	if c.order == "axis-major" {
		ushape, fshape = []int{rows, a, 1}, []int{1, a, f}
	}
	ang := s.derive(&expr{op: program.OpMul, args: []*val{s.reshape(u, ushape), lit("frequencies", fshape, c.read.freqs)}, out: precision.F32, label: "u·f"})
	full := s.layAngles(s.reshape(ang, []int{rows, f * a}), c.layout, rows, f*a)
	if c.pad > 0 && full != nil {
		col := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: 1}, args: []*val{full}, out: precision.F32})
		zero := s.derive(&expr{op: program.OpSub, args: []*val{col, col}, out: precision.F32, label: "still channels"})
		if c.pad > 1 {
			zero = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: c.pad, Axis: 1}, args: []*val{zero}, out: precision.F32})
		}
		full = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{zero, full}, out: precision.F32})
	}
	table := func(k exec.ActKind, t *val, m exec.Math) (*val, float64) {
		v := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: k}, args: []*val{full}, out: precision.F32, math: m})
		if v != nil && t.format != precision.F32 {
			v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{v}, out: t.format})
		}
		if v = s.reshape(v, t.shape); v == nil {
			return nil, math.Inf(1)
		}
		return v, relRMS(t.format, v.data, t.data)
	}
	// the f32 angles' cos and sin as a GPU's cosf and sinf make them where
	// that reproduces more of the tables exactly
	var e1, e2 float64
	m := bestArith([]tableArith{{math: exec.MathPrecise}, {math: exec.MathCUDASinCos}}, func(ar tableArith) int {
		cv, _ := table(exec.ActCos, cosT, ar.math)
		sv, _ := table(exec.ActSin, sinT, ar.math)
		if cv == nil || sv == nil {
			return -1
		}
		return exactCount(cosT.format, cv.data, cosT.data) + exactCount(sinT.format, sv.data, sinT.data)
	}).math
	c.cos, e1 = table(exec.ActCos, cosT, m)
	c.sin, e2 = table(exec.ActSin, sinT, m)
	if c.cos == nil || c.sin == nil {
		return false
	}
	c.score = math.Max(e1, e2)
	same := 0
	for i := range cosT.data {
		if c.cos.data[i] == cosT.data[i] {
			same++
		}
		if c.sin.data[i] == sinT.data[i] {
			same++
		}
	}
	c.exact = float64(same) / float64(2*len(cosT.data))
	form := "(m/max)·2 − 1"
	if c.mul {
		form = "m·(2/max) − 1"
	}
	c.label = fmt.Sprintf("coordinates (%s) → u = %s, max %v; %s %s ladder of %d over %d axes (shared %v), %d still channels", c.in.note, form,
		c.read.maxes, c.order, c.layout, f, a, c.read.shared, c.pad)
	return true
}

// fitShapeCoordRope is fitCoordRope over coordinates a model makes from
// the sizes it is handed as numbers (LTX-Video's rope module: the frame,
// height and width counts, a row-major grid of their integer positions,
// then scaled per axis by the coordinate map fitCoordRope reads off the
// angles). The sizes are runs of two or three consecutive integer scalars
// of the call whose product is the tables' rows; the grid is a constant of
// the request's shape.
func (s *synth) fitShapeCoordRope(scalars map[string]any, cosT, sinT *val) (*val, *val) {
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	names := make([]string, 0, len(scalars))
	for k := range scalars {
		names = append(names, k)
	}
	slices.Sort(names)
	sizes := make([]int, len(names)) // 0: not a size, a break in the run
	for i, k := range names {
		if f, ok := scalars[k].(float64); ok && f >= 1 && f == math.Trunc(f) && f <= float64(rows) {
			sizes[i] = int(f)
		}
	}
	for k := 3; k >= 2; k-- {
		for i := 0; i+k <= len(sizes); i++ {
			grid := sizes[i : i+k]
			n := 1
			for _, g := range grid {
				n *= g
			}
			if n != rows || slices.Contains(grid, 0) {
				continue
			}
			pos := make([]float32, rows*k)
			stride := rowMajorStrides(grid)
			for r := range rows {
				for a, g := range grid {
					pos[r*k+a] = float32((r / stride[a]) % g)
				}
			}
			pv := &val{shape: []int{rows, k}, data: pos, format: precision.F32, origin: cosT.origin + "/grid"}
			if cv, sv := s.fitCoordRope([]*val{pv}, cosT, sinT); cv != nil {
				s.em.constant(pv, fmt.Sprintf("integer positions on the %v grid of the sizes the call is handed (a constant of the request's shape)", grid))
				return cv, sv
			}
		}
	}
	return nil, nil
}
