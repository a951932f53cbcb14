package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// maskBias explains t as a mask of the scope (a value of 0s and 1s, as
// many as t's) made into an additive bias: c·(1 − m), c where the mask is
// 0 and ±0 where it is 1 ((1 − mask)·finfo.min, a mask's −10000), or c·m.
// c is read off t; the mask must hold both 0s and 1s, or the values do
// not show which entries c marks.
func (s *synth) maskBias(t *val, vals []*val) *val {
	for _, m := range vals {
		if m.opaque || m.numel() != t.numel() || !zeroOne(m) {
			continue
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
