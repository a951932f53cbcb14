package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"zflow/exec"
	"zflow/exec/program"
	"zflow/precision"
	"zflow/semantics"
)

// fitRopeTable explains a parameterless call whose two results are RoPE
// tables (cos² + sin² = 1) as rope_table over integer positions among its
// arguments: the layout from which channels repeat, θ from the angles of
// position 1, checked by recomputing both tables.
func (s *synth) fitRopeTable(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	// positions: one column (a sequence) or one per axis ([rows, k] ids)
	var pos *val
	naxes := 0
	for _, x := range xs {
		if x.integral() && x.numel()%rows == 0 && x.numel()/rows <= 3 {
			pos, naxes = x, x.numel()/rows
		}
	}
	if pos == nil || d%2 != 0 {
		return nil, nil
	}
	p2 := s.reshape(pos, []int{rows, naxes})
	if p2 == nil {
		return nil, nil
	}
	var pairs [][2]*expr // cos and sin of one node each
	for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
		splits := evenSplits(d, naxes)
		if layout == exec.RopeHalf && naxes > 1 {
			continue // per axis [f, f]: not how a half layout over several axes is laid out
		}
		thetas := []float64{10000}
		if naxes == 1 {
			thetas = thetaCandidates(cosT, pos, d, layout)
		}
		for _, axes := range splits {
			for _, theta := range thetas {
				for _, ff := range []precision.Format{precision.F32, precision.F64} {
					for _, af := range []precision.Format{precision.F32, precision.F64} {
						p := exec.RopeTableParams{Theta: theta, AxesDims: axes, Layout: layout, FreqFormat: ff, AngleFormat: af}
						label := fmt.Sprintf("%s axes %v theta=%g freq=%s angle=%s", layout, axes, theta, ff, af)
						c := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{p2}, out: cosT.format, label: label}
						pairs = append(pairs, [2]*expr{c, pickOf(c, 1)})
					}
				}
			}
		}
	}
	bestI, bestScore := -1, math.Inf(1)
	var ev []semantics.Candidate
	for i, pr := range pairs {
		c, e1 := s.ev.score(pr[0], cosT)
		sn, e2 := s.ev.score(pr[1], sinT)
		sc := math.Max(e1, e2)
		ev = append(ev, semantics.Candidate{Value: pr[0].label, Score: finite(sc)})
		if c != nil && sn != nil && sc < bestScore {
			bestI, bestScore = i, sc
		}
	}
	if bestI < 0 || bestScore > tolerance(cosT.format) {
		return nil, nil
	}
	return s.tables(pairs[bestI][0], cosT, sinT, ev)
}

// pickOf is an expression for result i of e's node (sharing its node).
func pickOf(e *expr, i int) *expr {
	if i == e.pick {
		return e
	}
	if e.sibling == nil {
		e.sibling = map[int]*expr{}
	}
	if x, ok := e.sibling[i]; ok {
		return x
	}
	x := &expr{op: e.op, attrs: e.attrs, args: e.args, out: e.out, label: e.label, pick: i, shapes: e.shapes, node: e}
	e.sibling[i] = x
	return x
}

// unitCircle reports whether cos² + sin² ≈ 1 everywhere.
func unitCircle(c, s *val) bool {
	for i := range c.data {
		r := float64(c.data[i])*float64(c.data[i]) + float64(s.data[i])*float64(s.data[i])
		if math.Abs(r-1) > 0.05 {
			return false
		}
	}
	return true
}

// thetaCandidates reads θ from the table's angles at the smallest
// positive position (3 significant digits), with the common bases.
func thetaCandidates(cosT, pos *val, d int, layout exec.RopeLayout) []float64 {
	out := []float64{10000}
	row, p := -1, math.Inf(1)
	for i, x := range pos.data {
		if x > 0 && float64(x) < p {
			row, p = i, float64(x)
		}
	}
	if row < 0 {
		return out
	}
	idx := 1 // frequency 1: channel 1 (half) or channels 2, 3 (interleaved)
	if layout == exec.RopeInterleaved {
		idx = 2
	}
	c := float64(cosT.data[row*d+idx])
	if c >= 1 || c <= -1 {
		return out
	}
	f := math.Acos(c) / p // θ^(−2/d)
	if f <= 0 {
		return out
	}
	theta := math.Pow(f, -float64(d)/2)
	if r, err := strconv.ParseFloat(strconv.FormatFloat(theta, 'g', 3, 64), 64); err == nil && r != 10000 && r > 1 {
		out = append(out, r)
	}
	return out
}

// fitGridRope explains two parameterless results that are RoPE tables of
// S rows as rope_table over grid positions (row-major over 1 to 3 axes
// whose sizes multiply to S, each from 0): the split of the width into
// axes, the layout and θ searched, checked by recomputing both tables.
func (s *synth) fitGridRope(cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	if d%2 != 0 || rows < 2 {
		return nil, nil
	}
	type cand struct {
		grid, axes []int
		layout     exec.RopeLayout
		theta      float64
		stride     float32 // positions are the grid index times this (rescaled positions)
		joint      bool    // half layout over the axes together: [f_a f_b … | f_a f_b …]
	}
	var cands []cand
	for _, grid := range factorizations(rows, 3) {
		for _, axes := range evenSplits(d, len(grid)) {
			for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
				for _, joint := range []bool{false, true} {
					if joint && (layout != exec.RopeHalf || len(axes) < 2 || !allSame(axes)) {
						continue
					}
					for _, stride := range gridStrides(grid) {
						for _, theta := range []float64{10000, 256, 1000, 100000, 500000} {
							cands = append(cands, cand{grid, axes, layout, theta, stride, joint})
						}
					}
				}
			}
		}
	}
	var best *cand
	bestScore := math.Inf(1)
	var ev []semantics.Candidate
	build := func(c *cand) (*val, *expr, *val, *val) {
		ids := gridIDs(c.grid)
		for i := range ids.data {
			ids.data[i] *= c.stride
		}
		p := exec.RopeTableParams{Theta: c.theta, AxesDims: c.axes, Layout: c.layout, FreqFormat: precision.F32, AngleFormat: precision.F32}
		e := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{ids}, out: cosT.format, label: "grid rope"}
		cv, err1 := s.ev.run(e)
		sv, err2 := s.ev.run(pickOf(e, 1))
		if err1 != nil || err2 != nil {
			return nil, nil, nil, nil
		}
		if c.joint {
			cv, sv = s.regroup(cv, len(c.axes)), s.regroup(sv, len(c.axes))
		}
		return ids, e, cv, sv
	}
	for i := range cands {
		c := &cands[i]
		_, _, cv, sv := build(c)
		if cv == nil || sv == nil || cv.numel() != cosT.numel() {
			continue
		}
		sc := math.Max(relRMS(cv.data, cosT.data), relRMS(sv.data, sinT.data))
		ev = append(ev, semantics.Candidate{Value: fmt.Sprintf("grid %v×%g axes %v %s joint=%v theta=%g", c.grid, c.stride, c.axes, c.layout, c.joint, c.theta), Score: finite(sc)})
		if sc < bestScore {
			best, bestScore = c, sc
		}
		if sc == 0 {
			break
		}
	}
	if best == nil || bestScore > tolerance(cosT.format) {
		return nil, nil
	}
	ids, e, cv, sv := build(best)
	s.em.constant(ids, fmt.Sprintf("grid positions %v × %g, row-major (made from the request's shape)", best.grid, best.stride))
	cosV, sinV := s.reshape(cv, cosT.shape), s.reshape(sv, sinT.shape)
	if cosV == nil || sinV == nil {
		return nil, nil
	}
	fit := &leafFit{kind: "rope_table", rope: e.attrs.RopeTable, candidates: ev}
	cosV.fit, sinV.fit = fit, fit
	return cosV, sinV
}

func allSame(xs []int) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// gridStrides are the position scales to try: 1, and the powers of two
// that map the largest axis onto 256 or 512 positions (a model that
// rescales its grid to a fixed base, idx·base // n).
func gridStrides(grid []int) []float32 {
	out := []float32{1}
	for _, base := range []int{256, 512} {
		n := slices.Max(grid)
		if base%n == 0 && base/n > 1 {
			out = append(out, float32(base/n))
		}
	}
	return out
}

// regroup lays per-axis half tables [f_a f_a | f_b f_b] out as one half
// layout over all axes [f_a f_b | f_a f_b] (k axes of equal width).
func (s *synth) regroup(t *val, k int) *val {
	rows, w := t.shape[0], t.shape[len(t.shape)-1]
	r := s.reshape(t, []int{rows, k, 2, w / (2 * k)})
	p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{r}, out: t.format, label: "axes together"})
	return s.reshape(p, []int{rows, w})
}

// gridIDs are row-major positions over grid, one column per axis.
func gridIDs(grid []int) *val {
	n := 1
	for _, g := range grid {
		n *= g
	}
	data := make([]float32, 0, n*len(grid))
	idx := make([]int, len(grid))
	for range n {
		for _, x := range idx {
			data = append(data, float32(x))
		}
		for a := len(grid) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < grid[a] {
				break
			}
			idx[a] = 0
		}
	}
	return &val{shape: []int{n, len(grid)}, data: data, format: precision.F32, origin: "grid positions"}
}

// factorizations lists the ordered ways of writing n as a product of 1 to
// k factors > 1 (n itself first).
func factorizations(n, k int) [][]int {
	out := [][]int{{n}}
	if k == 1 {
		return out
	}
	for f := 2; f < n; f++ {
		if n%f != 0 {
			continue
		}
		for _, rest := range factorizations(n/f, k-1) {
			out = append(out, append([]int{f}, rest...))
		}
	}
	return out
}

// evenSplits lists the ways of writing d as k even parts > 0.
func evenSplits(d, k int) [][]int {
	if k == 1 {
		if d > 0 && d%2 == 0 {
			return [][]int{{d}}
		}
		return nil
	}
	var out [][]int
	for first := 2; first < d; first += 2 {
		for _, rest := range evenSplits(d-first, k-1) {
			out = append(out, append([]int{first}, rest...))
		}
	}
	return out
}

// tables runs the one node that makes both RoPE tables (e, result 0 cos
// and result 1 sin) and shapes them as the targets.
func (s *synth) tables(e *expr, cosT, sinT *val, ev []semantics.Candidate) (*val, *val) {
	c, err := s.ev.run(e)
	if err != nil {
		return nil, nil
	}
	sn, err := s.ev.run(pickOf(e, 1))
	if err != nil {
		return nil, nil
	}
	cosV, sinV := s.reshape(c, cosT.shape), s.reshape(sn, sinT.shape)
	if cosV == nil || sinV == nil {
		return nil, nil
	}
	fit := &leafFit{kind: "rope_table", rope: e.attrs.RopeTable, candidates: ev}
	cosV.fit, sinV.fit = fit, fit
	return cosV, sinV
}
