package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
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
		if v.opaque || v.param || v.numel()%t.numel() != 0 {
			continue
		}
		k := v.numel() / t.numel()
		if k < 2 || k > 16 {
			continue
		}
		for at := 0; at <= len(t.shape); at++ {
			shape := slices.Insert(slices.Clone(t.shape), at, k)
			if !maxAlong(v.data, t.data, shape, at) {
				continue
			}
			r := s.reshape(v, shape)
			var m *val
			for i := range k {
				sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: at, Start: i, End: i + 1}, args: []*val{r}, out: v.format, label: fmt.Sprintf("entry %d of %d", i, k)})
				if sl == nil {
					return nil
				}
				if m == nil {
					m = sl
					continue
				}
				if m = s.derive(&expr{op: program.OpMaximum, args: []*val{m, sl}, out: t.format, label: "the larger"}); m == nil {
					return nil
				}
			}
			if w := s.reshape(m, t.shape); w != nil && relRMS(t.format, w.data, t.data) <= tolerance(t.format) {
				return w
			}
		}
	}
	return nil
}

// maxAlong reports whether t is the maximum of d, read in shape, over
// axis at (every element exactly: a maximum does not round).
func maxAlong(d, t []float32, shape []int, at int) bool {
	inner := 1
	for _, n := range shape[at+1:] {
		inner *= n
	}
	k := shape[at]
	for i, want := range t {
		outer, in := i/inner, i%inner
		base := outer*k*inner + in
		m := d[base]
		for j := 1; j < k; j++ {
			m = max(m, d[base+j*inner])
		}
		if m != want {
			return false
		}
	}
	return true
}
