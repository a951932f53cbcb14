package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// broadcastCut explains t as a value, or a contiguous cut of one axis of
// it (one chunk of a modulation vector), laid out with one more axis of
// t's along which it is repeated (x.unsqueeze(0).expand(S, -1, -1): one
// modulation for every row of a sequence-first layout): t must be the same
// at every index of that axis, and its first slice a value's cut. Tried
// once every other form failed.
func (s *synth) broadcastCut(t *val, vals []*val) *val {
	tol := tolerance(t.format)
	for a, n := range t.shape {
		if n < 2 || !constantAlong(t, a) {
			continue
		}
		one := slices.Clone(t.shape)
		one[a] = 1
		base := &val{shape: one, data: sliceData(t, a, 0, 1), format: t.format}
		for _, v := range vals {
			if v.opaque || v.numel() < base.numel() || v.numel()%base.numel() != 0 && v.numel() != base.numel() {
				continue
			}
			var piece *val
			if v.numel() == base.numel() {
				if relRMS(t.format, v.data, base.data) <= tol {
					piece = v
				}
			} else {
				for c := range axisCuts(base, v) {
					ax, start, size := c[0], c[1], c[2]
					if relRMS(t.format, sliceData(v, ax, start, start+size), base.data) > tol {
						continue
					}
					piece = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: start, End: start + size}, args: []*val{v}, out: v.format, label: "chunk"})
					break
				}
			}
			if piece == nil {
				continue
			}
			r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: a}, args: []*val{s.reshape(piece, one)}, out: piece.format, label: "broadcast over a new axis"})
			if r != nil && relRMS(t.format, r.data, t.data) <= tol && s.everyStep(r, t, tol) {
				return r
			}
		}
	}
	return nil
}

// constantAlong reports whether every slice of t along axis a equals the
// first.
func constantAlong(t *val, a int) bool {
	inner := 1
	for _, d := range t.shape[a+1:] {
		inner *= d
	}
	n := t.shape[a]
	for o := 0; o < len(t.data); o += n * inner {
		first := t.data[o : o+inner]
		for i := 1; i < n; i++ {
			if !slices.Equal(first, t.data[o+i*inner:o+(i+1)*inner]) {
				return false
			}
		}
	}
	return true
}

// broadcastSource is the value v repeats along an axis of length 1 in it
// (broadcastCut's value: one vector laid over every row), or nil.
func broadcastSource(v *val) *val {
	if v.from == nil || v.from.op != program.OpRepeat || len(v.from.args) != 1 || v.from.args[0] == nil {
		return nil
	}
	src := v.from.args[0]
	if ax := v.from.attrs.Axis; ax >= len(src.shape) || src.shape[ax] != 1 || src.opaque {
		return nil
	}
	return src
}
