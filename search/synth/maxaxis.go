package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxOverAxis explains t as the largest of k values along an axis of a
// value v of k·|t| elements, v read as t's shape with an axis of k put in
// at some place (x.view(B, heads, stride, -1, d).max(dim=2): Hiera's
// pooled queries and its stages' pooled residual). Read off the values,
// then made of k slices and their pairwise maxima (torch.maximum), so it
// needs no reduction op.
func (s *synth) maxOverAxis(t *val, vals []*val) *val {
	if len(t.shape) == 0 || t.numel() < 4 || t.integral() {
		return nil
	}
	for _, v := range vals {
		if v.opaque || v.param {
			continue
		}
		for _, r := range maxReadings(t, v) {
			shape, at := r.shape, r.at
			if !maxAlong(v.data, t.data, shape, at) {
				continue
			}
			m := s.maxPooled(v, shape, at, t.format)
			if w := s.reshape(m, t.shape); w != nil && relRMS(t.format, w.data, t.data) <= tolerance(t.format) {
				return w
			}
		}
	}
	return nil
}

// maxReading is v read in shape, an axis of k put in t's at at.
type maxReading struct {
	shape []int
	at    int
}

// maxReadings are v's readings as t's shape with an axis of k = |v|/|t|
// (2…16) put in at each place; none where v holds no such multiple.
func maxReadings(t, v *val) []maxReading {
	if v.numel()%t.numel() != 0 {
		return nil
	}
	k := v.numel() / t.numel()
	if k < 2 || k > 16 {
		return nil
	}
	var out []maxReading
	for at := 0; at <= len(t.shape); at++ {
		out = append(out, maxReading{slices.Insert(slices.Clone(t.shape), at, k), at})
	}
	return out
}

// maxPooled is v read in shape, its largest entries along axis at: k
// slices and their pairwise maxima (torch.maximum) rounded to f.
func (s *synth) maxPooled(v *val, shape []int, at int, f precision.Format) *val {
	return s.foldAxis(s.reshape(v, shape), at, program.OpMaximum, f, "the larger")
}

// foldAxis is v's slices along axis at combined left to right by the
// binary op (each step rounded to f), keeping the axis with length 1: a
// maximum or a sum over a short axis, in torch's order.
func (s *synth) foldAxis(v *val, at int, op program.Op, f precision.Format, label string) *val {
	if v == nil {
		return nil
	}
	var m *val
	for i := range v.shape[at] {
		sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: at, Start: i, End: i + 1}, args: []*val{v}, out: v.format, label: fmt.Sprintf("entry %d of %d", i, v.shape[at])})
		if sl == nil {
			return nil
		}
		if m == nil {
			m = sl
			continue
		}
		if m = s.derive(&expr{op: op, args: []*val{m, sl}, out: f, label: label}); m == nil {
			return nil
		}
	}
	return m
}

// maxOverAxisPlus explains t as maxOverAxis's pooled value plus a value
// of t's shape the scope made (Hiera's stage-entry block: the projected
// input max-pooled over the query stride, plus the attention's output):
// each pooled reading screened on the host against t minus the addend,
// the sum then scored.
func (s *synth) maxOverAxisPlus(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) == 0 || t.numel() < 4 || t.integral() {
		return nil
	}
	var cands []*expr
	for _, a := range vals {
		if !sc.own[a] || a.opaque || a == t || !slices.Equal(a.shape, t.shape) {
			continue
		}
		rest := make([]float32, len(t.data))
		for i := range rest {
			rest[i] = t.data[i] - a.data[i]
		}
		for _, v := range vals {
			if v.opaque || v.param || v == a {
				continue
			}
			for _, r := range maxReadings(t, v) {
				shape, at, k := r.shape, r.at, r.shape[r.at]
				if relRMS(t.format, maxAlongData(v.data, shape, at), rest) > tolerance(t.format) {
					continue
				}
				if m := s.reshape(s.maxPooled(v, shape, at, t.format), t.shape); m != nil {
					cands = append(cands, &expr{op: program.OpAdd, args: []*val{m, a}, out: t.format, label: fmt.Sprintf("the largest of %d along axis %d, plus a value", k, at)})
				}
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// maxAlongData is d, read in shape, at its maximum over axis at.
func maxAlongData(d []float32, shape []int, at int) []float32 {
	inner := 1
	for _, n := range shape[at+1:] {
		inner *= n
	}
	k := shape[at]
	out := make([]float32, len(d)/k)
	for i := range out {
		outer, in := i/inner, i%inner
		base := outer*k*inner + in
		m := d[base]
		for j := 1; j < k; j++ {
			m = max(m, d[base+j*inner])
		}
		out[i] = m
	}
	return out
}

// maxAlong reports whether t is the maximum of d, read in shape, over
// axis at (every element exactly: a maximum does not round).
func maxAlong(d, t []float32, shape []int, at int) bool {
	return slices.Equal(maxAlongData(d, shape, at), t)
}
