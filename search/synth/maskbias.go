package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// maskBias explains t as a mask of the scope (a value of 0s and 1s, as
// many as t's) made into an additive bias: c·(1 − m), c where the mask is
// 0 and ±0 where it is 1 ((1 − mask)·finfo.min, a mask's −10000), or c·m.
// c is read off t; the mask must hold both 0s and 1s, or the values do
// not show which entries c marks. A mask of fewer entries that
// broadcasts to t (one per key, the same for every head) is repeated
// along its axes of one first.
func (s *synth) maskBias(t *val, vals []*val) *val {
	for _, m := range vals {
		if m.opaque || m.numel() > t.numel() || m.numel() < 2 || !zeroOne(m) {
			continue
		}
		if m.numel() < t.numel() {
			if m = s.expanded(m, t.shape); m == nil {
				continue
			}
		}
		for _, zeroAt := range []float32{1, 0} {
			c, ok := maskConstant(t, m, zeroAt)
			if !ok {
				continue
			}
			x := m
			label := "mask"
			if zeroAt == 1 {
				x = s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), m}, out: t.format, label: "1 − mask"})
				label = "1 − mask"
			}
			b := s.reshape(x, t.shape)
			if b == nil {
				continue
			}
			if w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{b, s.constant(float64(c))}, out: t.format, label: fmt.Sprintf("(%s)·%g", label, c)}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// maskConstant is the one nonzero value t holds where mask m is not
// zeroAt; ok is false unless t is ±0 where m is zeroAt, that value
// everywhere else, and both kinds of entry occur.
func maskConstant(t, m *val, zeroAt float32) (c float32, ok bool) {
	zeros, marked := 0, 0
	for i, x := range m.data {
		if x == zeroAt {
			if t.data[i] != 0 {
				return 0, false
			}
			zeros++
			continue
		}
		if marked == 0 {
			c = t.data[i]
		}
		if t.data[i] != c || c == 0 {
			return 0, false
		}
		marked++
	}
	return c, zeros > 0 && marked > 0
}

// expanded is v repeated along each of its axes of one to shape's length
// there (torch's expand, as a broadcast add reads it); nil where v does
// not broadcast to shape.
func (s *synth) expanded(v *val, shape []int) *val {
	if !broadcasts(v.shape, shape) {
		return nil
	}
	for ax, n := range shape {
		if v != nil && v.shape[ax] != n {
			v = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: ax}, args: []*val{v}, out: v.format, label: "broadcast"})
		}
	}
	return v
}
