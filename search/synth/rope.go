package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/semantics"
)

// fitRopeTable explains a parameterless call whose two results are RoPE
// tables (cos² + sin² = 1) as rope_table over integer positions among its
// arguments: the layout from which channels repeat, θ from the angles of
// position 1, checked by recomputing both tables.
func (s *synth) fitRopeTable(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	if c, sn := s.fitRopeTableAxes(xs, cosT, sinT, 3, false, 0); c != nil {
		return c, sn
	}
	// more axes than three (ids (t, h, w, l), say), or another base than
	// 10⁴ over several axes, each axis's θ read from its own channels:
	// tried only where the common forms fail
	if c, sn := s.fitRopeTableAxes(xs, cosT, sinT, cosT.shape[len(cosT.shape)-1]/2, true, 0); c != nil {
		return c, sn
	}
	// one axis whose trailing pairs never turn (cos 1, sin 0 on every
	// row): only the leading frequencies rotate, at the exponents of the
	// whole width (proportional RoPE); tried where the others fail
	for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
		if r := stillPairs(cosT, sinT, layout); r > 1 {
			if c, sn := s.fitRopeTableAxes(xs, cosT, sinT, 1, false, r); c != nil {
				return c, sn
			}
		}
	}
	return nil, nil
}

// stillPairs is the number r of leading frequencies of a one-axis table
// [.., d] laid out by layout where every later frequency is exactly still
// (cos 1, sin 0 on every row) and frequency r−1 turns somewhere; 0 where
// no trailing frequency is still or none turns.
func stillPairs(cosT, sinT *val, layout exec.RopeLayout) int {
	d := cosT.shape[len(cosT.shape)-1]
	if d%2 != 0 || len(sinT.data) != len(cosT.data) {
		return 0
	}
	still := func(i int) bool {
		a, b := i, i+d/2
		if layout == exec.RopeInterleaved {
			a, b = 2*i, 2*i+1
		}
		for r := 0; r+d <= len(cosT.data); r += d {
			if cosT.data[r+a] != 1 || cosT.data[r+b] != 1 || sinT.data[r+a] != 0 || sinT.data[r+b] != 0 {
				return false
			}
		}
		return true
	}
	n := d / 2
	for n > 0 && still(n-1) {
		n--
	}
	if n == d/2 || n == 0 {
		return 0
	}
	return n
}

// fitRopeTableAxes is fitRopeTable over ids of at most maxAxes columns; θ
// is read per axis from the table's angles where perAxis (else, over
// several axes, the common base alone). rotated > 0 (one axis): only the
// leading rotated frequencies turn (exec.RopeTableParams.Rotated).
func (s *synth) fitRopeTableAxes(xs []*val, cosT, sinT *val, maxAxes int, perAxis bool, rotated int) (*val, *val) {
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	// positions: one column (a sequence) or one per axis ([rows, k] ids)
	var pos *val
	naxes := 0
	for _, x := range xs {
		if x.integral() && x.numel()%rows == 0 && x.numel()/rows <= maxAxes {
			pos, naxes = x, x.numel()/rows
		}
	}
	if pos != nil && naxes > 1 {
		pos, naxes = s.equalLeadingAxes(pos, naxes)
	}
	if pos == nil || d%2 != 0 || perAxis && naxes == 1 {
		return nil, nil
	}
	p2 := s.reshape(pos, []int{rows, naxes})
	if p2 == nil {
		return nil, nil
	}
	var pairs [][2]*expr // cos and sin of one node each
	for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
		splits := evenSplits(d, naxes)
		// a half layout over several axes joins the axes' ladders and lays
		// them out once ([h… w… h… w…]); per axis [f, f] is not how one is
		// laid out
		joined := layout == exec.RopeHalf && naxes > 1
		// splits an earlier table took first: where positions that stay
		// zero leave several splits exact (text ids (0, 0, 0, l)), the
		// tie goes to the split the model's other tables showed
		slices.SortStableFunc(splits, func(a, b []int) int {
			ka := slices.ContainsFunc(s.ropeSplits, func(x []int) bool { return slices.Equal(x, a) })
			kb := slices.ContainsFunc(s.ropeSplits, func(x []int) bool { return slices.Equal(x, b) })
			switch {
			case ka && !kb:
				return -1
			case kb && !ka:
				return 1
			}
			return 0
		})
		for _, axes := range splits {
			thetas := []float64{10000}
			if naxes == 1 {
				thetas = thetaCandidates(cosT, sinT, pos, d, layout)
			} else if perAxis {
				thetas = axisThetas(cosT, p2, axes)
			}
			for _, theta := range thetas {
				for _, ff := range []precision.Format{precision.F32, precision.F64} {
					for _, af := range []precision.Format{precision.F32, precision.F64} {
						p := exec.RopeTableParams{Theta: theta, AxesDims: axes, Layout: layout, FreqFormat: ff, AngleFormat: af, Joined: joined}
						label := fmt.Sprintf("%s axes %v theta=%g freq=%s angle=%s", layout, axes, theta, ff, af)
						if joined {
							label = fmt.Sprintf("half, axes joined, %v theta=%g freq=%s angle=%s", axes, theta, ff, af)
						}
						if rotated > 0 {
							p.Rotated = []int{rotated}
							label += fmt.Sprintf(" rotated=%d", rotated)
						}
						c := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{p2}, out: cosT.format, label: label}
						pairs = append(pairs, [2]*expr{c, pickOf(c, 1)})
					}
				}
			}
		}
	}
	bestI, bestScore := -1, math.Inf(1)
	var ev []semantics.Candidate
	var tried []ropeTry
	for i, pr := range pairs {
		c, e1 := s.ev.score(pr[0], cosT)
		sn, e2 := s.ev.score(pr[1], sinT)
		sc := math.Max(e1, e2)
		ev = append(ev, semantics.Candidate{Value: pr[0].label, Score: finite(sc)})
		tried = append(tried, ropeTry{p: pr[0].attrs.RopeTable, score: sc})
		if c != nil && sn != nil && sc < bestScore {
			bestI, bestScore = i, sc
		}
	}
	if bestI < 0 || bestScore > tolerance(cosT.format) {
		return nil, nil
	}
	s.ropeSplits = append(s.ropeSplits, slices.Clone(pairs[bestI][0].attrs.RopeTable.AxesDims))
	cosV, sinV := s.tables(pairs[bestI][0], cosT, sinT, ev)
	if cosV != nil {
		cosV.fit.ropeTried = tried
	}
	return cosV, sinV
}

// equalLeadingAxes reads ids laid out axes first ([k, .., rows]: one
// slab of rows per axis, as multimodal RoPE's [3, B, S] ids are) whose k
// slabs are all equal as one sequence: the first slab, one axis. Where
// every axis holds the same position, the frequencies an axis owns rotate
// by that one position, so the table is a one-axis table of it. Other
// ids are returned as they are.
func (s *synth) equalLeadingAxes(pos *val, naxes int) (*val, int) {
	if len(pos.shape) < 2 || pos.shape[0] != naxes {
		return pos, naxes
	}
	n := pos.numel() / naxes
	for a := 1; a < naxes; a++ {
		if !slices.Equal(pos.data[a*n:(a+1)*n], pos.data[:n]) {
			return pos, naxes
		}
	}
	first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: 0, End: 1}, args: []*val{pos}, out: pos.format, label: "one axis of equal ids"})
	if first == nil {
		return pos, naxes
	}
	return first, 1
}

// axisThetas reads θ from an interleaved table over ids p2 [rows, k] split
// into axes: for each axis at least 4 wide whose positions are not all
// zero, the angle of its second frequency (θ^(−2/d_a)) at its smallest
// positive position, 3 significant digits; the common base first.
func axisThetas(cosT, p2 *val, axes []int) []float64 {
	out := []float64{10000}
	d, k := cosT.shape[len(cosT.shape)-1], len(axes)
	off := 0
	for a, da := range axes {
		row, p := -1, math.Inf(1)
		for r := 0; r*k+a < len(p2.data); r++ {
			if x := float64(p2.data[r*k+a]); x > 0 && x < p {
				row, p = r, x
			}
		}
		if da >= 4 && row >= 0 {
			if c := float64(cosT.data[row*d+off+2]); c < 1 && c > -1 {
				if f := math.Acos(c) / p; f > 0 {
					theta := math.Pow(f, -float64(da)/2)
					if r, err := strconv.ParseFloat(strconv.FormatFloat(theta, 'g', 3, 64), 64); err == nil && r > 1 && !slices.Contains(out, r) {
						out = append(out, r)
					}
				}
			}
		}
		off += da
	}
	return out
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
	x := &expr{op: e.op, attrs: e.attrs, args: e.args, out: e.out, label: e.label, pick: i, shapes: e.shapes, node: e, math: e.math, round: e.round}
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

// onCircle reports whether (c, s) pairs lie on one circle about zero: a
// RoPE table, or one scaled by a constant (an attention factor folded in).
func onCircle(c, s *val) bool {
	if len(c.data) == 0 {
		return false
	}
	r0 := math.Hypot(float64(c.data[0]), float64(s.data[0]))
	if !(r0 > 0) {
		return false
	}
	for i := range c.data {
		if r := math.Hypot(float64(c.data[i]), float64(s.data[i])); math.Abs(r/r0-1) > 0.025 {
			return false
		}
	}
	return true
}

// thetaCandidates reads θ from frequency 1's angle, atan2(sin, cos), at
// the largest position where it has not yet turned past 2.5 rad (read
// first at the smallest positive position): the longer the angle, the
// less a narrow format's rounding of the tables moves θ. Offered at 3, 2
// and 1 significant digits, with 10000; the tables' scores decide.
func thetaCandidates(cosT, sinT, pos *val, d int, layout exec.RopeLayout) []float64 {
	out := []float64{10000}
	idx := 1 // frequency 1: channel 1 (half) or channels 2, 3 (interleaved)
	if layout == exec.RopeInterleaved {
		idx = 2
	}
	angle := func(row int) float64 {
		return math.Atan2(float64(sinT.data[row*d+idx]), float64(cosT.data[row*d+idx]))
	}
	row, p := -1, math.Inf(1)
	for i, x := range pos.data {
		if x > 0 && float64(x) < p {
			row, p = i, float64(x)
		}
	}
	if row < 0 || len(sinT.data) != len(cosT.data) {
		return out
	}
	f := angle(row) / p // θ^(−2/d)
	if !(f > 0) {
		return out
	}
	for i, x := range pos.data {
		if q := float64(x); q > p && q*f < 2.5 {
			if g := angle(i) / q; g > 0 {
				row, p = i, q
			}
		}
	}
	f = angle(row) / p
	theta := math.Pow(f, -float64(d)/2)
	for digits := 3; digits >= 1; digits-- {
		if r, err := strconv.ParseFloat(strconv.FormatFloat(theta, 'g', digits, 64), 64); err == nil && r > 1 && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// fitGridRope explains two parameterless results that are RoPE tables of
// S rows as rope_table over grid positions (row-major over 1 to 3 axes
// whose sizes multiply to S, each from 0, scaled by a stride: gridStrides'
// or one read off the angles, readStrides): the split of the width into
// axes, the layout and θ searched, checked by recomputing both tables.
func (s *synth) fitGridRope(cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	if d%2 != 0 || rows < 2 || gridRopeHopeless(cosT, sinT) {
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
					for _, stride := range append(gridStrides(grid), readStrides(cosT, sinT, grid)...) {
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
	build := func(c *cand, ar tableArith) (*val, *expr, *val, *val) {
		ids := gridIDs(c.grid)
		for i := range ids.data {
			ids.data[i] *= c.stride
		}
		p := exec.RopeTableParams{Theta: c.theta, AxesDims: c.axes, Layout: c.layout, FreqFormat: ar.freq, AngleFormat: ar.angle}
		e := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{ids}, out: cosT.format, label: "grid rope", math: ar.math}
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
		_, _, cv, sv := build(c, tableAriths[0])
		if cv == nil || sv == nil || cv.numel() != cosT.numel() {
			continue
		}
		sc := math.Max(relRMS(cosT.format, cv.data, cosT.data), relRMS(sinT.format, sv.data, sinT.data))
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
	ar := bestArith(tableAriths, func(ar tableArith) int {
		_, _, cv, sv := build(best, ar)
		if cv == nil || sv == nil || cv.numel() != cosT.numel() || sv.numel() != sinT.numel() {
			return -1
		}
		return exactCount(cosT.format, cv.data, cosT.data) + exactCount(sinT.format, sv.data, sinT.data)
	})
	ids, e, cv, sv := build(best, ar)
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

// readStrides are position scales read off the tables for a row-major
// grid: the first pair turns by f_0 = 1 (θ^0) on the first axis, so its
// angle at the first row of the first axis's index 1 is the stride,
// wrapped; of the values φ + 2πk (k < 16) those within the angle's
// reading of a short decimal (3 significant digits) other than the
// strides gridStrides tries (a grid rescaled to the size the model was
// trained at: 4 cells stretched over 16 positions).
func readStrides(cosT, sinT *val, grid []int) []float32 {
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	if len(grid) == 0 || grid[0] < 2 {
		return nil
	}
	row := rows / grid[0]
	phi := math.Atan2(float64(sinT.data[row*d]), float64(cosT.data[row*d]))
	tol := 1e-5 + angleNoise(cosT.format)
	known := gridStrides(grid)
	var out []float32
	for k := range 16 {
		x := phi + 2*math.Pi*float64(k)
		if x <= 0 {
			continue
		}
		if r := sigDigits(x, 3); math.Abs(r-x) <= tol && !slices.Contains(known, float32(r)) && !slices.Contains(out, float32(r)) {
			out = append(out, float32(r))
			if len(out) == maxReadStrides {
				break // the shortest turns first: a noisy table reads a short decimal at many
			}
		}
	}
	return out
}

// maxReadStrides bounds the strides readStrides offers per grid: each
// multiplies fitGridRope's candidates (a bf16 table's noise lets most of
// the 16 turns read as a short decimal).
const maxReadStrides = 2

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
	e = withArith(e, func(e *expr) int {
		c, err1 := s.ev.run(e)
		sn, err2 := s.ev.run(pickOf(e, 1))
		if err1 != nil || err2 != nil || c.numel() != cosT.numel() || sn.numel() != sinT.numel() {
			return -1
		}
		return exactCount(cosT.format, c.data, cosT.data) + exactCount(sinT.format, sn.data, sinT.data)
	})
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

// ropeTableTarget is one captured RoPE table: a complex one ([.., P, 2],
// unit (re, im) pairs) or a cos and sin pair of targets.
type ropeTableTarget struct {
	complex  *val
	cos, sin *val
	valid    []bool // a complex table's rows that rotate; the others are zero (padding)
}

// fitReadRope explains parameterless results that are RoPE tables made
// without position ids among the arguments (made from the request's
// shapes): the position ids, the split into axes and θ are read back
// from the tables' angles (rotary.ReadPositions, every table together,
// since they rotate by the same frequencies), and the tables recomputed
// by rope_table from those ids must reproduce every target. The ids
// become a constant of the request's shape, named by their pattern (a
// grid with its origin, a sequence with its start). The result has one
// entry per target, nil for a target that is not a table; nil where no
// target is one or the tables do not reproduce.
func (s *synth) fitReadRope(targets []*val) []*val { return s.fitReadRopeWith(targets, nil) }

// fitReadRopeWith is fitReadRope reading the ids together with more
// complex tables (the trace's others, rotating by the same frequencies),
// which must reproduce too but are not explained here: a table whose own
// rows cannot tell a frequency from a jump of several positions (image
// rows at one time id after the caption's, then padding at 0) reads
// against one whose ids run consecutively.
func (s *synth) fitReadRopeWith(targets, extra []*val) []*val {
	return s.fitReadRopeNoisy(targets, extra, 0)
}

// fitReadRopeNoisy is fitReadRopeWith of tables whose angles are known to
// within noise radians (tables read back from rounded values).
func (s *synth) fitReadRopeNoisy(targets, extra []*val, noise float64) []*val {
	var tabs []ropeTableTarget
	var angles [][][]float64
	interleaved := true
	switch {
	case len(targets) == 2 && targets[0].numel() == targets[1].numel() && len(targets[0].shape) >= 2 && unitCircle(targets[0], targets[1]):
		a, il, ok := rotary.Angles(targets[0].data, targets[1].data, targets[0].shape[len(targets[0].shape)-1])
		if !ok {
			return nil
		}
		tabs, angles, interleaved = []ropeTableTarget{{cos: targets[0], sin: targets[1]}}, [][][]float64{a}, il
	default:
		for _, t := range append(slices.Clone(targets), extra...) {
			n := len(t.shape)
			if n < 2 || t.shape[n-1] != 2 {
				continue
			}
			valid, ok := unitRows(t)
			if !ok {
				continue
			}
			var z []float32
			w := 2 * t.shape[n-2]
			for r, ok := range valid {
				if ok {
					z = append(z, t.data[r*w:(r+1)*w]...)
				}
			}
			tabs = append(tabs, ropeTableTarget{complex: t, valid: valid})
			angles = append(angles, rotary.ComplexAngles(z, t.shape[n-2]))
		}
	}
	if len(tabs) == 0 {
		return nil
	}
	rp, ok := rotary.ReadPositionsWithin(angles, noise)
	if !ok || len(rp.Pairs) > 3 {
		return nil
	}
	for i, tb := range tabs {
		if tb.valid != nil {
			rp.IDs[i] = spread(rp.IDs[i], tb.valid, len(rp.Pairs))
		}
	}
	dims := rp.AxesDims()
	layout := exec.RopeInterleaved
	if !interleaved {
		layout = exec.RopeHalf
	}
	thetas := []float64{10000}
	if th := rotary.Theta(rp.Freq, dims); th > 1 && th != 10000 {
		if noise > 0 {
			thetas = append(thetas, th) // read from noise: the round value first, kept on a near tie
		} else {
			thetas = append([]float64{th}, thetas...)
		}
	}
	type cand struct {
		p     exec.RopeTableParams
		label string
	}
	var cands []cand
	for _, theta := range thetas {
		for _, ff := range []precision.Format{precision.F32, precision.F64} {
			for _, af := range []precision.Format{precision.F32, precision.F64} {
				p := exec.RopeTableParams{Theta: theta, AxesDims: dims, Layout: layout, FreqFormat: ff, AngleFormat: af}
				cands = append(cands, cand{p, fmt.Sprintf("ids read from the tables, %s axes %v theta=%g freq=%s angle=%s", layout, dims, theta, ff, af)})
			}
		}
	}
	masks := make([]*val, len(tabs))
	for i, tb := range tabs {
		if slices.Contains(tb.valid, false) {
			masks[i] = rowMask(tb.complex, tb.valid)
		}
	}
	ids := make([]*val, len(tabs))
	for i, rows := range rp.IDs {
		data := make([]float32, 0, len(rows)*len(dims))
		for _, r := range rows {
			for _, x := range r {
				data = append(data, float32(x))
			}
		}
		ids[i] = &val{shape: []int{len(rows), len(dims)}, data: data, format: precision.F32, origin: "read positions"}
	}
	// make runs one candidate: every table, shaped as its target.
	mk := func(p exec.RopeTableParams, m exec.Math, label string) ([]*val, float64) {
		var out []*val
		worst := 0.0
		for i, tb := range tabs {
			e := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{ids[i]}, out: precision.F32, label: label, math: m}
			cv, err1 := s.ev.run(e)
			sv, err2 := s.ev.run(pickOf(e, 1))
			if err1 != nil || err2 != nil {
				return nil, math.Inf(1)
			}
			if tb.complex == nil {
				c, sn := s.reshape(cv, tb.cos.shape), s.reshape(sv, tb.sin.shape)
				if c == nil || sn == nil {
					return nil, math.Inf(1)
				}
				worst = math.Max(worst, math.Max(relRMS(tb.cos.format, c.data, tb.cos.data), relRMS(tb.sin.format, sn.data, tb.sin.data)))
				out = append(out, c, sn)
				continue
			}
			z := s.complexOf(cv, sv, tb.complex.shape)
			if z != nil && masks[i] != nil {
				z = s.derive(&expr{op: program.OpMul, args: []*val{z, masks[i]}, out: z.format, label: "padding rows zero"})
			}
			if z == nil {
				return nil, math.Inf(1)
			}
			worst = math.Max(worst, relRMS(tb.complex.format, z.data, tb.complex.data))
			out = append(out, z)
		}
		return out, worst
	}
	best, bestScore := -1, math.Inf(1)
	var ev []semantics.Candidate
	var tried []ropeTry
	for i, c := range cands {
		_, sc := mk(c.p, exec.MathPrecise, c.label)
		ev = append(ev, semantics.Candidate{Value: c.label, Score: finite(sc)})
		tried = append(tried, ropeTry{p: c.p, score: sc})
		if sc < bestScore {
			best, bestScore = i, sc
		}
	}
	if best < 0 || bestScore > tolerance(targets[0].format) {
		return nil
	}
	if noise > 0 {
		// tables read back from rounded values: candidates within a
		// twentieth of the best are a tie the noise decides; the first
		// (the round θ) is kept
		for i, t := range tried {
			if t.score <= bestScore*1.05 {
				best = i
				break
			}
		}
	}
	for i, v := range ids {
		if !slices.Contains(targets, tabs[i].complex) && !slices.Contains(targets, tabs[i].cos) {
			continue // an extra table: read with, not explained here
		}
		note := "positions read back from the RoPE table's angles (made from the request's shape)"
		if src, ok := rotary.Pattern(rp.IDs[i], true); ok && src.From == "grid" {
			note = fmt.Sprintf("grid positions %v from %v, row-major, read back from the RoPE table's angles (made from the request's shape)", src.Grid, src.Origin)
		} else if ok {
			note = fmt.Sprintf("positions %v + i·%v, read back from the RoPE table's angles (made from the request's shape)", src.Start, src.Step)
		}
		s.em.constant(v, note)
		if masks[i] != nil {
			s.em.constant(masks[i], "1 on the rows the RoPE table rotates, 0 on its padding rows (zero in the reference: a caption shorter than its slot)")
		}
	}
	p0 := cands[best].p
	variant := func(ar tableArith) exec.RopeTableParams {
		p := p0
		p.FreqFormat, p.AngleFormat = ar.freq, ar.angle
		return p
	}
	ar := bestArith(withFound(tableArith{p0.FreqFormat, p0.AngleFormat, exec.MathPrecise}), func(ar tableArith) int {
		made, _ := mk(variant(ar), ar.math, cands[best].label)
		var want []*val
		for _, tb := range tabs {
			if tb.complex != nil {
				want = append(want, tb.complex)
			} else {
				want = append(want, tb.cos, tb.sin)
			}
		}
		if len(made) != len(want) {
			return -1
		}
		n := 0
		for i, v := range made {
			n += exactCount(want[i].format, v.data, want[i].data)
		}
		return n
	})
	made, _ := mk(variant(ar), ar.math, cands[best].label)
	fit := &leafFit{kind: "rope_table", rope: variant(ar), candidates: ev}
	if noise > 0 {
		fit.ropeTried = tried // margins from the scores: a noisy reading decides nothing by itself
	}
	out := make([]*val, len(targets))
	k := 0
	for i, t := range targets {
		for _, tb := range tabs {
			if tb.complex == t || tb.cos == t || tb.sin == t {
				out[i] = made[k]
				out[i].fit = fit
				k++
			}
		}
	}
	return out
}

// complexOf lays interleaved cos and sin tables [rows, 2P] out as a
// complex table (re, im) of shape: the first of each pair's two equal
// channels, side by side on a last axis of 2.
// fitComplexRope explains one complex table [.., F, 2] (torch.polar of
// position ids times F frequencies) as rope_table of the ids argument: the
// table read as the interleaved cos and sin tables it halves, fitted as
// those are, and the complex table taken from them.
func (s *synth) fitComplexRope(xs []*val, t *val) *val {
	n := len(t.shape)
	if n < 3 || t.shape[n-1] != 2 || !slices.ContainsFunc(xs, (*val).integral) {
		return nil
	}
	if _, ok := unitRows(t); !ok {
		return nil
	}
	f := t.shape[n-2]
	rows := t.numel() / (2 * f)
	cosT := &val{shape: []int{rows, 2 * f}, data: make([]float32, 2*t.numel()/2), format: t.format}
	sinT := &val{shape: []int{rows, 2 * f}, data: make([]float32, 2*t.numel()/2), format: t.format}
	for i := range rows * f {
		re, im := t.data[2*i], t.data[2*i+1]
		cosT.data[2*i], cosT.data[2*i+1] = re, re
		sinT.data[2*i], sinT.data[2*i+1] = im, im
	}
	cv, sv := s.fitRopeTable(xs, cosT, sinT)
	if cv == nil || sv == nil {
		// frequencies that follow no θ (per axis, say, each scaled)
		if cv, sv = s.fitFreeRope(xs, cosT, sinT); cv == nil || sv == nil {
			return nil
		}
	}
	z := s.complexOf(cv, sv, t.shape)
	if z == nil || relRMS(t.format, z.data, t.data) > tolerance(t.format) {
		return nil
	}
	return z
}

// rotationPairs reads a table of 2×2 rotation matrices [.., F, 2, 2]
// ([[cos, −sin], [sin, cos]] per frequency, as the reference Flux code
// stacks them) as its first columns, the (cos, sin) pairs [.., F, 2] of a
// complex table; ok is false where v is not such a table.
func rotationPairs(v *val) (pairs []float32, shape []int, ok bool) {
	n := len(v.shape)
	if n < 3 || v.shape[n-1] != 2 || v.shape[n-2] != 2 || v.numel() < 4 {
		return nil, nil, false
	}
	pairs = make([]float32, v.numel()/2)
	for i := 0; i+3 < len(v.data); i += 4 {
		c, ms, sn, c2 := v.data[i], v.data[i+1], v.data[i+2], v.data[i+3]
		if c != c2 || ms != -sn {
			return nil, nil, false
		}
		pairs[i/2], pairs[i/2+1] = c, sn
	}
	return pairs, append(slices.Clone(v.shape[:n-2]), 2), true
}

// fitRotationRope explains a table of 2×2 rotation matrices as the
// complex table of its first columns (fitComplexRope), stacked back into
// [[cos, −sin], [sin, cos]].
func (s *synth) fitRotationRope(xs []*val, t *val) *val {
	pairs, shape, ok := rotationPairs(t)
	if !ok {
		return nil
	}
	z := s.fitComplexRope(xs, &val{shape: shape, data: pairs, format: t.format, origin: t.origin})
	if z == nil {
		return nil
	}
	m := s.rotations(z, t.shape)
	if m == nil || relRMS(t.format, m.data, t.data) > tolerance(t.format) {
		return nil
	}
	return m
}

// rotations stacks a complex table z [.., F, 2] into rotation matrices of
// shape (its elements [.., F, 2, 2]).
func (s *synth) rotations(z *val, shape []int) *val {
	n := len(z.shape)
	part := func(i int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: i, End: i + 1}, args: []*val{z}, out: z.format})
	}
	c, sn := part(0), part(1)
	neg := s.derive(&expr{op: program.OpMul, args: []*val{sn, s.constant(-1)}, out: z.format, label: "−sin"})
	m := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: n - 1}, args: []*val{c, neg, sn, c}, out: z.format, label: "rotation matrices"})
	return s.reshape(m, shape)
}

func (s *synth) complexOf(cv, sv *val, shape []int) *val {
	rows, w := cv.shape[0], cv.shape[len(cv.shape)-1]
	if w%2 != 0 {
		return nil
	}
	first := func(v *val) *val {
		r := s.reshape(v, []int{rows, w / 2, 2})
		if r == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: 1}, args: []*val{r}, out: v.format})
	}
	re, im := first(cv), first(sv)
	if re == nil || im == nil {
		return nil
	}
	z := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{re, im}, out: cv.format, label: "complex table"})
	return s.reshape(z, shape)
}

// unitRows reads a complex table [.., rows, P, 2] row by row: a row of
// (re, im) pairs on the unit circle rotates (valid), a row of exact zeros
// is padding (a caption shorter than its slot); anything else, or no
// rotating row at all, is not a RoPE table.
func unitRows(v *val) ([]bool, bool) {
	n := len(v.shape)
	w := 2 * v.shape[n-2]
	if w == 0 || len(v.data)%w != 0 || len(v.data) < 4 {
		return nil, false
	}
	valid := make([]bool, len(v.data)/w)
	any := false
	for r := range valid {
		row := v.data[r*w : (r+1)*w]
		zero, unit := true, true
		for i := 0; i+1 < len(row); i += 2 {
			re, im := float64(row[i]), float64(row[i+1])
			zero = zero && re == 0 && im == 0
			unit = unit && math.Abs(re*re+im*im-1) <= 0.05
		}
		if !zero && !unit {
			return nil, false
		}
		valid[r] = unit
		any = any || unit
	}
	return valid, any
}

// spread puts the ids read from the valid rows back in their rows, id 0 in
// the padding rows.
func spread(ids [][]int, valid []bool, axes int) [][]int {
	out := make([][]int, len(valid))
	k := 0
	for r, ok := range valid {
		if ok {
			out[r] = ids[k]
			k++
		} else {
			out[r] = make([]int, axes)
		}
	}
	return out
}

// rowMask is 1 on a complex table's valid rows and 0 on its padding
// rows, shaped to broadcast over the table [.., rows, P, 2].
func rowMask(t *val, valid []bool) *val {
	n := len(t.shape)
	shape := slices.Clone(t.shape)
	shape[n-1], shape[n-2] = 1, 1
	m := &val{shape: shape, data: make([]float32, len(valid)), format: precision.F32, origin: "padding rows"}
	for r, ok := range valid {
		if ok {
			m.data[r] = 1
		}
	}
	return m
}

// otherComplexTables are the complex tables the trace holds at step 0
// beside t (at most four, of t's pairs), for fitReadRopeWith.
func (s *synth) otherComplexTables(t *val) []*val {
	var out []*val
	seen := map[string]bool{}
	for _, k := range t.keys {
		seen[k] = true
	}
	for _, c := range s.tr.Manifest.Calls {
		if c.Step == nil || *c.Step != 0 || len(out) >= 4 {
			continue
		}
		for _, port := range c.Tensors {
			key := port.Key
			if seen[key] || len(out) >= 4 {
				continue
			}
			seen[key] = true
			info, err := s.tr.Info(key)
			if err != nil || info.DType.Components() != 2 || len(info.Shape) < 2 || info.Shape[len(info.Shape)-1] != t.shape[len(t.shape)-2] {
				continue
			}
			v, err := s.capture(key)
			if err != nil {
				continue
			}
			if _, ok := unitRows(v); ok && !slices.Equal(v.data, t.data) {
				out = append(out, v)
			}
		}
	}
	return out
}

// tableArith is how a RoPE table's numbers are made: the formats of its
// frequencies and angles and the sin and cos (a GPU's sinf and cosf under
// exec.MathCUDASinCos, f32 angles only).
type tableArith struct {
	freq, angle precision.Format
	math        exec.Math
}

// tableAriths are the ways tried, the common f32 one first (the first of
// equals wins).
var tableAriths = []tableArith{
	{precision.F32, precision.F32, exec.MathPrecise},
	{precision.F32, precision.F32, exec.MathCUDASinCos},
	{precision.F64, precision.F64, exec.MathPrecise},
	{precision.F64, precision.F32, exec.MathPrecise},
	{precision.F64, precision.F32, exec.MathCUDASinCos},
	{precision.F32, precision.F64, exec.MathPrecise},
}

// withFound is tableAriths with the fit's own first.
func withFound(found tableArith) []tableArith {
	out := []tableArith{found}
	for _, a := range tableAriths {
		if a != found {
			out = append(out, a)
		}
	}
	return out
}

// bestArith is the way among ariths whose table reproduces the most
// captured values exactly (count; -1 for one that does not run). The
// rel-RMS fit cannot tell an ulp, the exact count can: a table made in
// float64 and cast, or on a GPU, differs from the f32 one in the last
// bit of some entries.
func bestArith(ariths []tableArith, count func(tableArith) int) tableArith {
	best, bestN := ariths[0], count(ariths[0])
	for _, a := range ariths[1:] {
		if n := count(a); n > bestN {
			best, bestN = a, n
		}
	}
	return best
}

// withArith is e, or its twin made the way (bestArith) that reproduces
// the most captured values exactly (count).
func withArith(e *expr, count func(*expr) int) *expr {
	p := e.attrs.RopeTable
	twin := func(ar tableArith) *expr {
		t := *e
		t.sibling, t.math = nil, ar.math
		t.attrs.RopeTable.FreqFormat, t.attrs.RopeTable.AngleFormat = ar.freq, ar.angle
		return &t
	}
	found := tableArith{p.FreqFormat, p.AngleFormat, e.math}
	ar := bestArith(withFound(found), func(ar tableArith) int { return count(twin(ar)) })
	if ar == found {
		return e
	}
	t := twin(ar)
	t.label += fmt.Sprintf(" (freq=%s angle=%s math=%s: the most values exact)", ar.freq, ar.angle, ar.math)
	return t
}

// exactCount is how many of got equal want, compared in f.
func exactCount(f precision.Format, got, want []float32) int {
	if len(got) != len(want) {
		return -1
	}
	n := 0
	for i := range got {
		if f.Round(got[i]) == want[i] {
			n++
		}
	}
	return n
}
