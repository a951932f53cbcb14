package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// maxResizedTables bounds the resized parameter tables addends offers,
// and maxLeadingRows the rows before the grid (a class token and up to
// eight registers and more).
const (
	maxResizedTables = 6
	maxLeadingRows   = 16
)

// resizedTables are the parameter grids of another size than t's,
// resized to t's grid in each of interpolate's modes and laid as t's
// rows: a learned position table kept at the size it was trained at and
// resampled to the image's grid in the forward (timm's dynamic sizes and
// NaFlex, DINOv2's interpolate_pos_encoding: bicubic with antialias
// where the grid shrinks). t is rows [B, k + h·h, C] with k ≤ 16 leading
// rows (class or register tokens the table is not added to: zero rows in
// front, or the table's own k leading entries where it has them); a
// table is [1, g, g, C] (channels last), [1, C, g, g] or rows
// [1, k' + g·g, C] with g ≠ h.
func (s *synth) resizedTables(t *val, vals []*val) []*val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	n, c := t.shape[1], t.shape[2]
	var out []*val
	for k := range min(maxLeadingRows, n) + 1 {
		h := isqrt(n - k)
		if h < 2 || h*h != n-k {
			continue
		}
		for _, v := range vals {
			if !v.param || v.opaque || v.integral() || len(v.shape) < 3 || v.shape[0] != 1 {
				continue
			}
			grid, lead := s.tableGrid(v, c, k)
			if grid == nil || grid.shape[2] == h {
				continue
			}
			for _, mode := range resampleModes() {
				if len(out) == maxResizedTables {
					return out
				}
				e := s.resampleExpr(grid, h, h, mode, t.format)
				if e == nil {
					continue
				}
				r := s.derive(e)
				if r == nil {
					continue
				}
				rows := s.mapRows(r)
				if rows == nil {
					continue
				}
				if k > 0 {
					if lead == nil {
						lead = s.relConst(fmt.Sprintf("zeros[1,%d,%d]", k, c), []int{1, k, c}, make([]float32, k*c),
							fmt.Sprintf("%d zero rows: the leading rows no table entry is added to", k))
					}
					rows = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{lead, rows}, out: t.format,
						label: "the leading rows' entries, then the resized grid"})
				}
				if rows != nil {
					rows.origin = fmt.Sprintf("%s resized %d→%d (%s)", v.origin, grid.shape[2], h, mode)
					out = append(out, rows)
				}
			}
		}
	}
	return out
}

// tableGrid is the parameter v read as a map [1, C, g, g] of c channels,
// and, where v is rows with exactly k entries before its grid, those
// entries [1, k, C] (nil otherwise).
func (s *synth) tableGrid(v *val, c, k int) (grid, lead *val) {
	switch {
	case len(v.shape) == 4 && v.shape[3] == c && v.shape[1] == v.shape[2] && v.shape[1] > 1:
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2}}, args: []*val{v}, out: v.format,
			label: "a channels-last table as a map"}), nil
	case len(v.shape) == 4 && v.shape[1] == c && v.shape[2] == v.shape[3] && v.shape[2] > 1:
		return v, nil
	case len(v.shape) == 3 && v.shape[2] == c:
		for kv := range 3 {
			g := isqrt(v.shape[1] - kv)
			if g < 2 || g*g != v.shape[1]-kv {
				continue
			}
			body := v
			if kv > 0 {
				body = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: kv, End: v.shape[1]}, args: []*val{v}, out: v.format, label: "the table's grid entries"})
			}
			if body == nil {
				return nil, nil
			}
			m := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{body}, out: v.format}), []int{1, c, g, g})
			if m == nil {
				return nil, nil
			}
			if kv == k && k > 0 {
				lead = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: k}, args: []*val{v}, out: v.format, label: "the table's leading entries"})
			}
			return m, lead
		}
	}
	return nil, nil
}

// tighterTable is t explained as an expression plus a resized table
// (resizedTables, peeled) where that is closer than err, the error of a
// form glue found within tolerance only: a table small beside the rows
// it is added to (a learned position table at random or real weights)
// leaves, dropped, a sum within a narrow format's tolerance that is
// nonetheless not the computation. nil where no table does better.
func (s *synth) tighterTable(t *val, sc *scope, vals []*val, err float64) *val {
	if s.peeling || t.integral() {
		return nil
	}
	tables := s.resizedTables(t, vals)
	if len(tables) == 0 {
		return nil
	}
	if v := s.peeledWith(t, sc, tables); v != nil && relRMS(t.format, v.data, t.data) < err {
		return v
	}
	return nil
}
