package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// peeledGate explains t as a·G, G a gate of the scope (every entry in
// (0, 1]: a sigmoid's) brought to t's shape by broadcasting or
// by repeating each entry along the axes t is a whole multiple longer
// (nearest upsampling: GhostNetV2's attention map pooled, gated and
// resized back), and a found by glue for t / G, the quotient read as a
// target of its own (a join of two maps, a slice). The product is
// rounded once. Tried once the forms of one step fail, never inside
// another peel.
func (s *synth) peeledGate(t *val, sc *scope, vals []*val) *val {
	if s.peeling || len(t.shape) < 2 || t.integral() {
		return nil
	}
	tol := tolerance(t.format)
	for _, g := range vals {
		if g.opaque || g.integral() || g.numel() >= t.numel() || len(g.shape) != len(t.shape) || !gateLike(g) {
			continue
		}
		up := s.nearestUp(g, t.shape)
		if up == nil {
			continue
		}
		q := &val{shape: t.shape, data: make([]float32, len(t.data)), format: t.format, origin: t.origin + " ⊘ " + g.origin, reshapedFrom: true}
		for i := range q.data {
			q.data[i] = t.data[i] / up.data[i]
		}
		s.peeling = true
		a := s.glueIn(q, sc)
		s.peeling = false
		if a == nil || a.opaque {
			continue
		}
		w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{a, up}, out: t.format, label: "an expression times a gate"}})
		if w != nil && relRMS(t.format, w.data, t.data) <= tol && s.everyStep(w, t, tol) {
			return w
		}
	}
	return nil
}

// gateLike reports whether every entry of v lies in (0, 1] (a sigmoid's
// output): a quotient by it is defined everywhere. Tables of cosines and
// sines, with their signs, are not gates.
func gateLike(v *val) bool {
	if len(v.data) == 0 {
		return false
	}
	for _, x := range v.data {
		if !(x > 0 && x <= 1) {
			return false
		}
	}
	return true
}

// nearestUp is g brought to shape: an axis of g of length 1 repeated
// (broadcasting written out), an axis shape's length is k times g's
// repeated k times entry by entry (nearest upsampling by an integer
// factor); nil where an axis is neither.
func (s *synth) nearestUp(g *val, shape []int) *val {
	cur := g
	for i := range shape {
		n := cur.shape[i]
		switch {
		case n == shape[i]:
			continue
		case n == 1:
			// a broadcast axis, written out
			if cur = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: shape[i], Axis: i}, args: []*val{cur}, out: cur.format, label: "a broadcast axis written out"}); cur == nil {
				return nil
			}
			continue
		case shape[i]%n != 0:
			return nil
		}
		f := shape[i] / n
		split := slices.Concat(cur.shape[:i+1], []int{1}, cur.shape[i+1:])
		r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: f, Axis: i + 1}, args: []*val{s.reshape(cur, split)}, out: cur.format, label: "each entry repeated (nearest upsampling)"})
		merged := slices.Clone(cur.shape)
		merged[i] *= f
		if cur = s.reshape(r, merged); cur == nil {
			return nil
		}
	}
	if !slices.Equal(cur.shape, shape) {
		return nil
	}
	return cur
}
