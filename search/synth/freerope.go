package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitFreeRope explains cos and sin tables of position ids whose
// frequencies follow no θ (scaled RoPE: each frequency divided by its own
// factor, as long-context variants do) and whose values may carry a
// magnitude (m·cos, m·sin: an attention factor folded into the tables):
// the magnitude and each frequency are read off the tables at the ids,
// and the tables recomputed from the ids by the program's own arithmetic
// (ids·f, the angles laid out half or interleaved, cos and sin, times m)
// must reproduce both. A table may hold each frequency twice (half or
// interleaved layout) or once.
func (s *synth) fitFreeRope(xs []*val, cosT, sinT *val) (*val, *val) {
	if c, sn := s.freeRopeOf(xs, cosT, sinT); c != nil {
		return c, sn
	}
	// ids of several samples [B, S] and tables of one sample's rows: the
	// tables of one sample's ids (a batch doubled for guidance, its
	// tables made from the first prompt's positions, emb[0])
	if len(cosT.shape) < 2 {
		return nil, nil
	}
	rows := cosT.numel() / cosT.shape[len(cosT.shape)-1]
	for _, x := range xs {
		if !x.integral() || len(x.shape) != 2 || x.shape[0] < 2 || x.shape[1] != rows {
			continue
		}
		for b := range x.shape[0] {
			row := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: b, End: b + 1}, args: []*val{x}, out: x.format, label: fmt.Sprintf("sample %d's position ids", b)})
			if row == nil {
				continue
			}
			if c, sn := s.freeRopeOf([]*val{row}, cosT, sinT); c != nil {
				return c, sn
			}
		}
	}
	return nil, nil
}

// freeRopeOf is fitFreeRope with the ids as xs hold them.
func (s *synth) freeRopeOf(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	if d%2 != 0 || rows < 2 {
		return nil, nil
	}
	var ids *val
	for _, x := range xs {
		if x.integral() && x.numel() == rows {
			ids = x
		}
	}
	k := 1
	if ids == nil {
		// positions given per axis, the rows their grid
		if ids = s.gridOfAxes(xs, rows); ids == nil {
			return nil, nil
		}
		k = ids.shape[1]
	}
	f := d / 2
	// layout 0: one column per frequency, each once (a table of half a
	// head's width, which the code joins to itself or reads per half)
	var layout exec.RopeLayout
	switch {
	case halvesEqual(cosT.data, d) && halvesEqual(sinT.data, d):
		layout = exec.RopeHalf
	case pairsEqual(cosT.data) && pairsEqual(sinT.data):
		layout = exec.RopeInterleaved
	default:
		f = d
	}
	col := func(r, i int) int { // the entry of row r holding frequency i
		if layout == exec.RopeInterleaved {
			return r*d + 2*i
		}
		return r*d + i
	}
	var mag float64
	for r := range rows {
		for i := range f {
			c, sn := float64(cosT.data[col(r, i)]), float64(sinT.data[col(r, i)])
			mag += math.Hypot(c, sn)
		}
	}
	mag /= float64(rows * f)
	if !(mag > 0) {
		return nil, nil
	}
	freqs := make([]float32, f)
	axis := make([]int, f) // the position axis each frequency turns with
	for i := range f {
		best := math.Inf(1)
		for a := range k {
			fr, res, ok := fitFrequency(rows, func(r int) float64 { return float64(ids.data[r*k+a]) },
				func(r int) float64 { return math.Atan2(float64(sinT.data[col(r, i)]), float64(cosT.data[col(r, i)])) })
			if ok && res < best {
				best, freqs[i], axis[i] = res, float32(fr), a
			}
		}
		if math.IsInf(best, 1) {
			return nil, nil
		}
	}
	if k > 1 {
		return s.freeRopeAxes(ids, freqs, axis, layout, mag, cosT, sinT)
	}
	fv := &val{shape: []int{1, f}, data: freqs, format: precision.F32, origin: cosT.origin + "/frequencies"}
	s.em.constant(fv, "the frequencies read off the RoPE tables at the position ids (a per-frequency scaling that follows no θ)")
	pos := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{s.reshape(ids, []int{rows, 1})}, out: precision.F32})
	ang := s.derive(&expr{op: program.OpMul, args: []*val{pos, fv}, out: precision.F32, label: "ids·f"})
	return s.freeTables(s.layAngles(ang, layout, rows, f), mag, cosT, sinT)
}

// freeTables are cos and sin of the laid-out angles full (times the
// magnitude), stored as the targets are; nil unless both reproduce.
func (s *synth) freeTables(full *val, mag float64, cosT, sinT *val) (*val, *val) {
	if full == nil {
		return nil, nil
	}
	table := func(k exec.ActKind, t *val) *val {
		v := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: k}, args: []*val{full}, out: precision.F32})
		if math.Abs(mag-1) > 1e-6 && v != nil {
			v = s.derive(&expr{op: program.OpMul, args: []*val{v, s.constant(mag)}, out: precision.F32, label: fmt.Sprintf("magnitude %.6g", mag)})
		}
		if v != nil && t.format != precision.F32 {
			v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{v}, out: t.format})
		}
		v = s.reshape(v, t.shape)
		if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
			return nil
		}
		return v
	}
	cv, sv := table(exec.ActCos, cosT), table(exec.ActSin, sinT)
	if cv == nil || sv == nil {
		return nil, nil
	}
	fit := &leafFit{kind: "rope_free"}
	cv.fit, sv.fit = fit, fit
	return cv, sv
}

// halvesEqual reports whether every row of width d repeats its first half.
func halvesEqual(x []float32, d int) bool {
	for r := 0; r+d <= len(x); r += d {
		if !slices.Equal(x[r:r+d/2], x[r+d/2:r+d]) {
			return false
		}
	}
	return true
}

// pairsEqual reports whether entries come in equal pairs.
func pairsEqual(x []float32) bool {
	for i := 0; i+1 < len(x); i += 2 {
		if x[i] != x[i+1] {
			return false
		}
	}
	return true
}

// fitFrequency fits f in angle(r) ≡ f·pos(r) (mod 2π) over rows: the
// angle at the nearest non-zero position fixes f (|f·p| < π there), every
// row then refines it, each angle unwrapped by the estimate. res is the
// squared residual; ok is false where every position is zero.
func fitFrequency(rows int, pos, angle func(int) float64) (f, res float64, ok bool) {
	est, p1 := 0.0, math.Inf(1)
	for r := range rows {
		if p := pos(r); p > 0 && p < p1 {
			p1, est = p, angle(r)/p
		}
	}
	if math.IsInf(p1, 1) {
		return 0, 0, false
	}
	unwrap := func(r int) float64 {
		a := angle(r)
		return a + 2*math.Pi*math.Round((pos(r)*est-a)/(2*math.Pi))
	}
	var num, den float64
	for r := range rows {
		num, den = num+pos(r)*unwrap(r), den+pos(r)*pos(r)
	}
	f = num / den
	for r := range rows {
		e := unwrap(r) - f*pos(r)
		res += e * e
	}
	return f, res, true
}

// gridOfAxes builds position ids [rows, k] from k ≥ 2 one-axis integer
// arguments whose sizes multiply to rows (positions given per axis, the
// rows their grid, the first argument slowest): each axis laid along its
// own dimension, repeated over the others, and the k joined.
func (s *synth) gridOfAxes(xs []*val, rows int) *val {
	var axes []*val
	n := 1
	for _, x := range xs {
		if x.integral() && len(x.shape) == 1 && x.numel() > 1 {
			axes = append(axes, x)
			n *= x.numel()
		}
	}
	k := len(axes)
	if k < 2 || k > 3 || n != rows {
		return nil
	}
	grid := make([]int, k)
	for a, x := range axes {
		grid[a] = x.numel()
	}
	var cols []*val
	for a, x := range axes {
		shape := make([]int, k+1)
		for i := range shape {
			shape[i] = 1
		}
		shape[a] = grid[a]
		v := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{s.reshape(x, shape)}, out: precision.F32})
		for b := range k {
			if b != a && v != nil {
				v = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: grid[b], Axis: b}, args: []*val{v}, out: precision.F32, label: "grid"})
			}
		}
		if v == nil {
			return nil
		}
		cols = append(cols, v)
	}
	g := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: k}, args: cols, out: precision.F32, label: "position grid"})
	return s.reshape(g, []int{rows, k})
}

// freeRopeAxes is fitFreeRope's tables over ids [rows, k] of several
// axes, each frequency turning with one axis: the angles ids·Wᵀ, W [F, k]
// holding frequency i at its axis (a linear of a constant weight), laid
// out, then cos and sin (times the magnitude).
func (s *synth) freeRopeAxes(ids *val, freqs []float32, axis []int, layout exec.RopeLayout, mag float64, cosT, sinT *val) (*val, *val) {
	rows, k, f := ids.shape[0], ids.shape[1], len(freqs)
	w := &val{shape: []int{f, k}, data: make([]float32, f*k), format: precision.F32, origin: cosT.origin + "/frequencies"}
	for i, fr := range freqs {
		w.data[i*k+axis[i]] = fr
	}
	ang := s.derive(&expr{op: program.OpLinear, args: []*val{ids, w, nil}, out: precision.F32, label: "ids·Wᵀ"})
	cv, sv := s.freeTables(s.layAngles(ang, layout, rows, f), mag, cosT, sinT)
	if cv != nil {
		s.em.constant(w, "the frequencies read off the RoPE tables at the position ids, each at the axis it turns with (a per-axis scaling that follows no θ)")
	}
	return cv, sv
}

// layAngles lays angles [rows, F] out as a table's width: 2F half ([a a])
// or interleaved (each angle twice in a row), or F as they are (layout 0:
// a table holding each frequency once).
func (s *synth) layAngles(ang *val, layout exec.RopeLayout, rows, f int) *val {
	if ang == nil {
		return nil
	}
	switch layout {
	case exec.RopeHalf:
		return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{ang, ang}, out: precision.F32, label: "half"})
	case exec.RopeInterleaved:
	default: // each frequency once
		return ang
	}
	rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: 2, Axis: 2}, args: []*val{s.reshape(ang, []int{rows, f, 1})}, out: precision.F32, label: "interleaved"})
	return s.reshape(rep, []int{rows, 2 * f})
}
