package rotary

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// complexTable makes the complex table of ids [rows][axes] with per-axis
// frequencies θ^(−2i/d): pairs of (cos, sin).
func complexTable(ids [][]int, dims []int, theta float64) []float32 {
	var z []float32
	for _, row := range ids {
		for a, d := range dims {
			for i := range d / 2 {
				ang := float64(row[a]) * math.Pow(theta, -float64(2*i)/float64(d))
				z = append(z, float32(math.Cos(ang)), float32(math.Sin(ang)))
			}
		}
	}
	return z
}

func gridIDs(origin, size []int) [][]int {
	var out [][]int
	var rec func(prefix []int)
	rec = func(prefix []int) {
		if len(prefix) == len(size) {
			out = append(out, slices.Clone(prefix))
			return
		}
		a := len(prefix)
		for i := range size[a] {
			rec(append(prefix, origin[a]+i))
		}
	}
	rec(nil)
	return out
}

func seqIDs(start, n, axes int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = make([]int, axes)
		for a := range out[i] {
			out[i][a] = start + i
		}
	}
	return out
}

// TestReadPositions: ids, the split into axes and θ come back from the
// tables alone, jointly over two tables that share the frequencies (a
// centred image grid and a text sequence that starts past it), and each
// table's ids read as their pattern.
func TestReadPositions(t *testing.T) {
	dims := []int{4, 6, 6}
	for _, tc := range []struct {
		name  string
		tabs  [][][]int
		theta float64
		want  []string // the pattern of each table
	}{
		{"grid from 0", [][][]int{gridIDs([]int{0, 0, 0}, []int{2, 4, 4})}, 10000, []string{"grid [2 4 4] at [0 0 0]"}},
		{"centred grid and a sequence after it", [][][]int{gridIDs([]int{0, -3, -3}, []int{2, 6, 6}), seqIDs(3, 9, 3)}, 10000,
			[]string{"grid [2 6 6] at [0 -3 -3]", "sequence from [3 3 3] by [1 1 1]"}},
		{"offset on one axis", [][][]int{gridIDs([]int{7, 0, 0}, []int{2, 3, 5})}, 256, []string{"grid [2 3 5] at [7 0 0]"}},
		// an image grid whose fastest axis runs past π before the caption's
		// rows start again at 0 (Z-Image with a wide latent): the jump
		// wraps to a step smaller than one position's
		{"wide grid, then a sequence", [][][]int{append(gridIDs([]int{33, 0, 0}, []int{1, 4, 8}), gridIDs([]int{1, 0, 0}, []int{8, 1, 1})...)}, 256, nil},
	} {
		var angles [][][]float64
		for _, ids := range tc.tabs {
			angles = append(angles, ComplexAngles(complexTable(ids, dims, tc.theta), 8))
		}
		p, ok := ReadPositions(angles)
		if !ok {
			t.Errorf("%s: not read", tc.name)
			continue
		}
		if !slices.Equal(p.AxesDims(), dims) {
			t.Errorf("%s: axes %v, want %v", tc.name, p.AxesDims(), dims)
		}
		if th := Theta(p.Freq, p.AxesDims()); th != tc.theta {
			t.Errorf("%s: θ %v, want %v", tc.name, th, tc.theta)
		}
		for i, ids := range tc.tabs {
			if !slices.EqualFunc(p.IDs[i], ids, slices.Equal[[]int]) {
				t.Errorf("%s: table %d ids %v, want %v", tc.name, i, p.IDs[i], ids)
				continue
			}
			if tc.want == nil {
				continue // ids alone: no one pattern
			}
			src, ok := Pattern(ids, i == 0)
			got := "none"
			switch {
			case ok && src.From == "grid":
				got = fmt.Sprint("grid ", src.Grid, " at ", src.Origin)
			case ok:
				got = fmt.Sprint("sequence from ", src.Start, " by ", src.Step)
			}
			if got != tc.want[i] {
				t.Errorf("%s: table %d reads as %s, want %s", tc.name, i, got, tc.want[i])
			}
		}
	}
}

// TestAngles: the layout of real tables is told by which channels repeat,
// and a table where both or neither repeat is refused.
func TestAngles(t *testing.T) {
	sin := []float32{0, 0, 0.8660254, 0.8660254}
	if a, il, ok := Angles([]float32{1, 1, 0.5, 0.5}, sin, 4); !ok || !il || math.Abs(a[0][1]-math.Pi/3) > 1e-6 {
		t.Errorf("interleaved: %v %v %v", a, il, ok)
	}
	if _, il, ok := Angles([]float32{1, 0.5, 1, 0.5}, []float32{0, 0.8660254, 0, 0.8660254}, 4); !ok || il {
		t.Errorf("half: interleaved %v ok %v", il, ok)
	}
	if _, _, ok := Angles([]float32{1, 1, 1, 1}, []float32{0, 0, 0, 0}, 4); ok {
		t.Errorf("a table whose layout cannot be told apart was read")
	}
}

// TestOnePairAxes: axes of one rotating pair each (frequency 1) are told
// apart, though their frequencies do not fall.
func TestOnePairAxes(t *testing.T) {
	dims := []int{2, 2, 4}
	ids := gridIDs([]int{3, 0, 0}, []int{1, 2, 2})
	ids = append(seqIDs(0, 3, 3), ids...)
	for i := range 3 { // a caption's rows: position i on the first axis only
		ids[i][1], ids[i][2] = 0, 0
	}
	p, ok := ReadPositions([][][]float64{ComplexAngles(complexTable(ids, dims, 10000), 4)})
	if !ok || !slices.Equal(p.AxesDims(), dims) {
		t.Fatalf("axes %v (ok %v), want %v", p, ok, dims)
	}
	if !slices.EqualFunc(p.IDs[0], ids, slices.Equal[[]int]) {
		t.Errorf("ids %v, want %v", p.IDs[0], ids)
	}
}

func TestEstimate(t *testing.T) {
	// tables of a grid over axes (interleaved), each axis f_i = θ^(−2i/d)
	// times scale(i) (a scaled ladder where scale is not 1)
	table := func(theta float64, axes []int, grid []int, scale func(i, d int) float64, half bool) (cos, sin []float32, width int) {
		for _, d := range axes {
			width += d
		}
		rows := 1
		for _, g := range grid {
			rows *= g
		}
		for r := range rows {
			pos, rest := make([]int, len(grid)), r
			for a := len(grid) - 1; a >= 0; a-- {
				pos[a], rest = rest%grid[a], rest/grid[a]
			}
			for a, d := range axes {
				var c, sn []float32
				for i := range d / 2 {
					ang := float64(pos[a]) * math.Pow(theta, -2*float64(i)/float64(d)) * scale(i, d)
					c = append(c, float32(math.Cos(ang)), float32(math.Cos(ang)))
					sn = append(sn, float32(math.Sin(ang)), float32(math.Sin(ang)))
				}
				if half { // each axis laid [f_0 … f_n | f_0 … f_n] on its own
					for k := range d / 2 {
						c[k], sn[k] = c[2*k], sn[2*k]
					}
					copy(c[d/2:], c[:d/2])
					copy(sn[d/2:], sn[:d/2])
				}
				cos, sin = append(cos, c...), append(sin, sn...)
			}
		}
		return cos, sin, width
	}
	one := func(int, int) float64 { return 1 }
	yarn := func(i, d int) float64 { return 1 / (1 + 31*float64(i)/float64(d/2-1)) }
	for _, c := range []struct {
		name  string
		theta float64
		axes  []int
		grid  []int
		scale func(int, int) float64
		half  bool
		ok    bool
	}{
		{"one axis", 10000, []int{16}, []int{8}, one, false, true},
		{"three axes", 10000, []int{4, 6, 6}, []int{2, 2, 4}, one, false, true},
		{"θ 256", 256, []int{8, 4, 4}, []int{2, 3, 4}, one, false, true},
		{"per-axis half tables joined", 10000, []int{8, 8, 8}, []int{2, 2, 4}, one, true, true},
		{"a scaled ladder tells none", 150000, []int{16}, []int{8}, yarn, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cos, sin, w := table(c.theta, c.axes, c.grid, c.scale, c.half)
			theta, axes, ok := Estimate(cos, sin, w)
			if ok != c.ok {
				t.Fatalf("ok = %v (θ %g, axes %v), want %v", ok, theta, axes, c.ok)
			}
			if ok && (theta != c.theta || !slices.Equal(axes, c.axes)) {
				t.Errorf("θ %g axes %v, want %g %v", theta, axes, c.theta, c.axes)
			}
		})
	}
}

// TestReadPositionsRounded: tables stored in bf16 (cos and sin each
// rounded, as a model casts its RoPE tables to the activations' format)
// still read back to their ids, axes and θ: a pair's frequency from one
// rounded step is a few per cent off, so the ids it gives are refitted
// against every row before they are checked.
func TestReadPositionsRounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ids   [][]int
		dims  []int
		theta float64
	}{
		{"a sequence, θ 1e6", seqIDs(0, 8, 1), []int{16}, 1e6},
		{"a sequence, θ 1e4", seqIDs(0, 12, 1), []int{32}, 10000},
		{"a grid over three axes", gridIDs([]int{0, 0, 0}, []int{2, 4, 4}), []int{4, 6, 6}, 10000},
	} {
		z := complexTable(tc.ids, tc.dims, tc.theta)
		for i, x := range z {
			z[i] = precision.RoundBF16(x)
		}
		w := 0
		for _, d := range tc.dims {
			w += d / 2
		}
		p, ok := ReadPositions([][][]float64{ComplexAngles(z, w)})
		if !ok {
			t.Errorf("%s: not read", tc.name)
			continue
		}
		if !slices.Equal(p.AxesDims(), tc.dims) {
			t.Errorf("%s: axes %v, want %v", tc.name, p.AxesDims(), tc.dims)
		}
		if !slices.EqualFunc(p.IDs[0], tc.ids, slices.Equal[[]int]) {
			t.Errorf("%s: ids %v, want %v", tc.name, p.IDs[0], tc.ids)
		}
		if th := Theta(p.Freq, p.AxesDims()); math.Abs(th/tc.theta-1) > 0.05 {
			t.Errorf("%s: θ %v, want %v", tc.name, th, tc.theta)
		}
	}
}

// TestReadPositionsWithinNoise: angles read back from rounded values (an
// absolute error of a few thousandths on every angle, as a rotation's
// (cos, sin) fitted from bf16 values has) over a 4×4 grid, two axes of 4
// pairs, θ 10000: the slowest pairs turn less than the noise (their step
// hidden), yet, told the noise, the ids and axes read back, the ids from
// the pair turned furthest without wrapping.
func TestReadPositionsWithinNoise(t *testing.T) {
	dims := []int{8, 8}
	ids := gridIDs([]int{0, 0}, []int{4, 4})
	z := complexTable(ids, dims, 10000)
	a := ComplexAngles(z, 8)
	const noise = 0.004
	for r := range a {
		for j := range a[r] {
			a[r][j] += noise * math.Sin(float64(7*r+13*j)) // deterministic, within ±noise
		}
	}
	p, ok := ReadPositionsWithin([][][]float64{a}, noise)
	if !ok {
		t.Fatal("not read")
	}
	if !slices.Equal(p.AxesDims(), dims) {
		t.Errorf("axes %v, want %v", p.AxesDims(), dims)
	}
	if !slices.EqualFunc(p.IDs[0], ids, slices.Equal[[]int]) {
		t.Errorf("ids %v, want %v", p.IDs[0], ids)
	}
}
