package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxResizedSources bounds the values of other grids resizedSum resizes,
// and maxSameTerms the values of the target's shape it weighs beside them
// (the most recent first).
const (
	maxResizedSources = 8
	maxSameTerms      = 8
)

// resizedSum explains t as a sum of values of its shape and of values of
// another grid resized to t's (a multi-scale fusion: CoaT's parallel
// blocks add each scale's attention output up- or downsampled bilinearly,
// its class row carried over; a DPT or FPN fusion adds an upsampled map).
// Maps [B, C, H, W] are resized as they are; rows [B, k + h·h, C] are
// read as k leading rows (k ≤ 2) and a square grid, the grid resized and
// the leading rows kept in front. For each of interpolate's modes the
// coefficients over the values are fitted by least squares
// (manySummed's), each snapped to a whole number; at least one resized
// value must take part. The terms are added in the order their sources
// were made.
func (s *synth) resizedSum(t *val, vals []*val) *val {
	if t.integral() || len(t.shape) < 3 || len(t.shape) > 4 {
		return nil
	}
	same := sameShape(t, vals)
	if len(same) == 0 {
		return nil
	}
	same = same[:min(len(same), maxSameTerms)]
	snap := 1e-3
	if t.format != precision.F32 {
		snap = 0.05
	}
	for _, mode := range resampleModes() {
		resized, from := s.resizedToGrid(t, vals, mode)
		if len(resized) == 0 {
			return nil // no value of another grid: no mode makes one
		}
		var groups [][]*val
		for _, v := range slices.Concat(same, resized) {
			if !slices.ContainsFunc(groups, func(g []*val) bool { return slices.Equal(g[0].data, v.data) }) {
				groups = append(groups, []*val{v})
			}
		}
		c, ok := leastSquares(groups, t)
		if !ok {
			continue
		}
		var terms []*val
		anyResized := false
		for i, g := range groups {
			k := math.Round(c[i])
			if math.Abs(c[i]-k) > snap || k < 0 || k > 1 {
				terms = nil
				break
			}
			if k == 1 {
				terms = append(terms, g[0])
				_, r := from[g[0]]
				anyResized = anyResized || r
			}
		}
		if len(terms) < 2 || !anyResized {
			continue
		}
		order := func(v *val) int {
			if src, ok := from[v]; ok {
				return src.seq
			}
			return v.seq
		}
		slices.SortStableFunc(terms, func(a, b *val) int { return order(a) - order(b) })
		acc := terms[0]
		for _, v := range terms[1 : len(terms)-1] {
			if acc = s.derive(&expr{op: program.OpAdd, args: []*val{acc, v}, out: t.format, label: "sum"}); acc == nil {
				return nil
			}
		}
		w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{acc, terms[len(terms)-1]}, out: t.format,
			label: fmt.Sprintf("sum of %d values, %s-resized ones among them", len(terms), mode)}})
		if w != nil && relRMS(t.format, w.data, t.data) <= tolerance(t.format) {
			return w
		}
	}
	return nil
}

// resizedToGrid is the scope's values of another grid than t's resized
// to it in mode (resizedSum's forms), each with the value it was made from.
func (s *synth) resizedToGrid(t *val, vals []*val, mode resampleMode) ([]*val, map[*val]*val) {
	from := map[*val]*val{}
	var out []*val
	add := func(src, r *val) {
		if r != nil && len(out) < maxResizedSources {
			out = append(out, r)
			from[r] = src
		}
	}
	for _, v := range vals {
		if v.opaque || v.integral() || len(v.shape) != len(t.shape) || v.shape[0] != t.shape[0] || slices.Equal(v.shape, t.shape) {
			continue
		}
		if len(out) == maxResizedSources {
			break
		}
		if len(t.shape) == 4 {
			if v.shape[1] == t.shape[1] && gridRatio(v.shape[2], t.shape[2]) && gridRatio(v.shape[3], t.shape[3]) {
				if e := s.resampleExpr(v, t.shape[2], t.shape[3], mode, t.format); e != nil {
					add(v, s.derive(e))
				}
			}
			continue
		}
		if v.shape[2] != t.shape[2] {
			continue
		}
		for k := range 3 {
			g, gv := isqrt(t.shape[1]-k), isqrt(v.shape[1]-k)
			if g < 2 || gv < 1 || g*g != t.shape[1]-k || gv*gv != v.shape[1]-k || !gridRatio(gv, g) {
				continue
			}
			add(v, s.resizedRows(v, k, gv, g, mode, t.format))
			break
		}
	}
	return out, from
}

// gridRatio reports whether a grid of n cells resizes to m by a whole
// factor either way (2×, ½×, 4×, …), as a fusion of scales does.
func gridRatio(n, m int) bool {
	return n != m && n > 0 && m > 0 && (m%n == 0 || n%m == 0)
}

// resizedRows is v [B, k + g·g, C] with its grid resized to h×h in mode,
// its k leading rows kept in front: [B, k + h·h, C].
func (s *synth) resizedRows(v *val, k, g, h int, mode resampleMode, out precision.Format) *val {
	b, n, c := v.shape[0], v.shape[1], v.shape[2]
	grid := v
	if k > 0 {
		grid = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: k, End: n}, args: []*val{v}, out: v.format, label: "the grid's rows"})
	}
	if grid == nil {
		return nil
	}
	m := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{grid}, out: v.format}), []int{b, c, g, g})
	if m == nil {
		return nil
	}
	e := s.resampleExpr(m, h, h, mode, out)
	if e == nil {
		return nil
	}
	r := s.derive(e)
	if r == nil {
		return nil
	}
	rows := s.mapRows(r)
	if k == 0 || rows == nil {
		return rows
	}
	lead := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: k}, args: []*val{v}, out: v.format, label: "the leading rows"})
	if lead == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{lead, rows}, out: out, label: "the leading rows, then the resized grid"})
}
