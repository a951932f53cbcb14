package synth

import (
	"github.com/zflow/zflow/exec/program"
)

// replicatePadded explains t as a value of the scope grown at the end of some
// axes by copies of its last slice along each (F.pad's "replicate" mode on
// the trailing side, as a convolution's input is padded to a multiple of
// its kernel): for each axis t is longer on, the last slice repeated and
// joined after, axis by axis from the last. Only where t holds the value
// unchanged at its leading corner.
func (s *synth) replicatePadded(t *val, vals []*val) *val {
	for _, x := range vals {
		if x.opaque || len(x.shape) != len(t.shape) || x.numel() >= t.numel() || x.format != t.format {
			continue
		}
		grown := false
		ok := true
		for a := range x.shape {
			if x.shape[a] > t.shape[a] || x.shape[a] == 0 {
				ok = false
				break
			}
			grown = grown || x.shape[a] < t.shape[a]
		}
		if !ok || !grown || !leadingCorner(x, t) {
			continue
		}
		v := x
		for a := len(x.shape) - 1; a >= 0 && v != nil; a-- {
			pad := t.shape[a] - x.shape[a]
			if pad == 0 {
				continue
			}
			n := v.shape[a]
			last := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: a, Start: n - 1, End: n}, args: []*val{v}, out: v.format, label: "last slice"})
			rep := last
			if pad > 1 && last != nil {
				rep = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: pad, Axis: a}, args: []*val{last}, out: v.format, label: "edge copies"})
			}
			if rep == nil {
				return nil
			}
			v = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: a}, args: []*val{v, rep}, out: v.format, label: "replicate padding"})
		}
		if v != nil && relRMS(t.format, v.data, t.data) <= tolerance(t.format) && s.everyStep(v, t, tolerance(t.format)) {
			return v
		}
	}
	return nil
}

// leadingCorner reports whether t's leading corner of x's shape equals x.
func leadingCorner(x, t *val) bool {
	r := len(x.shape)
	idx := make([]int, r)
	for i, xv := range x.data {
		// x's flat index i → t's flat index
		rem := i
		for a := r - 1; a >= 0; a-- {
			idx[a] = rem % x.shape[a]
			rem /= x.shape[a]
		}
		j := 0
		for a := range r {
			j = j*t.shape[a] + idx[a]
		}
		if xv != t.data[j] {
			return false
		}
	}
	return true
}
