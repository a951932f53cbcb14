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
	if ids == nil {
		return nil, nil
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
	for i := range f {
		// the angle at the nearest non-zero position fixes f (|f·p| < π
		// there), every row then refines it, each angle unwrapped by the
		// estimate
		est, p1 := 0.0, math.Inf(1)
		for r := range rows {
			p := float64(ids.data[r])
			if p > 0 && p < p1 {
				p1 = p
				est = math.Atan2(float64(sinT.data[col(r, i)]), float64(cosT.data[col(r, i)])) / p
			}
		}
		if math.IsInf(p1, 1) {
			return nil, nil
		}
		var num, den float64
		for r := range rows {
			p := float64(ids.data[r])
			a := math.Atan2(float64(sinT.data[col(r, i)]), float64(cosT.data[col(r, i)]))
			a += 2 * math.Pi * math.Round((p*est-a)/(2*math.Pi))
			num, den = num+p*a, den+p*p
		}
		freqs[i] = float32(num / den)
	}
	fv := &val{shape: []int{1, f}, data: freqs, format: precision.F32, origin: cosT.origin + "/frequencies"}
	s.em.constant(fv, "the frequencies read off the RoPE tables at the position ids (a per-frequency scaling that follows no θ)")
	pos := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{s.reshape(ids, []int{rows, 1})}, out: precision.F32})
	ang := s.derive(&expr{op: program.OpMul, args: []*val{pos, fv}, out: precision.F32, label: "ids·f"})
	full := ang
	switch layout {
	case exec.RopeHalf:
		full = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{ang, ang}, out: precision.F32, label: "half"})
	case exec.RopeInterleaved:
		rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: 2, Axis: 2}, args: []*val{s.reshape(ang, []int{rows, f, 1})}, out: precision.F32, label: "interleaved"})
		full = s.reshape(rep, []int{rows, d})
	}
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
