package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// nearestRows explains integer ids t as the rows of a table E [K, D] that
// lie nearest the rows of a value x of the scope (a vector quantizer's
// codebook lookup: argmin over cdist(x, E)). x's rows run along its last
// axis, or along its second (channels first, moved last); the table is a
// parameter of the scope's calls or one no call holds. The distances are
// read two ways, the first of equal least entries winning as in torch's
// argmin: as torch.cdist computes them past 25 rows, one product of
// [−2x, 1, ‖x‖²] and [e, ‖e‖², 1] in x's format, clamped and rooted (in
// bf16 its roundings tie entries, and the first tied wins); and as
// ‖e‖² − 2·x·eᵀ in f32, which orders a row's entries as ‖x − e‖ does.
// The host's f64 nearest rows must agree with most ids first.
func (s *synth) nearestRows(t *val, sc *scope, vals []*val) *val {
	if t.numel() == 0 || !t.integral() || slices.Min(t.data) < 0 {
		return nil
	}
	top := slices.Max(t.data)
	var tables []*val
	seen := map[*val]bool{}
	add := func(v *val) {
		if v != nil && v.param && isMatrix(v) && float32(v.shape[0]) > top && v.shape[0] > 1 && !seen[v] {
			seen[v] = true
			tables = append(tables, v)
		}
	}
	for _, name := range s.subtreeParams(sc.call) {
		if v, err := s.param(name); err == nil {
			add(v)
		}
	}
	for _, v := range vals {
		add(v)
	}
	for _, e := range tables {
		d := e.shape[1]
		for _, x := range vals {
			if x.param || x.opaque || x.integral() || x.numel() != t.numel()*d {
				continue
			}
			for _, r := range s.rowsAlong(x, d) {
				if nearestShare(r.data, e, t.data) < 0.9 {
					continue
				}
				rows := r.of(s)
				for _, dist := range []func(rows, e *val) *val{s.cdistProduct, s.normLessDistance} {
					if v := s.nearestIDs(dist(rows, e), t); v != nil {
						return v
					}
				}
			}
		}
	}
	return nil
}

// rowsOf is a way to read x as rows of d entries: its data in that order,
// and how to make them.
type rowsOf struct {
	data []float32
	of   func(s *synth) *val
}

// rowsAlong reads x [.., d] as its rows, and x [B, d, ..] (channels
// first) as its channels moved last.
func (s *synth) rowsAlong(x *val, d int) []rowsOf {
	var out []rowsOf
	r := len(x.shape)
	if r >= 1 && x.shape[r-1] == d {
		out = append(out, rowsOf{data: x.data, of: func(s *synth) *val { return s.reshape(x, []int{x.numel() / d, d}) }})
	}
	if r >= 3 && x.shape[1] == d {
		perm := []int{0}
		for a := 2; a < r; a++ {
			perm = append(perm, a)
		}
		perm = append(perm, 1)
		out = append(out, rowsOf{data: permuteData(x, perm), of: func(s *synth) *val {
			m := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{x}, out: x.format, label: "channels moved last"})
			return s.reshape(m, []int{x.numel() / d, d})
		}})
	}
	return out
}

// nearestShare is the share of rows of x (rows of E's width) whose id is
// that of their nearest row of E, by ‖e‖² − 2·x·eᵀ in f64.
func nearestShare(x []float32, e *val, ids []float32) float64 {
	k, d := e.shape[0], e.shape[1]
	norms := make([]float64, k)
	for j := range k {
		for _, w := range e.data[j*d : (j+1)*d] {
			norms[j] += float64(w) * float64(w)
		}
	}
	agree := 0
	for i, id := range ids {
		row := x[i*d : (i+1)*d]
		best, bestD := -1, math.Inf(1)
		for j := range k {
			dot := 0.0
			for c, w := range e.data[j*d : (j+1)*d] {
				dot += float64(row[c]) * float64(w)
			}
			if dist := norms[j] - 2*dot; dist < bestD {
				best, bestD = j, dist
			}
		}
		if float32(best) == id {
			agree++
		}
	}
	return float64(agree) / float64(len(ids))
}

// sumsOf is each row's sum of squares [N, 1] of v [N, D], in v's format:
// squares rounded, summed in f32 as one product with ones, rounded once.
func (s *synth) sumsOf(v *val) *val {
	d := v.shape[1]
	sq := s.derive(&expr{op: program.OpMul, args: []*val{v, v}, out: v.format, label: "squared"})
	return s.derive(&expr{op: program.OpLinear, args: []*val{sq, s.onesMatrix(1, d), nil}, out: v.format, label: "each row's sum of squares"})
}

// onesMatrix is [r, c] of ones, one constant repeated (no table of
// ones held in the document).
func (s *synth) onesMatrix(r, c int) *val {
	v := s.reshape(s.constant(1), []int{1, 1})
	for ax, n := range []int{r, c} {
		if n > 1 && v != nil {
			v = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: ax}, args: []*val{v}, out: v.format, label: "ones"})
		}
	}
	return v
}

// cdistProduct is torch.cdist's matrix form past 25 rows: [−2x, 1, ‖x‖²]
// times [e, ‖e‖², 1]ᵀ in x's format, at least 1e-30, then its root where
// the format is narrower than f32 (there the root's rounding ties
// entries; in f32 it does not reorder them).
func (s *synth) cdistProduct(rows, e *val) *val {
	if rows == nil {
		return nil
	}
	f := rows.format
	n, k := rows.shape[0], e.shape[0]
	m2 := s.derive(&expr{op: program.OpMul, args: []*val{rows, s.constant(-2)}, out: f, label: "−2x"})
	xp := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{m2, s.onesMatrix(n, 1), s.sumsOf(rows)}, out: f, label: "[−2x, 1, ‖x‖²]"})
	ep := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{e, s.sumsOf(e), s.onesMatrix(k, 1)}, out: e.format, label: "[e, ‖e‖², 1]"})
	d := s.derive(&expr{op: program.OpLinear, args: []*val{xp, ep, nil}, out: f, label: "‖x‖² + ‖e‖² − 2·x·eᵀ as one product"})
	d = s.derive(&expr{op: program.OpMaximum, args: []*val{d, s.constant(1e-30)}, out: f, label: "at least 1e-30"})
	if f == precision.F32 || d == nil {
		return d
	}
	return s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSqrt}, args: []*val{d}, out: f, label: "√"})
}

// normLessDistance is ‖e‖² − 2·x·eᵀ [N, K] in f32: each row's distances
// less ‖x‖², in the same order.
func (s *synth) normLessDistance(rows, e *val) *val {
	if rows == nil {
		return nil
	}
	k := e.shape[0]
	sq := s.derive(&expr{op: program.OpMul, args: []*val{e, e}, out: precision.F32, label: "the table squared"})
	norms := s.reshape(s.derive(&expr{op: program.OpLinear, args: []*val{sq, s.onesMatrix(1, e.shape[1]), nil}, out: precision.F32, label: "‖e‖² of each table row"}), []int{k})
	dot := s.derive(&expr{op: program.OpLinear, args: []*val{rows, e, nil}, out: precision.F32, label: "x·eᵀ"})
	twice := s.derive(&expr{op: program.OpMul, args: []*val{dot, s.constant(2)}, out: precision.F32, label: "2·x·eᵀ"})
	return s.derive(&expr{op: program.OpSub, args: []*val{norms, twice}, out: precision.F32, label: "‖e‖² − 2·x·eᵀ: the distance to each row, less ‖x‖²"})
}

// nearestIDs is the argmin of distances [N, K] in t's shape, where it is
// t's every id.
func (s *synth) nearestIDs(dist, t *val) *val {
	if dist == nil {
		return nil
	}
	ids := s.derive(&expr{op: program.OpArgMin, args: []*val{dist}, out: precision.F32, label: "the nearest table row"})
	ids = s.reshape(ids, slices.Clone(t.shape))
	if ids == nil || !slices.Equal(ids.data, t.data) {
		return nil
	}
	return ids
}
