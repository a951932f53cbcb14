package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// cutOfScaledSum explains t [.., W] as piece i of (a + b)·w, where a and
// b are two values of k·|t| entries read as [.., k, W] (t's leading axes,
// then k pieces of t's width) and w a simple number: a sum computed once
// for several consumers, each reading its own piece (Gemma 4's per-layer
// inputs: (norm(projection) + per-layer embedding)·2^−½, layer i reading
// piece i). w is fitted by least squares on piece i and snapped
// (fitScalar); tried once every other form failed.
func (s *synth) cutOfScaledSum(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.numel() == 0 {
		return nil
	}
	w := t.shape[len(t.shape)-1]
	var ops []*val
	for _, v := range vals {
		if v == nil || v.opaque || v.param || v.intType || v.data == nil || v.numel() <= t.numel() || v.numel()%t.numel() != 0 {
			continue
		}
		if !slices.ContainsFunc(ops, func(o *val) bool { return slices.Equal(o.data, v.data) }) {
			ops = append(ops, v)
		}
	}
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	for i, a := range ops {
		k := a.numel() / t.numel()
		shape := append(slices.Clone(t.shape[:len(t.shape)-1]), k, w)
		for _, b := range ops[i+1:] {
			if b.numel() != a.numel() {
				continue
			}
			for piece := range k {
				pa := &val{shape: shape, data: a.data, format: a.format}
				pb := &val{shape: shape, data: b.data, format: b.format}
				sa, sb := sliceData(pa, len(shape)-2, piece, piece+1), sliceData(pb, len(shape)-2, piece, piece+1)
				sum := &val{shape: t.shape, format: t.format, data: make([]float32, len(sa))}
				for e := range sa {
					sum.data[e] = sa[e] + sb[e]
				}
				c, ok := fitScalar(sum, t)
				if !ok {
					continue
				}
				ra, rb := s.reshape(a, shape), s.reshape(b, shape)
				ab := s.derive(&expr{op: program.OpAdd, args: []*val{ra, rb}, out: t.format, label: "sum"})
				sc := s.derive(&expr{op: program.OpMul, args: []*val{ab, s.constant(c)}, out: t.format, label: fmt.Sprintf("sum ×%g", c)})
				cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: len(shape) - 2, Start: piece, End: piece + 1}, args: []*val{sc}, out: t.format, label: fmt.Sprintf("piece %d of %d", piece, k)})
				if v := s.reshape(cut, t.shape); v != nil && relRMS(t.format, v.data, t.data) <= tolerance(t.format) && s.everyStep(v, t, tolerance(t.format)) {
					return v
				}
			}
		}
	}
	return nil
}
