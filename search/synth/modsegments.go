package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxSegmentRuns bounds the runs of rows a segmented vector is made of.
const maxSegmentRuns = 4

// segmentedRows explains t [B, S, C] as a modulation x·(1 + scale)
// (+ shift) or a gated residual x + y·g(gate) whose vector changes along
// the rows: each run of rows takes one [B, C] vector of the scope's pool,
// the next run another (torch.where over a 0/1 mask of the rows between
// two conditionings' modulations: rows of clean context beside noisy
// rows, each with its own timestep's chunks). Each row's vector is read
// off the values (t against x, or against x and y) and matched to the
// pool; the runs become one vector of the rows, each pool vector repeated
// over its run and the runs joined. Tried once every other form failed.
func (s *synth) segmentedRows(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	xs := sameShape(t, vals)
	if len(xs) == 0 {
		return nil
	}
	if len(xs) > 6 {
		xs = xs[:6]
	}
	// a table's rows broadcast over the batch ([1, C] where B > 1) are
	// not per-sample vectors: the runs read b·c elements of each
	pool := slices.DeleteFunc(slices.Clone(s.vectors(sc, b, c)), func(p vec) bool { return p.v.numel() != b*c })
	if len(pool) < 2 {
		return nil
	}
	tol := tolerance(t.format)
	try := func(e *expr) *val {
		// run, not derive: a modulation's shift is optional
		w, err := s.ev.run(e)
		if err == nil && w != nil && relRMS(t.format, w.data, t.data) <= tol && s.everyStep(w, t, tol) {
			return w
		}
		return nil
	}
	// x·(1 + scale) (+ shift), or x·scale (+ shift)
	for _, x := range xs {
		for _, plus := range []bool{true, false} {
			scale, shift, ok := s.rowScales(t, x, pool, plus, tol)
			if !ok {
				continue
			}
			sv := s.segmented(pool, scale, b, n, c, "scale")
			if sv == nil {
				continue
			}
			var sh *val
			label := fmt.Sprintf("modulated by runs of rows: plus_one=%v scale=%s", plus, runsLabel(pool, scale))
			if shift != nil {
				if sh = s.segmented(pool, shift, b, n, c, "shift"); sh == nil {
					continue
				}
				label += " shift=" + runsLabel(pool, shift)
			}
			if w := try(&expr{op: program.OpModulate, attrs: program.Attrs{Modulate: exec.ModulateParams{PlusOne: plus}}, args: []*val{x, sh, sv}, out: t.format, label: label}); w != nil {
				return w
			}
		}
	}
	// x + y·g(gate)
	for _, x := range xs {
		for _, y := range xs {
			if x == y {
				continue
			}
			for _, act := range []exec.ActKind{exec.ActIdentity, exec.ActTanh} {
				gate, ok := rowGates(t, x, y, pool, act, tol)
				if !ok {
					continue
				}
				g := s.segmented(pool, gate, b, n, c, "gate")
				if g == nil {
					continue
				}
				if w := try(&expr{op: program.OpGatedResidual, attrs: program.Attrs{Act: act}, args: []*val{x, y, g}, out: t.format,
					label: fmt.Sprintf("gated residual by runs of rows: gate=%s(%s)", act, runsLabel(pool, gate))}); w != nil {
					return w
				}
			}
		}
	}
	return nil
}

// rowScales matches each row of t to x's row times a pool vector (plus one
// where plus), plus a pool vector or nothing: the pool indices per row of
// the scale and of the shift (nil: no row has one). ok is false where a
// row matches nothing, or where one vector serves every row (the plain
// modulation's form, not this one).
func (s *synth) rowScales(t, x *val, pool []vec, plus bool, tol float64) (scale, shift []int, ok bool) {
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	scale, shift = make([]int, n), make([]int, n)
	anyShift := false
	got, want := make([]float32, b*c), make([]float32, b*c)
	for r := range n {
		rowOf(t, r, want)
		found := false
		for i, p := range pool {
			for bi := range b {
				for ch := range c {
					m := p.v.data[bi*c+ch]
					if plus {
						m++
					}
					got[bi*c+ch] = x.data[(bi*n+r)*c+ch] * m
				}
			}
			if relRMS(t.format, got, want) <= 10*tol {
				scale[r], shift[r], found = i, -1, true
				break
			}
			// the rest a shift of the pool
			for k := range got {
				got[k] = want[k] - got[k]
			}
			if j, e := nearestRow(pool, got); e <= 10*tol && rowNorm(got) > 1e-6*rowNorm(want) {
				scale[r], shift[r], found, anyShift = i, j, true, true
				break
			}
		}
		if !found {
			return nil, nil, false
		}
	}
	if anyShift {
		for r := range shift {
			if shift[r] < 0 {
				return nil, nil, false // a shift on some rows only: not one modulation
			}
		}
	} else {
		shift = nil
	}
	if !varies(scale) && (shift == nil || !varies(shift)) {
		return nil, nil, false
	}
	return scale, shift, true
}

// rowGates matches each row of t − x to y's row times g(a pool vector):
// the pool index per row; ok is false where a row matches nothing or one
// vector serves every row.
func rowGates(t, x, y *val, pool []vec, act exec.ActKind, tol float64) ([]int, bool) {
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	gate := make([]int, n)
	got, want := make([]float32, b*c), make([]float32, b*c)
	for r := range n {
		rowOf(t, r, want)
		found := false
		for i, p := range pool {
			for bi := range b {
				for ch := range c {
					k := (bi*n+r)*c + ch
					g := p.v.data[bi*c+ch]
					if act != exec.ActIdentity {
						g = exec.Activate(act, g, 0)
					}
					got[bi*c+ch] = x.data[k] + y.data[k]*g
				}
			}
			if relRMS(t.format, got, want) <= 10*tol {
				gate[r], found = i, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return gate, varies(gate)
}

// segmented is the [B, S, C] vector whose rows take pool[ids[r]]: each run
// of equal ids one pool vector repeated over the run's rows, the runs
// joined along the rows; nil past maxSegmentRuns runs.
func (s *synth) segmented(pool []vec, ids []int, b, n, c int, what string) *val {
	var parts []*val
	for start := 0; start < n; {
		end := start + 1
		for end < n && ids[end] == ids[start] {
			end++
		}
		p := pool[ids[start]]
		col := s.reshape(p.v, []int{b, 1, c})
		if col == nil {
			return nil
		}
		rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: end - start, Axis: 1}, args: []*val{col}, out: p.v.format,
			label: fmt.Sprintf("%s of rows %d..%d: %s", what, start, end, p.label)})
		if rep == nil {
			return nil
		}
		parts = append(parts, rep)
		start = end
	}
	if len(parts) < 2 || len(parts) > maxSegmentRuns {
		return nil
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: parts, out: parts[0].format, label: what + " by runs of rows"})
}

// runsLabel names the runs of ids: "rows 0..3 v, rows 3..7 w".
func runsLabel(pool []vec, ids []int) string {
	out := ""
	for start := 0; start < len(ids); {
		end := start + 1
		for end < len(ids) && ids[end] == ids[start] {
			end++
		}
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("rows %d..%d %s", start, end, pool[ids[start]].label)
		start = end
	}
	return out
}

// rowOf copies row r of v [B, S, C] (every sample) into dst [B·C].
func rowOf(v *val, r int, dst []float32) {
	b, n, c := v.shape[0], v.shape[1], v.shape[2]
	for bi := range b {
		copy(dst[bi*c:(bi+1)*c], v.data[(bi*n+r)*c:(bi*n+r+1)*c])
	}
}

// nearestRow is the pool vector nearest want (its index and rel-RMS, in
// the vector's own format).
func nearestRow(pool []vec, want []float32) (int, float64) {
	best, be := -1, math.Inf(1)
	refs := map[precision.Format]*precision.Ref{} // want, in each vector's format
	for i, p := range pool {
		if p.v.numel() != len(want) {
			continue
		}
		ref := refs[p.v.format]
		if ref == nil {
			ref = precision.NewRef(p.v.format, want)
			refs[p.v.format] = ref
		}
		if ref.Beyond(p.v.data, be) {
			continue // farther than the best so far: read only until that shows
		}
		if e := relRMS(p.v.format, p.v.data, want); e < be {
			best, be = i, e
		}
	}
	return best, be
}

// rowNorm is the Euclidean norm of v.
func rowNorm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// varies reports whether ids holds two different entries.
func varies(ids []int) bool {
	for _, i := range ids {
		if i != ids[0] {
			return true
		}
	}
	return false
}
