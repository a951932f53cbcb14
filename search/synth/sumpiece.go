package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// leadingSumPiece explains t's entries from off on along ax as the leading
// entries of a sum of two values of one shape (a caption plus the rows of
// a table that say which condition it is, cut to its valid rows before it
// joins the other conditions), as many as match; scored on the host first,
// derived only where some match. nil when none does.
func (s *synth) leadingSumPiece(t *val, ax, off int, vals []*val) *val {
	tol := tolerance(t.format)
	for i, a := range vals {
		if a.opaque || len(a.shape) != len(t.shape) || !equalBut(a.shape, t.shape, ax) || a.shape[ax] < 2 {
			continue
		}
		for _, b := range vals[i+1:] {
			if b.opaque || !slices.Equal(a.shape, b.shape) {
				continue
			}
			sum := &val{shape: a.shape, data: make([]float32, len(a.data)), format: a.format}
			for j := range sum.data {
				sum.data[j] = a.data[j] + b.data[j]
			}
			n := 0
			for n < a.shape[ax] && off+n < t.shape[ax] && relRMS(t.format, sliceData(sum, ax, n, n+1), sliceData(t, ax, off+n, off+n+1)) <= tol {
				n++
			}
			if n == 0 || n == a.shape[ax] {
				continue // none, or the whole sum (combinedPiece's)
			}
			add := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "value + value"})
			var p *val
			if add != nil {
				p = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: n}, args: []*val{add}, out: t.format, label: "leading part of a sum"})
			}
			if p != nil && s.everyStep(p, s.part(t, ax, off, off+n), tol) {
				return p
			}
		}
	}
	return nil
}
