package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// rowVec is one per-token conditioning vector [B, S, C]: a chunk of a
// per-token value [B, S', k, C] (its last or first S rows), a learned
// table's row broadcast over the tokens, or the two added.
type rowVec struct {
	v     *val
	label string
}

// rowVectors lists the [B, S, C] per-token vectors the scope's values
// give (a timestep per token: modulation made per row, [B, S, 6, C] plus
// a [6, C] table, chunked). Memoised per scope and shape.
func (s *synth) rowVectors(sc *scope, b, n, c int) []rowVec {
	key := fmt.Sprintf("rows/%d/%d/%d/%d", b, n, c, len(sc.vals))
	if v, ok := sc.vecs[key]; ok {
		out := make([]rowVec, len(v))
		for i, x := range v {
			out[i] = rowVec{v: x.v, label: x.label}
		}
		return out
	}
	var chunked, tables []*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque {
			continue
		}
		if v.param && len(v.shape) >= 2 && v.shape[len(v.shape)-1] == c && v.numel()/c <= 16 {
			tables = append(tables, v)
			continue
		}
		if !v.param && len(v.shape) >= 3 && v.shape[0] == b && v.shape[1] >= n && v.numel()%(b*v.shape[1]*c) == 0 && v.numel()/(b*v.shape[1]*c) <= 16 {
			chunked = append(chunked, v)
		}
	}
	var out []vec
	add := func(v *val, label string) {
		if v != nil {
			out = append(out, vec{v: v, label: label})
		}
	}
	// the per-token value's k chunks over its last (or first) n rows
	chunks := func(v *val) [][]*val {
		rows, k := v.shape[1], v.numel()/(b*v.shape[1]*c)
		r := s.reshape(v, []int{b, rows, k, c})
		var sets [][]*val
		starts := []int{rows - n}
		if rows > n {
			starts = append(starts, 0)
		}
		for _, st := range starts {
			w := r
			if rows > n {
				w = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: st, End: st + n}, args: []*val{r}, out: v.format, label: "the tokens' rows"})
			}
			var set []*val
			for i := range k {
				p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: i, End: i + 1}, args: []*val{w}, out: v.format})
				set = append(set, s.reshape(p, []int{b, n, c}))
			}
			sets = append(sets, set)
		}
		return sets
	}
	for _, v := range chunked {
		for _, set := range chunks(v) {
			for i, p := range set {
				add(p, fmt.Sprintf("%s chunk %d/%d per token", v, i, len(set)))
			}
		}
	}
	for _, t := range tables {
		k := t.numel() / c
		tr := s.reshape(t, []int{1, 1, k, c})
		for _, v := range chunked {
			kv := v.numel() / (b * v.shape[1] * c)
			if kv != k && kv != 1 {
				continue
			}
			rows := v.shape[1]
			w := s.reshape(v, []int{b, rows, kv, c})
			if rows > n {
				w = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: rows - n, End: rows}, args: []*val{w}, out: v.format, label: "the tokens' rows"})
			}
			// the sum in the value's format, and in f32 where either side
			// was taken to f32 first (an f32 table, or the value's .float():
			// the same numbers, the sum rounded once to f32)
			formats := []precision.Format{v.format}
			if v.format != precision.F32 {
				formats = append(formats, precision.F32)
			}
			for _, f := range formats {
				sum := s.derive(&expr{op: program.OpAdd, args: []*val{tr, w}, out: f, label: "table + per-token value"})
				if sum == nil {
					continue
				}
				for i := range k {
					p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: i, End: i + 1}, args: []*val{sum}, out: f})
					add(s.reshape(p, []int{b, n, c}), fmt.Sprintf("%s row %d/%d + %s per token (%s)", t, i, k, v, f))
				}
			}
		}
	}
	sc.vecs[key] = out
	res := make([]rowVec, len(out))
	for i, x := range out {
		res[i] = rowVec{v: x.v, label: x.label}
	}
	return res
}

// modulatedRows explains t [B, S, C] as x·(1 + scale) + shift (or
// x·scale + shift) with per-token scale and shift vectors (rowVectors),
// or as x + y·gate with a per-token gate (a gated residual): the
// modulation of a timestep per token. Tried once every other form failed.
func (s *synth) modulatedRows(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	if w := s.gatedRowsWindow(t, sc, vals); w != nil {
		return w
	}
	xs := sameShape(t, vals)
	if len(xs) == 0 {
		return nil
	}
	if len(xs) > 6 {
		xs = xs[:6]
	}
	// a per-token value of several chunks, or one beside a learned table
	// of several rows, must be in scope: else nothing here is per token
	table := slices.ContainsFunc(sc.vals, func(v *val) bool {
		return v.param && len(v.shape) >= 2 && v.shape[len(v.shape)-1] == c && v.numel()/c >= 2 && v.numel()/c <= 16
	})
	if !slices.ContainsFunc(sc.vals, func(v *val) bool {
		return !v.opaque && !v.param && len(v.shape) >= 3 && v.shape[0] == b && v.shape[1] >= n && v.numel()%(b*v.shape[1]*c) == 0 &&
			(v.numel() > b*v.shape[1]*c || table)
	}) {
		return nil
	}
	tol := tolerance(t.format)
	rv := s.rowVectors(sc, b, n, c)
	got := make([]float32, len(t.data))
	// a later fit replaces the first only when it is four times nearer:
	// in a narrow format a vector that misses a small term (a chunk
	// without its table row) can pass the tolerance where the right one
	// is exact, while vectors that differ only in where they round score
	// alike before the precision search settles the op's rounding (the
	// first of those, in rowVectors' order, is the one kept)
	var best *val
	bestErr := math.Inf(1)
	try := func(e *expr) bool {
		w := s.derive(e)
		if w == nil {
			return false
		}
		if r := relRMS(t.format, w.data, t.data); r <= tol && r < bestErr/4 && s.everyStep(w, t, tol) {
			best, bestErr = w, r
		}
		return bestErr == 0
	}
	for _, x := range xs {
		for _, sv := range rv {
			for _, plus := range []bool{true, false} {
				// the shift a modulation needs, given this scale
				for i := range got {
					m := sv.v.data[i]
					if plus {
						m++
					}
					got[i] = t.data[i] - x.data[i]*m
				}
				need := precision.NewRef(t.format, got) // against every shift
				for _, sh := range rv {
					if need.Beyond(sh.v.data, 10*tol) {
						continue
					}
					if try(&expr{op: program.OpModulate, attrs: program.Attrs{Modulate: exec.ModulateParams{PlusOne: plus}}, args: []*val{x, sh.v, sv.v}, out: t.format,
						label: fmt.Sprintf("modulated per token: plus_one=%v scale=%s shift=%s", plus, sv.label, sh.label)}) {
						return best
					}
				}
			}
		}
	}
	// x + y·gate
	target := precision.NewRef(t.format, t.data)
	for _, x := range xs {
		for _, y := range xs {
			if x == y {
				continue
			}
			for _, g := range rv {
				for i := range got {
					got[i] = x.data[i] + y.data[i]*g.v.data[i]
				}
				if target.Beyond(got, tol) {
					continue
				}
				if try(&expr{op: program.OpGatedResidual, attrs: program.Attrs{Act: exec.ActIdentity}, args: []*val{x, y, g.v}, out: t.format, label: "gated residual per token: gate=" + g.label}) {
					return best
				}
			}
		}
	}
	return best
}

// gatedRowsWindow explains t [B, n, C] as the first or last n rows of a
// gated residual per token computed over longer values X + Y·G [B, S, C]
// (the history rows cut off after the self-attention's residual, before a
// step only the window's rows take): the whole residual is made, kept in
// the scope (its other rows join back later), and t's rows cut from it.
func (s *synth) gatedRowsWindow(t *val, sc *scope, vals []*val) *val {
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	var long []*val
	for _, v := range vals {
		if !v.opaque && len(v.shape) == 3 && v.shape[0] == b && v.shape[2] == c && v.shape[1] > n {
			long = append(long, v)
		}
	}
	if len(long) < 2 {
		return nil
	}
	if len(long) > 10 {
		long = long[:10]
	}
	tol := tolerance(t.format)
	var best, bestFull *val
	bestErr := math.Inf(1)
	for _, x := range long {
		rows := x.shape[1]
		rv := s.rowVectors(sc, b, rows, c)
		for _, y := range long {
			if y == x || y.shape[1] != rows {
				continue
			}
			for _, start := range []int{rows - n, 0} {
				for _, g := range rv {
					// t's rows of x + y·g, on the host first
					ok := true
					for bi := 0; bi < b && ok; bi++ {
						for r := range n {
							for ch := range c {
								i := (bi*rows+start+r)*c + ch
								got := x.data[i] + y.data[i]*g.v.data[i]
								want := t.data[(bi*n+r)*c+ch]
								if d := float64(got - want); d*d > 1e-2*(float64(want)*float64(want)+1e-6) {
									ok = false
									break
								}
							}
						}
					}
					if !ok {
						continue
					}
					full := s.derive(&expr{op: program.OpGatedResidual, attrs: program.Attrs{Act: exec.ActIdentity}, args: []*val{x, y, g.v}, out: t.format, label: "gated residual per token: gate=" + g.label})
					if full == nil {
						continue
					}
					w := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: start, End: start + n}, args: []*val{full}, out: full.format, label: "the window's rows"})
					if w == nil {
						continue
					}
					// the closest wins (a gate summed in f32 and the same
					// rounded to bf16 both lie within bf16's tolerance)
					if e := relRMS(t.format, w.data, t.data); e <= tol && e < bestErr && s.everyStep(w, t, tol) {
						best, bestFull, bestErr = w, full, e
						if e == 0 {
							sc.add(full, true)
							return w
						}
					}
				}
			}
		}
	}
	if best != nil {
		sc.add(bestFull, true)
	}
	return best
}
