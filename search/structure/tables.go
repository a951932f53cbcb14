package structure

import (
	"math"
	"slices"

	"zflow/semantics"
)

// tableAngles reads a RoPE table as angles, [rows][pairs]: a complex
// table's arguments; a real table's atan2(sin, cos) at the first element
// of each rotating pair (adjacent elements, or the two halves, whichever
// carry equal cos values).
func (d *discoverer) tableAngles(t table) ([][]float64, bool) {
	if t.complex {
		z := d.v.floats(t.cos.key)
		p := t.cos.width()
		rows := len(z) / (2 * p)
		out := make([][]float64, rows)
		for r := range out {
			out[r] = make([]float64, p)
			for j := range p {
				out[r][j] = math.Atan2(float64(z[2*(r*p+j)+1]), float64(z[2*(r*p+j)]))
			}
		}
		return out, rows > 0
	}
	c, s := d.v.floats(t.cos.key), d.v.floats(t.sin.key)
	w := t.cos.width()
	if c == nil || s == nil || w%2 != 0 {
		return nil, false
	}
	rows := len(c) / w
	inter, half := true, true
	for r := range rows {
		for j := 0; j < w/2; j++ {
			if c[r*w+2*j] != c[r*w+2*j+1] {
				inter = false
			}
			if c[r*w+j] != c[r*w+j+w/2] {
				half = false
			}
		}
	}
	if inter == half {
		return nil, false
	}
	out := make([][]float64, rows)
	for r := range out {
		out[r] = make([]float64, w/2)
		for j := range w / 2 {
			k := j
			if inter {
				k = 2 * j
			}
			out[r][j] = math.Atan2(float64(s[r*w+k]), float64(c[r*w+k]))
		}
	}
	return out, true
}

// wrap maps an angle into (−π, π].
func wrap(a float64) float64 {
	a = math.Mod(a+math.Pi, 2*math.Pi)
	if a < 0 {
		a += 2 * math.Pi
	}
	return a - math.Pi
}

// readPositions reads integer position ids back from RoPE angles (one
// [rows][pairs] array per table): a pair's frequency is the smallest
// angle step between consecutive rows; frequencies fall within an axis
// and jump back up where the next axis starts; an axis's ids are its
// slowest pair's angle over its frequency (no wrap-around there), checked
// against every pair of the axis. It returns ids [rows][axes] per table
// and the pairs per axis.
func readPositions(tabs [][][]float64) ([][][]int, []int, bool) {
	if len(tabs) == 0 || len(tabs[0]) == 0 {
		return nil, nil, false
	}
	p := len(tabs[0][0])
	freq := make([]float64, p)
	for j := range p {
		freq[j] = math.Inf(1)
		for _, t := range tabs {
			for r := 1; r < len(t); r++ {
				if s := math.Abs(wrap(t[r][j] - t[r-1][j])); s > 1e-6 {
					freq[j] = math.Min(freq[j], s)
				}
			}
		}
	}
	var axes []int
	for j := range p {
		if j == 0 || freq[j] > freq[j-1]*(1+1e-3) {
			axes = append(axes, 0)
		}
		axes[len(axes)-1]++
	}
	out := make([][][]int, len(tabs))
	for ti, t := range tabs {
		out[ti] = make([][]int, len(t))
		for r := range t {
			out[ti][r] = make([]int, len(axes))
		}
	}
	first := 0
	for a, n := range axes {
		slow := first + n - 1
		for ti, t := range tabs {
			for r := range t {
				var id int
				if !math.IsInf(freq[slow], 1) {
					x := t[r][slow] / freq[slow]
					id = int(math.Round(x))
					if math.Abs(x-float64(id)) > 0.05 {
						return nil, nil, false
					}
				}
				for j := first; j <= slow; j++ {
					want := 0.0
					if !math.IsInf(freq[j], 1) {
						want = float64(id) * freq[j]
					}
					if math.Abs(wrap(want-t[r][j])) > 1e-2 {
						return nil, nil, false
					}
				}
				out[ti][r][a] = id
			}
		}
		first += n
	}
	return out, axes, true
}

// positionsFromTables: without position ids, each stream's ids are read
// back from the tables it rotates by.
func (d *discoverer) positionsFromTables() {
	fail := func(why string) {
		d.undetermined("structure.positions", "positions", "the RoPE table producer takes no position ids, and %s", why)
	}
	var tabs [][][]float64
	for _, t := range d.tables {
		a, ok := d.tableAngles(t)
		if !ok {
			fail("a table's rotating pairs cannot be told apart")
			return
		}
		tabs = append(tabs, a)
	}
	ids, _, ok := readPositions(tabs)
	if !ok {
		fail("the tables' angles are not integer ids times per-axis frequencies")
		return
	}
	pos := &semantics.Positions{Streams: map[string]semantics.PositionSource{}}
	if len(d.tables) == 1 {
		var all []float64
		for _, row := range ids[0] {
			for _, v := range row {
				all = append(all, float64(v))
			}
		}
		var missing []string
		for _, s := range []string{image, text} {
			if _, ok := d.tokens[s]; ok {
				missing = append(missing, s)
			}
		}
		if len(ids[0]) != d.totalTokens() && len(d.tokens) > 1 || !d.derivePositions(pos, all, len(ids[0][0]), missing, nil) {
			fail("the ids read back from the table are neither grids nor sequences")
			return
		}
		d.st.Positions = pos
		return
	}
	for ti, t := range d.tables {
		var s string
		for _, name := range []string{image, text} {
			if d.tokens[name] == t.rows() {
				s = name
			}
		}
		if s == "" || slices.ContainsFunc(d.tables[:ti], func(u table) bool { return u.rows() == t.rows() }) {
			fail("the per-stream tables cannot be matched to streams by their rows")
			return
		}
		src, ok := patternOf(ids[ti], s == image)
		if !ok {
			fail("the ids read back from the " + s + " table are neither a grid nor a sequence")
			return
		}
		pos.Streams[s] = src
	}
	d.st.Positions = pos
}
