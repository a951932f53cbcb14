package synth

import (
	"github.com/zflow/zflow/exec/program"
)

// fitSideBySideTable explains one value [.., S, 2w] that no expression
// explains as a RoPE table's two halves kept side by side, made from the
// request's shape ([sin | cos], as a model hands one tensor to every
// block, or [cos | sin]): the halves must lie on the unit circle, the
// pair is fitted as tablePair fits two separate tables (shapeTables), and
// the value is the fitted halves joined again in their order. nil where
// neither order is such tables.
func (s *synth) fitSideBySideTable(t *val) *val {
	n := len(t.shape)
	if n >= 3 && t.shape[0] == 2 && t.shape[n-1]%2 == 0 && !t.integral() {
		if v := s.fitStackedTable(t); v != nil {
			return v
		}
	}
	if n < 2 || t.shape[n-1]%4 != 0 || t.integral() || !s.tablesOfShape([]*val{t}) {
		return nil
	}
	w := t.shape[n-1] / 2
	rows := t.numel() / (2 * w)
	if rows < 2 {
		return nil
	}
	half := func(start int) *val {
		v := &val{shape: []int{rows, w}, data: make([]float32, 0, rows*w), format: t.format, origin: t.origin}
		for r := range rows {
			v.data = append(v.data, t.data[r*2*w+start:r*2*w+start+w]...)
		}
		return v
	}
	a, b := half(0), half(w)
	if !unitOrDead(a, b) {
		return nil
	}
	return s.rejoined(t, a, b, 1, []int{rows, w}, []bool{true, false}, "side by side")
}

// shapeTables fits a cos and a sin table made from the request's shape
// alone: the ids, axes and θ read back from the angles (fitReadRope),
// else a grid's positions, perhaps strided (fitGridRope), else
// coordinates on a grid, a ladder read off the angles
// (fitGridCoordRope). nil where neither reproduces both.
func (s *synth) shapeTables(c, sn *val) []*val {
	if unitCircle(c, sn) {
		if f := s.fitReadRope([]*val{c, sn}); len(f) == 2 && f[0] != nil && f[1] != nil {
			return f
		}
	}
	if unitCircle(c, sn) {
		// rope_table over a grid's positions, perhaps scaled by a stride
		// read off the angles: the ladder in its own form, 1/θ^(2i/d)
		if cv, sv := s.fitGridRope(c, sn); cv != nil && sv != nil {
			return []*val{cv, sv}
		}
	}
	if cv, sv := s.fitGridCoordRope(c, sn); cv != nil && sv != nil {
		return []*val{cv, sv}
	}
	return nil
}

// fitStackedTable explains one value [2, .., S, D] that no expression
// explains as a RoPE table's cos and sin stacked on its first axis
// (torch.stack([cos, sin]), handed to every layer as one tensor; or sin
// first), made from the request's shape: each half fitted as tablePair
// fits two separate tables (shapeTables), the value the fitted halves
// joined again in their order.
func (s *synth) fitStackedTable(t *val) *val {
	d := t.shape[len(t.shape)-1]
	half := t.numel() / 2
	rows := half / d
	if rows < 2 || !s.tablesOfShape([]*val{t}) {
		return nil
	}
	part := func(i int) *val {
		return &val{shape: []int{rows, d}, data: t.data[i*half : (i+1)*half], format: t.format, origin: t.origin}
	}
	a, b := part(0), part(1)
	if !unitOrDead(a, b) && !unitOrDead(b, a) {
		return nil
	}
	return s.rejoined(t, a, b, 0, []int{1, rows, d}, []bool{false, true}, "stacked")
}

// rejoined fits the halves a and b of t as a cos and a sin table made
// from the request's shape (shapeTables), in each order of orders (sin
// first or not), and joins the fitted tables again along axis, each laid
// out as part: t rebuilt by the program; nil where no order reproduces t.
func (s *synth) rejoined(t, a, b *val, axis int, part []int, orders []bool, how string) *val {
	for _, sinFirst := range orders {
		c, sn := a, b
		if sinFirst {
			c, sn = b, a
		}
		f := s.shapeTables(c, sn)
		if f == nil {
			continue
		}
		parts, label := []*val{f[0], f[1]}, "cos, sin "+how
		if sinFirst {
			parts, label = []*val{f[1], f[0]}, "sin, cos "+how
		}
		j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: axis}, args: []*val{s.reshape(parts[0], part), s.reshape(parts[1], part)}, out: t.format, label: label})
		v := s.reshape(j, t.shape)
		if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
			continue
		}
		v.fit = f[0].fit
		if f[0].fit != nil && f[0].fit.kind == "rope_table" {
			s.ropes = append(s.ropes, ropeRecord{scope: s.scopeOf, boundary: t.origin, fit: f[0].fit})
		}
		return v
	}
	return nil
}
