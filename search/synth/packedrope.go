package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// fitPackedRope explains a parameterless call's one result as a RoPE
// table's cos and sin packed along one axis of a grid of positions
// ([B, 2·D, T, H, W]: cos of every axis, then sin of every axis, channels
// first; or channels last): the halves, read as [rows, D] tables with the
// channel axis moved last, are fitted as a cos and sin pair over the
// call's integer arguments (given ids, or a grid one axis of which is the
// argument: fitRopeOnRanges), then joined and laid back. Tried once every
// other form of such a call failed.
func (s *synth) fitPackedRope(xs []*val, t *val) *val {
	n := len(t.shape)
	if n < 3 {
		return nil
	}
	var ids []*val
	for _, x := range xs {
		if !x.integral() || x.numel() < 2 {
			continue
		}
		if k := slices.IndexFunc(x.shape, func(d int) bool { return d > 1 }); k >= 0 && x.shape[k] == x.numel() && len(x.shape) > 1 {
			x = s.reshape(x, []int{x.numel()}) // [1, T]: one sample's ids
		}
		if x != nil {
			ids = append(ids, x)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	tol := tolerance(t.format)
	for _, a := range []int{1, n - 1} {
		w := t.shape[a]
		if w < 4 || w%2 != 0 {
			continue
		}
		d := w / 2
		perm := make([]int, 0, n) // the channel axis moved last
		for i := range n {
			if i != a {
				perm = append(perm, i)
			}
		}
		perm = append(perm, a)
		moved := make([]int, n)
		for i, p := range perm {
			moved[i] = t.shape[p]
		}
		rows := t.numel() / w
		last := s.readAs(t, moved, func(x []float32) []float32 { return permuteData(&val{shape: t.shape, data: x}, perm) })
		cosT := s.readAs(last, []int{rows, d}, func(x []float32) []float32 {
			return sliceData(&val{shape: []int{rows, w}, data: x}, 1, 0, d)
		})
		sinT := s.readAs(last, []int{rows, d}, func(x []float32) []float32 {
			return sliceData(&val{shape: []int{rows, w}, data: x}, 1, d, w)
		})
		if !unitCircle(cosT, sinT) {
			continue
		}
		c, sn := s.fitRopeTable(ids, cosT, sinT)
		if c == nil {
			c, sn = s.fitRopeOnRanges(ids, cosT, sinT)
		}
		if c == nil {
			continue
		}
		j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{c, sn}, out: c.format, label: "cos and sin packed"})
		r := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: inversePerm(perm)}, args: []*val{s.reshape(j, moved)}, out: c.format, label: "channels in place"})
		if r != nil && slices.Equal(r.shape, t.shape) && relRMS(t.format, r.data, t.data) <= tol && s.everyStep(r, t, tol) {
			r.fit = c.fit
			return r
		}
	}
	return nil
}

// packedTables read each value [.., S, 2w] of the scope that no other
// table form took as a cos and a sin table for heads of w packed side by
// side ([cos | sin], each half already laid out for the heads: a table
// made channels-first as one tensor and flattened to the rows), the rows
// on the unit circle or averages of rotations (pooled history rows):
// tried after sideBySideTables.
func (s *synth) packedTables(sc *scope, tables [][2]*val, operands [][3]*val, rows, width int) [][2]*val {
	taken := takenValues(tables, operands)
	var out [][2]*val
	for _, v := range sc.vals {
		n := len(v.shape)
		if v.opaque || v.integral() || taken[v] || n < 2 || v.shape[n-2] != rows || v.shape[n-1]%2 != 0 || v.numel() != rows*v.shape[n-1] {
			continue
		}
		w := v.shape[n-1] / 2
		if w < 4 || width%w != 0 {
			continue
		}
		if !mostlyOnUnitCircle(&val{data: sliceData(v, n-1, 0, w)}, &val{data: sliceData(v, n-1, w, 2*w)}) {
			continue // checked on the host before anything is derived
		}
		c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: 0, End: w}, args: []*val{v}, out: v.format, label: "cos half of a packed table"})
		sn := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: w, End: 2 * w}, args: []*val{v}, out: v.format, label: "sin half of a packed table"})
		if c == nil || sn == nil {
			continue
		}
		c, sn = s.reshape(c, []int{rows, w}), s.reshape(sn, []int{rows, w})
		if c != nil && sn != nil {
			out = append(out, [2]*val{c, sn})
		}
	}
	return out
}
