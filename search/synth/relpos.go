package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// queryPositionBiases are score biases made from the queries themselves
// (decomposed relative positions: a query's content times a table of
// offsets, per axis of the grid its rows are laid on): for a grid G1×…×Gn
// of S rows, each axis a reads a parameter table R_a [L_a, D] (D the head
// width), linearly resampled to 2·G_a − 1 rows where L_a differs, then
// gathered at the fixed pattern idx[i, j] = i − j + G_a − 1 (or j − i +
// G_a − 1) made from the grid's shape; bias_a[b, h, p, k] = Σ_c q[b, p,
// h·D + c] · R_a[idx[p_a, k_a], c] (q as the choice reads it, unscaled),
// the same for every key along the other axes; the bias is their sum,
// [B, H, S, S]. The grid is the one a grid target was read from
// (gridAttention), else every grid whose axes the tables' lengths give
// (L = 2·G − 1). Keys on a grid of their own (pooled keys or queries:
// MViTv2's, SAM's) take the queries' axes scaled by a whole factor, the
// offsets as those models stretch them (offsetPattern). At most four:
// the tables in scope order per axis, each orientation.
func (s *synth) queryPositionBiases(sc *scope, ch attnChoice) []*val {
	q, d := ch.q, ch.headDim
	if d <= 0 || len(q.shape) != 3 || q.shape[2]%d != 0 {
		return nil
	}
	sq, sk := q.shape[1], ch.k.shape[1]
	var tables []*val
	for _, v := range sc.vals {
		if !sc.own[v] && !v.opaque && !v.integral() && len(v.shape) == 2 && v.shape[1] == d && v.shape[0] >= 2 && !slices.Contains(tables, v) {
			tables = append(tables, v)
		}
	}
	if len(tables) == 0 {
		return nil
	}
	var pairs [][2][]int // (query grid, key grid)
	if s.grid != nil {
		pairs = gridPairs(s.grid, sq, sk)
	} else {
		for _, m := range tableGrids(tables) {
			pairs = append(pairs, gridPairs(m, sq, sk)...)
		}
	}
	var out []*val
	for _, gp := range pairs {
		for _, pick := range axisTables(tables, len(gp[0])) {
			for _, keyFirst := range []bool{false, true} {
				if keyFirst && !slices.Equal(gp[0], gp[1]) {
					continue // stretched offsets are query minus key
				}
				if b := s.positionBias(q, d, gp[0], gp[1], pick, keyFirst); b != nil {
					out = append(out, b)
				}
				if len(out) == 4 {
					return out
				}
			}
		}
	}
	return out
}

// queryBiasOf explains t [N, S, Sk] (or [B, H, S, Sk]) as the
// decomposed relative logits of queries q [N, S, D] of the scope over the
// scope's tables (queryPositionBiases, one head of D: N may fold the
// batch and the heads together), standing alone: a position module that
// hands its logits back to the attention (BoTNet's and HaloNet's
// PosEmbedRel, q·R_h and q·R_w gathered at the key-minus-query offsets of
// each axis, summed). Only where the scope holds a table [L, D].
func (s *synth) queryBiasOf(t *val, sc *scope) *val {
	if (len(t.shape) != 3 && len(t.shape) != 4) || t.integral() {
		return nil
	}
	sq, sk := t.shape[len(t.shape)-2], t.shape[len(t.shape)-1]
	n := t.numel() / (sq * sk)
	var cands []*expr
	for _, q := range sc.vals {
		if q.opaque || q.integral() || len(q.shape) != 3 || q.shape[0] != n || q.shape[1] != sq {
			continue
		}
		d := q.shape[2]
		// a table of 2·G − 1 offsets for an axis of G places that
		// divides the rows (an embedding matrix of the scope is not)
		if !slices.ContainsFunc(sc.vals, func(v *val) bool {
			if len(v.shape) != 2 {
				return false
			}
			g := (v.shape[0] + 1) / 2
			return !sc.own[v] && v.shape[1] == d && v.shape[0]%2 == 1 && g >= 2 && sq%g == 0
		}) {
			continue
		}
		keys := &val{shape: []int{n, sk, d}, format: q.format}
		for _, b := range s.queryPositionBiases(sc, attnChoice{q: q, k: keys, v: keys, headDim: d}) {
			if r := s.reshape(b, t.shape); r != nil {
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{b}, out: b.format, label: "relative logits of the queries"})
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// gridPairs are the (query grid, key grid) pairs of sq and sk places
// made from grid g: g itself, or g with every axis divided by one whole
// factor (the pooled side), the other side g.
func gridPairs(g []int, sq, sk int) [][2][]int {
	var out [][2][]int
	for f := 1; f <= slices.Min(g); f++ {
		small := make([]int, len(g))
		for a, x := range g {
			if x%f != 0 {
				small = nil
				break
			}
			small[a] = x / f
		}
		if small == nil {
			continue
		}
		for _, gp := range [][2][]int{{g, small}, {small, g}} {
			if prod(gp[0]) == sq && prod(gp[1]) == sk && !slices.ContainsFunc(out, func(o [2][]int) bool {
				return slices.Equal(o[0], gp[0]) && slices.Equal(o[1], gp[1])
			}) {
				out = append(out, gp)
			}
		}
	}
	return out
}

// tableGrids are the grids whose axes, in order, are read off two or
// three of the tables' lengths (each odd, L = 2·G − 1).
func tableGrids(tables []*val) [][]int {
	var out [][]int
	for _, pick := range slices.Concat(axisTables(tables, 2), axisTables(tables, 3)) {
		var g []int
		for _, tb := range pick {
			if tb.shape[0]%2 == 0 {
				g = nil
				break
			}
			g = append(g, (tb.shape[0]+1)/2)
		}
		if len(g) > 0 && !slices.ContainsFunc(out, func(h []int) bool { return slices.Equal(g, h) }) {
			out = append(out, g)
		}
	}
	return out
}

// axisTables are the ordered choices of n distinct tables, one an axis,
// the scope's order first; at most two.
func axisTables(tables []*val, n int) [][]*val {
	var out [][]*val
	var pick func(cur []*val)
	pick = func(cur []*val) {
		if len(out) == 2 {
			return
		}
		if len(cur) == n {
			out = append(out, slices.Clone(cur))
			return
		}
		for _, t := range tables {
			if !slices.Contains(cur, t) {
				pick(append(cur, t))
			}
		}
	}
	pick(nil)
	return out
}

func prod(xs []int) int {
	p := 1
	for _, x := range xs {
		p *= x
	}
	return p
}

// positionBias is queryPositionBiases' sum over the grids' axes for one
// choice of tables and orientation, the queries on grid, the keys on
// kgrid; nil where a step does not derive.
func (s *synth) positionBias(q *val, d int, grid, kgrid []int, tables []*val, keyFirst bool) *val {
	b, n := q.shape[0], len(grid)
	h := q.shape[2] / d
	cells := slices.Concat([]int{b}, grid, []int{h, d}) // [B, G1…Gn, H, D]
	qg := s.reshape(q, cells)
	var sum *val
	for a, tb := range tables {
		g, kg := grid[a], kgrid[a]
		rel := s.offsetRows(tb, g, kg, keyFirst) // [G, Gk, D]: query place, key place
		if rel == nil {
			return nil
		}
		// q with axis a first, the rest flattened: [G, B·H·…, D]
		perm := []int{1 + a, 0, n + 1}
		var rest []int
		for o := range n {
			if o != a {
				perm = append(perm, 1+o)
				rest = append(rest, grid[o])
			}
		}
		perm = append(perm, n+2)
		qa := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{qg}, out: q.format, label: "queries by their place on one axis"})
		qa = s.reshape(qa, []int{g, qg.numel() / (g * d), d})
		rt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{rel}, out: rel.format, label: "offsets' rows by query place"})
		if qa == nil || rt == nil {
			return nil
		}
		m := s.derive(&expr{op: program.OpMatMul, args: []*val{qa, rt}, out: q.format, label: "queries times their offsets' rows"})
		m = s.reshape(m, slices.Concat([]int{g, b, h}, rest, []int{kg}))
		if m == nil {
			return nil
		}
		// back to [B, H, G1…Gn, key place]
		back := []int{1, 2}
		for o, r := 0, 0; o < n; o++ {
			if o == a {
				back = append(back, 0)
			} else {
				back = append(back, 3+r)
				r++
			}
		}
		back = append(back, n+2)
		m = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: back}, args: []*val{m}, out: q.format, label: "laid out by query place"})
		keys := make([]int, n) // the key axes: one place along a, every place along the rest
		for o := range n {
			keys[o] = 1
		}
		keys[a] = kg
		m = s.reshape(m, slices.Concat([]int{b, h}, grid, keys))
		if m == nil {
			return nil
		}
		if sum == nil {
			sum = m
			continue
		}
		if sum = s.derive(&expr{op: program.OpAdd, args: []*val{sum, m}, out: q.format, label: "axes' offset terms added"}); sum == nil {
			return nil
		}
	}
	return s.reshape(sum, []int{b, h, prod(grid), prod(kgrid)})
}

// offsetRows is table [L, D] resampled to 2·max(g, kg) − 1 rows where L
// differs, then gathered at offsetPattern's indices: [g, kg, D].
func (s *synth) offsetRows(table *val, g, kg int, keyFirst bool) *val {
	rows, m := table.shape[0], 2*max(g, kg)-1
	if max(g, kg) < 2 {
		return nil
	}
	t := table
	if rows != m {
		r := s.relConst(fmt.Sprintf("resample%dto%d", rows, m), []int{m, rows}, linearResample(rows, m),
			fmt.Sprintf("linear resampling of %d rows to %d (align_corners=False): a table trained at another grid read at this one", rows, m))
		t = s.derive(&expr{op: program.OpMatMul, args: []*val{r, table}, out: table.format, label: "table resampled to the grid"})
		if t == nil {
			return nil
		}
	}
	name := fmt.Sprintf("reloffsets%dx%d", g, kg)
	how := "query minus key"
	if keyFirst {
		name += "k"
		how = "key minus query"
	}
	idx := s.relConst(name, []int{g * kg}, offsetPattern(g, kg, keyFirst),
		fmt.Sprintf("relative offsets between %d query places and %d key places on an axis, %s (made from the grid's shape)", g, kg, how))
	idx.intType = true
	gth := s.derive(&expr{op: program.OpGather, args: []*val{t, idx}, out: table.format, label: "table rows at the relative offsets"})
	return s.reshape(gth, []int{g, kg, table.shape[1]})
}

// offsetPattern is the table row each (query place i, key place j) pair
// of an axis reads: i − j + g − 1 (keyFirst: j − i + g − 1) on one grid;
// on grids of g and kg places, each side's places stretched to the
// longer (i·max(kg/g, 1) − j·max(g/kg, 1) + (kg − 1)·max(g/kg, 1),
// truncated: SAM's and MViTv2's decomposed positions).
func offsetPattern(g, kg int, keyFirst bool) []float32 {
	ids := make([]float32, g*kg)
	qr, kr := max(float64(kg)/float64(g), 1), max(float64(g)/float64(kg), 1)
	for i := range g {
		for j := range kg {
			x := float64(i)*qr - float64(j)*kr + float64(kg-1)*kr
			if keyFirst {
				x = float64(j - i + g - 1)
			}
			ids[i*kg+j] = float32(math.Trunc(x))
		}
	}
	return ids
}

// relConst is a constant made once per name, declared in the program
// only where one reads it.
func (s *synth) relConst(name string, shape []int, data []float32, note string) *val {
	if v, ok := s.relConsts[name]; ok {
		return v
	}
	if s.relConsts == nil {
		s.relConsts = map[string]*val{}
	}
	s.seq++
	v := &val{shape: shape, data: data, format: precision.F32, seq: s.seq, origin: name, constNote: note}
	s.relConsts[name] = v
	return v
}

// linearResample is the [m, n] matrix of torch's linear interpolation of
// n samples to m (align_corners=False): output i reads the source at
// (i + ½)·n/m − ½, clamped at 0, between its two neighbours.
func linearResample(n, m int) []float32 {
	out := make([]float32, m*n)
	scale := float64(n) / float64(m)
	for i := range m {
		src := max(scale*(float64(i)+0.5)-0.5, 0)
		i0 := int(math.Floor(src))
		i0 = min(i0, n-1)
		i1 := min(i0+1, n-1)
		l := src - float64(i0)
		out[i*n+i0] += float32(1 - l)
		out[i*n+i1] += float32(l)
	}
	return out
}
