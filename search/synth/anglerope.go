package synth

import (
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitAngleRope explains one table of RoPE angles [.., S, d] over position
// ids [.., S, k] among xs (the angles themselves, their cos and sin taken
// by the code that reads them): each angle a frequency times one axis's
// position, laid out half ([a a]), interleaved (each angle twice in a
// row) or once; the frequencies and their axes read off the table by
// least squares, the table recomputed as ids·Wᵀ laid out (a linear of a
// constant weight, W [F, k] holding each frequency at its axis). The
// value it returns carries the fit "rope_angles", which the attention's
// table search reads as the pair (cos, sin) of it.
func (s *synth) fitAngleRope(xs []*val, t *val) *val {
	n := len(t.shape)
	if n < 2 || t.format != precision.F32 && t.format != precision.F64 {
		return nil
	}
	d := t.shape[n-1]
	rows := t.numel() / d
	if d < 2 || d%2 != 0 || rows < 2 {
		return nil
	}
	var ids *val
	k := 0
	for _, x := range xs {
		if x.integral() && x.numel()%rows == 0 && x.numel()/rows <= 4 && x.numel()/rows >= 1 {
			ids, k = x, x.numel()/rows
			break
		}
	}
	if ids == nil {
		return nil
	}
	f := d / 2
	var layout exec.RopeLayout
	switch {
	case pairsEqual(t.data):
		layout = exec.RopeInterleaved
	case halvesEqual(t.data, d):
		layout = exec.RopeHalf
	default:
		f = d
	}
	col := func(r, i int) int {
		if layout == exec.RopeInterleaved {
			return r*d + 2*i
		}
		return r*d + i
	}
	w := &val{shape: []int{f, k}, data: make([]float32, f*k), format: precision.F32, origin: t.origin + "/frequencies"}
	for i := range f {
		best, bestA, bestF := math.Inf(1), -1, 0.0
		for a := range k {
			var num, den float64
			for r := range rows {
				p := float64(ids.data[r*k+a])
				num += p * float64(t.data[col(r, i)])
				den += p * p
			}
			if den == 0 {
				continue
			}
			fr := num / den
			var res float64
			for r := range rows {
				e := float64(t.data[col(r, i)]) - fr*float64(ids.data[r*k+a])
				res += e * e
			}
			if res < best {
				best, bestA, bestF = res, a, fr
			}
		}
		if bestA < 0 {
			if !allZeroCol(t, col, rows, i) {
				return nil
			}
			continue // every angle of it zero: no axis turns it
		}
		w.data[i*k+bestA] = float32(bestF)
	}
	pos := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{s.reshape(ids, []int{rows, k})}, out: precision.F32})
	ang := s.derive(&expr{op: program.OpLinear, args: []*val{pos, w, nil}, out: precision.F32, label: "ids·Wᵀ"})
	full := s.reshape(s.layAngles(ang, layout, rows, f), t.shape)
	if full == nil || relRMS(t.format, full.data, t.data) > tolerance(t.format) {
		return nil
	}
	s.em.constant(w, "the RoPE frequencies read off the angle table at the position ids, each at the axis it turns with")
	full.fit = &leafFit{kind: "rope_angles"}
	return full
}

// allZeroCol reports whether entry i of every row (col's place) is 0.
func allZeroCol(t *val, col func(r, i int) int, rows, i int) bool {
	for r := range rows {
		if t.data[col(r, i)] != 0 {
			return false
		}
	}
	return true
}

// angleTables are (cos, sin) of each value of the scope fitted as RoPE
// angles ([.., S, d] laid out [B, S, d]), for the attention's table search.
func (s *synth) angleTables(sc *scope) [][2]*val {
	var out [][2]*val
	for _, v := range sc.vals {
		if v.opaque || v.fit == nil || v.fit.kind != "rope_angles" || len(v.shape) < 2 {
			continue
		}
		d := v.shape[len(v.shape)-1]
		b := v.shape[0]
		if len(v.shape) == 2 {
			b = 1
		}
		table := func(k exec.ActKind) *val {
			x := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: k}, args: []*val{v}, out: v.format})
			return s.reshape(x, []int{b, v.numel() / (b * d), d})
		}
		if c, sn := table(exec.ActCos), table(exec.ActSin); c != nil && sn != nil {
			out = append(out, [2]*val{c, sn})
		}
	}
	return out
}

// angleRowsPiece finds a piece of t's rows from off on that is cos or sin
// of a parameter's rows of angles laid out as RoPE reads them (each angle
// twice: [a a], or once): a class token's own angles, a learned row joined
// before the patches' table (MLCD's class_pos_emb), taken in t's format or
// in the parameter's and then cast. nil where none is.
func (s *synth) angleRowsPiece(t *val, ax, off int, vals []*val) *val {
	if len(t.shape) != 2 || ax != 0 {
		return nil
	}
	d := t.shape[1]
	for _, p := range vals {
		if !p.param || p.opaque || len(p.shape) != 2 || p.shape[0] > t.shape[0]-off || p.shape[0] >= t.shape[0] {
			continue
		}
		var laid []*val
		switch p.shape[1] {
		case d:
			laid = append(laid, p)
		case d / 2:
			if d%2 == 0 {
				if h := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{p, p}, out: p.format, label: "[a a]"}); h != nil {
					laid = append(laid, h)
				}
			}
		}
		sub := s.part(t, ax, off, off+p.shape[0])
		for _, a := range laid {
			var cands []*expr
			for _, f := range []exec.ActKind{exec.ActCos, exec.ActSin} {
				cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{a}, out: t.format, label: f.String() + " of a parameter's angles"})
				if a.format != t.format {
					// computed in the parameter's format, then joined to
					// a wider table (torch's type promotion)
					if n := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{a}, out: a.format, label: f.String()}); n != nil {
						cands = append(cands, &expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{n}, out: t.format, label: f.String() + " of a parameter's angles in its format"})
					}
				}
			}
			if w, _ := s.best(sub, cands); w != nil {
				return w
			}
		}
	}
	return nil
}
