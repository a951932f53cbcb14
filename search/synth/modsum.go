package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// modulatedExplained is a channels-first map modulated after it is made
// in the same step (x = conv(x) + x_res, then x·(1 + scale) + shift with
// scale and shift the chunks of one [B, 2C] value: a ConvNeXt block
// conditioned per channel): the modulation is undone on the host for each
// [B, 2C] value of the scope, chunk order and "1 +" or not, and what is
// left is read as one map of the scope or the sum of two (sumOfMaps);
// then modulated again in the target's format. Tried once every other
// form failed.
func (s *synth) modulatedExplained(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 4 {
		return nil
	}
	b, c := t.shape[0], t.shape[1]
	hw := t.numel() / (b * c)
	for _, m := range vals {
		if m.opaque || len(m.shape) != 2 || m.shape[0] != b || m.shape[1] != 2*c {
			continue
		}
		for _, scaleFirst := range []bool{true, false} {
			for _, plus := range []bool{true, false} {
				undo := func(td, md []float32) []float32 {
					out := make([]float32, len(td))
					for i, v := range td {
						bi, ch := i/(c*hw), (i/hw)%c
						sc, sh := float64(md[bi*2*c+ch]), float64(md[bi*2*c+c+ch])
						if !scaleFirst {
							sc, sh = sh, sc
						}
						if plus {
							sc++
						}
						out[i] = float32((float64(v) - sh) / sc)
					}
					return out
				}
				u := &val{shape: t.shape, data: undo(t.data, m.data), format: t.format, origin: t.origin + " unmodulated"}
				if bad(u.data) {
					continue
				}
				if s.hasSteps(t) {
					u.perStep = func(st int) []float32 {
						td, ok1 := s.at(t, st)
						md, ok2 := s.at(m, st)
						if !ok1 || !ok2 || len(td) != len(t.data) || len(md) != len(m.data) {
							return nil
						}
						return undo(td, md)
					}
				}
				x := s.sumOfMaps(u, vals)
				if x == nil {
					continue
				}
				if v := s.remodulated(x, m, scaleFirst, plus, t); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// remodulated is x·(1 + scale) + shift (plus: the 1 added) with scale and
// shift m's chunks laid along x's channels, each step rounded to t's
// format as tensors of it compute.
func (s *synth) remodulated(x, m *val, scaleFirst, plus bool, t *val) *val {
	b, c := t.shape[0], t.shape[1]
	chunk := func(i int) *val {
		v := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: i * c, End: (i + 1) * c}, args: []*val{m}, out: m.format})
		return s.reshape(v, []int{b, c, 1, 1})
	}
	scale, shift := chunk(0), chunk(1)
	if !scaleFirst {
		scale, shift = shift, scale
	}
	if scale == nil || shift == nil {
		return nil
	}
	if plus {
		scale = s.derive(&expr{op: program.OpAdd, args: []*val{scale, s.constant(1)}, out: t.format, label: "1 + scale"})
	}
	prod := s.derive(&expr{op: program.OpMul, args: []*val{x, scale}, out: t.format, label: "x·scale"})
	if prod == nil {
		return nil
	}
	v, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{prod, shift}, out: t.format,
		label: fmt.Sprintf("modulated per channel (scale first %v, 1 + scale %v)", scaleFirst, plus)}})
	return v
}

// bad reports whether d holds a NaN or an infinity (a modulation undone
// through a zero scale).
func bad(d []float32) bool {
	for _, v := range d {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return true
		}
	}
	return false
}

// sumOfMaps reads u [B, C, H, W] as a map of vals, or the sum of two, each
// as it is or with its channels moved first from last ([B, H, W, C]): the
// sums checked on the host, the one that holds at every step made.
func (s *synth) sumOfMaps(u *val, vals []*val) *val {
	tol := tolerance(u.format)
	b, c, h, w := u.shape[0], u.shape[1], u.shape[2], u.shape[3]
	type cand struct {
		v     *val
		moved bool
		data  []float32
	}
	var cs []cand
	for _, v := range vals {
		if v.opaque || v.param || len(cs) == maxOperands {
			continue
		}
		switch {
		case slices.Equal(v.shape, u.shape):
			cs = append(cs, cand{v, false, v.data})
		case slices.Equal(v.shape, []int{b, h, w, c}):
			cs = append(cs, cand{v, true, permuteData(v, []int{0, 3, 1, 2})})
		}
	}
	made := func(c cand) *val {
		if !c.moved {
			return c.v
		}
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2}}, args: []*val{c.v}, out: c.v.format, label: "channels first"})
	}
	sum := make([]float32, len(u.data))
	for i, x := range cs {
		if relRMS(u.format, x.data, u.data) <= tol {
			if v := made(x); v != nil && s.everyStep(v, u, tol) {
				return v
			}
		}
		for _, y := range cs[i+1:] {
			for k := range sum {
				sum[k] = x.data[k] + y.data[k]
			}
			if relRMS(u.format, sum, u.data) > tol {
				continue
			}
			if v := s.derive(&expr{op: program.OpAdd, args: []*val{made(x), made(y)}, out: u.format, label: "a sum of two maps"}); v != nil && s.everyStep(v, u, tol) {
				return v
			}
		}
	}
	return nil
}
