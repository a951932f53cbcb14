package synth

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
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

// maxCoordTables bounds the tables read at coordinates that
// coordTableAdded scores.
const maxCoordTables = 4

// coordTableAdded explains t [N, C] (or [1, N, C]) as a value of the
// scope plus a learned g×g table resampled at coordinates: the table an
// uncalled sub-module's matrix [g², C] (an nn.Embedding the forward reads
// itself), resized to the H×W grid two integer vectors h and w of the
// scope span (H = max h + 1) in each of interpolate's modes, read at rows
// h·W + w (GLM-4V's vision embeddings: grid_sample, bicubic, border, at
// each patch's (h, w), the patches in merge order). One image: H·W = N.
// Screened on the host against the scope's values first.
func (s *synth) coordTableAdded(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) < 2 || len(t.shape) > 3 || len(t.shape) == 3 && t.shape[0] != 1 || t.integral() {
		return nil
	}
	n, c := t.shape[len(t.shape)-2], t.shape[len(t.shape)-1]
	var coords, tables []*val
	for _, v := range vals {
		if !v.param && v.numel() == n && v.integral() && slices.Min(v.data) >= 0 {
			coords = append(coords, v)
		}
	}
	if len(coords) < 2 {
		return nil
	}
	for _, l := range s.directUncalledLinears(sc.module) {
		if g := isqrt(l[0].shape[0]); g >= 2 && l[0].shape[1] == c {
			tables = append(tables, l[0])
		}
	}
	if len(tables) == 0 {
		return nil
	}
	type scored struct {
		b   *val
		err float64
	}
	var cands []scored
	for _, hc := range coords {
		for _, wc := range coords {
			h, w := int(slices.Max(hc.data))+1, int(slices.Max(wc.data))+1
			if hc == wc || h*w != n {
				continue
			}
			for _, tb := range tables {
				for _, mode := range resampleModes() {
					b := s.coordTable(tb, hc, wc, h, w, mode, t)
					if b == nil {
						continue
					}
					err := math.Inf(1)
					for _, a := range vals {
						if !a.param && !a.integral() && a.numel() == t.numel() {
							err = min(err, relRMS(t.format, addData(a.data, b.data), t.data))
						}
					}
					cands = append(cands, scored{b, err})
				}
			}
		}
	}
	slices.SortStableFunc(cands, func(x, y scored) int { return cmp.Compare(x.err, y.err) })
	var addends []*val
	for _, c := range cands[:min(len(cands), maxCoordTables)] {
		addends = append(addends, c.b)
	}
	return s.peeledWith(t, sc, addends)
}

// coordTable is the table tb [g², C] as a g×g map resized to h×w in
// mode (in f32, rounded to t's format), read at rows hc·w + wc, in t's
// shape.
func (s *synth) coordTable(tb, hc, wc *val, h, w int, mode resampleMode, t *val) *val {
	g, c := isqrt(tb.shape[0]), tb.shape[1]
	grid := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{tb}, out: tb.format, label: "a table's channels first"}), []int{1, c, g, g})
	if grid == nil {
		return nil
	}
	e := s.resampleExpr(grid, h, w, mode, t.format)
	if e == nil {
		return nil
	}
	rows := s.reshape(s.mapRows(s.derive(e)), []int{h * w, c})
	n := hc.numel()
	row := s.derive(&expr{op: program.OpMul, args: []*val{s.reshape(hc, []int{n}), s.constant(float64(w))}, out: precision.F32, label: "h·W"})
	ids := s.derive(&expr{op: program.OpAdd, args: []*val{row, s.reshape(wc, []int{n})}, out: precision.F32, label: "the row h·W + w"})
	if rows == nil || ids == nil {
		return nil
	}
	ids.intType = true
	gathered := s.derive(&expr{op: program.OpGather, args: []*val{rows, ids}, out: t.format, label: "the resized table's row at each coordinate"})
	b := s.reshape(gathered, slices.Clone(t.shape))
	if b != nil {
		b.origin = fmt.Sprintf("%s resized %d→%dx%d (%s), read at coordinates", tb.origin, g, h, w, mode)
	}
	return b
}

// addData is a + b elementwise (f32).
func addData(a, b []float32) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// fitResizedRows explains t [.., n, C] as the rows of a table [.., L, C]
// (leading axes of one) resized to n along its rows in one of
// interpolate's modes, its columns kept: a learned position table held
// at its longest and resampled to the sequence in the forward
// (SAM3-Lite-Text's text encoder: F.interpolate(P, size=(n, C),
// mode="bilinear") of P [1, 1, L, C]). The mode nearest t wins, within
// the format's tolerance.
func (s *synth) fitResizedRows(table, t *val) *val {
	r := len(table.shape)
	l, c := table.shape[r-2], table.shape[r-1]
	if table.numel() != l*c || len(t.shape) < 2 || t.shape[len(t.shape)-1] != c || t.numel()%c != 0 {
		return nil
	}
	n := t.numel() / c
	if n == l || n < 1 {
		return nil
	}
	grid := s.reshape(table, []int{1, 1, l, c})
	if grid == nil {
		return nil
	}
	var best *val
	bestErr := tolerance(t.format)
	for _, mode := range resampleModes() {
		e := s.resampleExpr(grid, n, c, mode, t.format)
		if e == nil {
			continue
		}
		w := s.reshape(s.derive(e), t.shape)
		if w == nil {
			continue
		}
		if err := relRMS(t.format, w.data, t.data); err <= bestErr {
			best, bestErr = w, err
			if err == 0 {
				break
			}
		}
	}
	return best
}
