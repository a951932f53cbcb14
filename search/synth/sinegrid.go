package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// A table a model adds to its rows (t = a + C, C read off the trace as t −
// a) is often a sin-cos table of the rows' coordinates on a grid: the
// patches' columns and rows of an image, a video's frames. Read as a
// constant, C carries the capture's rounding (t − a in bf16 is C only to
// half a unit of t); read as what it is, the table is exact. gridSinusoid
// reads it from the values alone:
//
//   - row 0 (every coordinate 0) shows which columns are sines (0) and
//     which cosines (1): the columns split into parts, each a run of sines
//     and a run of cosines of one length (or cosines first);
//   - each part's first pair, at frequency 1, gives its angle on every row:
//     the grid (a factorisation of the rows) is the one on which every
//     part's angle depends on one axis alone, linearly in its index;
//   - the frequencies are a geometric ladder P^(−i/(m − shift)), P tried
//     at 10000 and as read off the part's second pair.
//
// The table is then made as each part's timestep_embed of its axis's
// coordinates, in float64 or in f32 (how the reference made it), stored in
// f32 or in t's format, and kept only where it reproduces t at least as
// often as the constant does.

// gridPart is one part of a grid table's columns: half sines and half
// cosines (cosines first when flip) of one axis's coordinates.
type gridPart struct {
	start, half int
	flip        bool
	axis        int
	step        float64 // the coordinate step read (angle of frequency 1 per index)
	period      float64 // P read off the second pair, 0 when none
}

// gridReading is a residual read as a grid table.
type gridReading struct {
	dims  []int // the grid, row-major
	parts []gridPart
}

func (g gridReading) String() string {
	var ps []string
	for _, p := range g.parts {
		first := "sin"
		if p.flip {
			first = "cos"
		}
		ps = append(ps, fmt.Sprintf("axis %d, columns %d…%d %s first", p.axis, p.start, p.start+2*p.half-1, first))
	}
	return fmt.Sprintf("grid %v: %s", g.dims, strings.Join(ps, "; "))
}

// gridColumns splits row 0 of a table into parts by its sines (0) and
// cosines (1); false when row 0 is not such a row.
func gridColumns(row0 []float32) ([]gridPart, bool) {
	kind := make([]int, len(row0)) // 0 sine, 1 cosine
	for i, x := range row0 {
		switch {
		case math.Abs(float64(x)) < 0.25:
		case math.Abs(float64(x)-1) < 0.25:
			kind[i] = 1
		default:
			return nil, false
		}
	}
	type run struct{ kind, start, n int }
	var runs []run
	for i, k := range kind {
		if len(runs) > 0 && runs[len(runs)-1].kind == k {
			runs[len(runs)-1].n++
			continue
		}
		runs = append(runs, run{k, i, 1})
	}
	if len(runs)%2 != 0 {
		return nil, false
	}
	var parts []gridPart
	for i := 0; i < len(runs); i += 2 {
		a, b := runs[i], runs[i+1]
		if a.n != b.n {
			return nil, false
		}
		parts = append(parts, gridPart{start: a.start, half: a.n, flip: a.kind == 1})
	}
	return parts, true
}

// angle is the angle of a part's pair i on row r of table c [n, d].
func (p gridPart) angle(c []float32, d, r, i int) float64 {
	s, co := p.start+i, p.start+p.half+i
	if p.flip {
		s, co = co, s
	}
	return math.Atan2(float64(c[r*d+s]), float64(c[r*d+co]))
}

// gridFactorisations are the grids of n rows in one, two or three axes of
// at least two, fewest axes first.
func gridFactorisations(n int) [][]int {
	out := [][]int{{n}}
	for a := 2; a*2 <= n; a++ {
		if n%a == 0 {
			out = append(out, []int{a, n / a})
		}
	}
	for a := 2; a*4 <= n; a++ {
		for b := 2; a*b*2 <= n; b++ {
			if n%(a*b) == 0 {
				out = append(out, []int{a, b, n / (a * b)})
			}
		}
	}
	return out
}

// gridIndex is row r's index along axis of a row-major grid.
func gridIndex(dims []int, r, axis int) int {
	for j := len(dims) - 1; j > axis; j-- {
		r /= dims[j]
	}
	return r % dims[axis]
}

// readGrid reads table c [n, d] as a grid table, or false.
func readGrid(c []float32, n, d int) (gridReading, bool) {
	parts, ok := gridColumns(c[:d])
	if !ok || n < 2 {
		return gridReading{}, false
	}
	for _, dims := range gridFactorisations(n) {
		g := gridReading{dims: dims, parts: slices.Clone(parts)}
		found := true
		for pi := range g.parts {
			if !g.readPart(c, d, pi) {
				found = false
				break
			}
		}
		if found {
			return g, true
		}
	}
	return gridReading{}, false
}

// readPart finds the axis part pi's first angle follows (the same on rows
// of one index, a line through 0 in the index) and reads its step and its
// period; false when no axis does.
func (g *gridReading) readPart(c []float32, d, pi int) bool {
	p := &g.parts[pi]
	n := len(c) / d
	for axis, size := range g.dims {
		if size < 2 {
			continue
		}
		// the angle per index, from its first row; every other row of the
		// index must agree
		theta := make([]float64, size)
		seen := make([]bool, size)
		agree := true
		for r := 0; r < n && agree; r++ {
			i := gridIndex(g.dims, r, axis)
			a := p.angle(c, d, r, 0)
			if !seen[i] {
				theta[i], seen[i] = a, true
				continue
			}
			agree = math.Abs(math.Remainder(a-theta[i], 2*math.Pi)) < 0.05
		}
		if !agree {
			continue
		}
		// unwrapped along the index, the angle is i·step
		step := theta[1]
		x := make([]float64, size)
		for i := 1; i < size; i++ {
			want := x[i-1] + step
			x[i] = theta[i] + 2*math.Pi*math.Round((want-theta[i])/(2*math.Pi))
		}
		var sxx, sxy float64
		for i := range x {
			sxx += float64(i * i)
			sxy += float64(i) * x[i]
		}
		step = sxy / sxx
		line := math.Abs(step) > 1e-3
		for i := range x {
			line = line && math.Abs(x[i]-float64(i)*step) < 0.05+0.01*math.Abs(x[i])
		}
		if !line {
			continue
		}
		p.axis, p.step = axis, step
		p.period = readGridPeriod(c, d, *p, g.dims, x)
		return true
	}
	return false
}

// readGridPeriod reads P from the part's second pair: its angle is
// x·P^(−1/(m − shift)); read where x is below π (no turn), as P^(1/m)
// for shift 0.
func readGridPeriod(c []float32, d int, p gridPart, dims []int, x []float64) float64 {
	if p.half < 2 {
		return 0
	}
	n := len(c) / d
	var sum, w float64
	for r := 0; r < n; r++ {
		xi := x[gridIndex(dims, r, p.axis)]
		if math.Abs(xi) < 0.5 || math.Abs(xi) > 3 {
			continue
		}
		sum += p.angle(c, d, r, 1) / xi * math.Abs(xi)
		w += math.Abs(xi)
	}
	if w == 0 {
		return 0
	}
	omega := sum / w
	if !(omega > 0 && omega < 1) {
		return 0
	}
	pr := math.Pow(omega, -float64(p.half))
	mag := math.Pow(10, math.Floor(math.Log10(pr))-3)
	return math.Round(pr/mag) * mag // four significant digits
}

// snapStep is the simplest fraction p/q (q ≤ 64) within tol of x, or x.
func snapStep(x, tol float64) float64 {
	for q := 1; q <= 64; q++ {
		p := math.Round(x * float64(q))
		if p != 0 && math.Abs(p/float64(q)-x) <= tol {
			return p / float64(q)
		}
	}
	return x
}

// gridRecipe is how a grid table is made: its coordinates (i·step as an f32
// product or i/(1/step) as an f32 quotient), its ladder and arithmetic, and
// the format it is stored in.
type gridRecipe struct {
	quotient bool
	period   float32
	shift    float32
	math     exec.Math
	stored   precision.Format
}

func (r gridRecipe) String() string {
	coord := "i·step"
	if r.quotient {
		coord = "i/(1/step)"
	}
	how := "f32"
	if r.math&exec.MathF64SinCos != 0 {
		how = "float64"
	}
	return fmt.Sprintf("coordinates %s, period %g, shift %g, made in %s, stored %s", coord, r.period, r.shift, how, r.stored)
}

// positions are part p's coordinates on every row under recipe r.
func (g gridReading) positions(p gridPart, r gridRecipe, n int) []float32 {
	step := snapStep(p.step, 2e-3*math.Max(1, math.Abs(p.step)))
	out := make([]float32, n)
	for row := range out {
		i := float32(gridIndex(g.dims, row, p.axis))
		if r.quotient {
			out[row] = i / float32(1/step)
		} else {
			out[row] = i * float32(step)
		}
	}
	return out
}

// params is part p's timestep_embed under recipe r.
func (p gridPart) params(r gridRecipe) exec.TimestepParams {
	return exec.TimestepParams{Dim: 2 * p.half, FlipSinToCos: p.flip, FreqShift: r.shift, Scale: 1, MaxPeriod: r.period}
}

// table is the whole table [n, d] under recipe r, as the program will
// make it.
func (g gridReading) table(r gridRecipe, n, d int) ([]float32, error) {
	out := make([]float32, n*d)
	for _, p := range g.parts {
		e, err := exec.TimestepEmbedding(g.positions(p, r, n), p.params(r), r.math)
		if err != nil {
			return nil, err
		}
		for row := range n {
			for j := range 2 * p.half {
				out[row*d+p.start+j] = r.stored.Round(e[row*2*p.half+j])
			}
		}
	}
	return out, nil
}

// gridSinusoid explains t = a + C as a grid table (above) where C, read
// off the trace as the residual r, is one; nil where it is not, or where
// the table reproduces t at fewer captured steps' values than r does.
func (s *synth) gridSinusoid(t, a *val, r []float32) *val {
	if len(t.shape) < 2 || t.integral() {
		return nil
	}
	d, n := t.shape[len(t.shape)-1], t.shape[len(t.shape)-2]
	if len(r) < n*d || d < 4 {
		return nil
	}
	g, ok := readGrid(r[:n*d], n, d)
	if !ok {
		return nil
	}
	var recipes []gridRecipe
	periods := []float32{10000}
	for _, p := range g.parts {
		if p.period > 0 && float32(p.period) != periods[0] && !slices.Contains(periods, float32(p.period)) {
			periods = append(periods, float32(p.period))
		}
	}
	stored := []precision.Format{precision.F32}
	if t.format != precision.F32 && t.format.Valid() {
		stored = append(stored, t.format)
	}
	for _, m := range []exec.Math{exec.MathF64SinCos, exec.MathPrecise} {
		for _, q := range []bool{false, true} {
			for _, period := range periods {
				for _, shift := range []float32{0, 1} {
					for _, f := range stored {
						recipes = append(recipes, gridRecipe{quotient: q, period: period, shift: shift, math: m, stored: f})
					}
				}
			}
		}
	}
	// each recipe's table added to a, counted against t at every step
	// (the constant r is the yardstick)
	constExact := s.tableExact(t, a, r[:n*d])
	best, bestExact := -1, constExact
	for i, rc := range recipes {
		tab, err := g.table(rc, n, d)
		if err != nil {
			continue
		}
		// a table as faithful as the constant is kept: it says what the
		// constant is (and a one-step trace cannot tell them apart)
		if e := s.tableExact(t, a, tab); e > bestExact || best < 0 && e == bestExact {
			best, bestExact = i, e
		}
	}
	if best < 0 {
		return nil
	}
	rc := recipes[best]
	var parts []*val
	var positions []*val
	for j, p := range g.parts {
		pos := &val{shape: []int{n}, data: g.positions(p, rc, n), format: precision.F32, origin: fmt.Sprintf("%s/grid_axis%d_part%d", t.origin, p.axis, j)}
		e := s.derive(&expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p.params(rc)}, args: []*val{pos}, out: rc.stored, math: rc.math,
			label: fmt.Sprintf("sin-cos of axis %d", p.axis)})
		if e == nil {
			return nil
		}
		parts, positions = append(parts, e), append(positions, pos)
	}
	tab := parts[0]
	if len(parts) > 1 {
		if tab = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: parts, out: rc.stored, label: "parts joined"}); tab == nil {
			return nil
		}
	}
	shape := slices.Clone(t.shape)
	for i := 0; i < len(shape)-2; i++ {
		shape[i] = 1
	}
	if tab = s.reshape(tab, shape); tab == nil {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, tab}, out: t.format, label: "grid sin-cos table"}})
	if w == nil {
		return nil
	}
	total := t.numel() * max(1, len(s.tr.Steps()))
	for _, pos := range positions {
		s.em.constant(pos, fmt.Sprintf("coordinates of a sin-cos table of the rows on a grid (%s), %s: it reproduces %d of %d captured values where the table read as t − a reproduces %d",
			g, rc, bestExact, total, constExact))
	}
	return w
}

// tableExact counts the captured values of t, at every step, that f(a +
// tab) reproduces (tab broadcast over t's leading axes).
func (s *synth) tableExact(t, a *val, tab []float32) int {
	steps := s.tr.Steps()
	if len(steps) == 0 {
		steps = []int{0}
	}
	count := 0
	for _, st := range steps {
		tv, ok1 := s.at(t, st)
		av, ok2 := s.at(a, st)
		if !ok1 || !ok2 || len(tv) != len(av) {
			continue
		}
		for i := range tv {
			if t.format.Round(av[i]+tab[i%len(tab)]) == tv[i] {
				count++
			}
		}
	}
	return count
}
