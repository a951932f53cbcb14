package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// paddedCausalMask explains t [N, S, S] (or [B, H, S, S]) as an additive
// attention mask made from a padding mask m [B, L] of the scope (0s and
// 1s, L ≤ S): c·(1 − m), padded with zeros to S keys (rows the forward
// appends after the masked ones), the same for every query, plus c above
// the diagonal where the mask is causal, then repeated per head (N = B·H):
// an unCLIP prior's (1 − m)·−10000 beside its −10000 causal buffer. c is
// read off t where exactly one of the two marks a key; the causal part is
// a constant of the request's shape.
func (s *synth) paddedCausalMask(t *val, vals []*val) *val {
	n := len(t.shape)
	if (n != 3 && n != 4) || t.shape[n-1] != t.shape[n-2] || t.shape[n-1] < 2 {
		return nil
	}
	sq := t.shape[n-1]
	for _, m := range vals {
		if m.opaque || len(m.shape) != 2 || m.shape[1] > sq || m.shape[1] < 1 || !zeroOne(m) {
			continue
		}
		b, l := m.shape[0], m.shape[1]
		if t.numel()%(b*sq*sq) != 0 {
			continue
		}
		heads := t.numel() / (b * sq * sq)
		for _, causal := range []bool{true, false} {
			c, ok := paddedMaskConstant(t, m, causal)
			if !ok {
				continue
			}
			if v := s.buildPaddedMask(t, m, c, b, l, sq, heads, causal); v != nil {
				return v
			}
		}
	}
	return nil
}

// paddedMaskConstant reads c off t's first batch row and head: an entry
// one mark sets (a padded key, or a key after the query where causal).
func paddedMaskConstant(t, m *val, causal bool) (float32, bool) {
	sq, l := t.shape[len(t.shape)-1], m.shape[1]
	for i := range sq {
		for j := range sq {
			marks := 0
			if causal && j > i {
				marks++
			}
			if j < l && m.data[j] == 0 {
				marks++
			}
			if marks == 1 && t.data[i*sq+j] != 0 {
				return t.data[i*sq+j], true
			}
		}
	}
	return 0, false
}

// buildPaddedMask makes the mask paddedCausalMask describes and scores it.
func (s *synth) buildPaddedMask(t, m *val, c float32, b, l, sq, heads int, causal bool) *val {
	f := t.format
	one := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), m}, out: f, label: "1 − mask"})
	keys := s.derive(&expr{op: program.OpMul, args: []*val{one, s.constant(float64(c))}, out: f, label: fmt.Sprintf("(1 − mask)·%g", c)})
	if keys == nil {
		return nil
	}
	if l < sq {
		z := s.zeros([]int{b, sq - l}, f, fmt.Sprintf("zeros[%d %d]", b, sq-l), "the keys the forward appends after the masked ones, never masked (made from the request's shape)")
		keys = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{keys, z}, out: f, label: "padded with zeros"})
	}
	mask := s.reshape(keys, []int{b, 1, sq})
	if causal && mask != nil {
		tri := make([]float32, sq*sq)
		for i := range sq {
			for j := i + 1; j < sq; j++ {
				tri[i*sq+j] = c
			}
		}
		upper := s.relConst(fmt.Sprintf("causal%d·%g", sq, c), []int{1, sq, sq}, tri, fmt.Sprintf("%g above the diagonal of [%d, %d] (made from the request's shape)", c, sq, sq))
		mask = s.derive(&expr{op: program.OpAdd, args: []*val{mask, upper}, out: f, label: "plus the causal mask"})
	}
	if mask == nil {
		return nil
	}
	if !slices.Equal(mask.shape, []int{b, sq, sq}) {
		mask = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: sq, Axis: 1}, args: []*val{mask}, out: f, label: "every query"})
	}
	if heads > 1 {
		mask = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: heads, Axis: 1}, args: []*val{s.reshape(mask, []int{b, 1, sq, sq})}, out: f, label: "per head"})
	}
	if mask == nil {
		return nil
	}
	label := "a padding mask made additive"
	if causal {
		label += ", plus a causal one"
	}
	v, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{mask}, out: f, label: label}})
	if v == nil || relRMS(f, v.data, t.data) != 0 {
		return nil // a mask is exact or it is another mask
	}
	return v
}
