package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// gridCase is a planted grid table: its grid, and its parts as (axis,
// columns, cosines first); coordinates index·step.
type gridCase struct {
	name  string
	dims  []int
	parts []gridPart
	step  float32
}

// plantGrid makes the case's table [n, d] in float64 (as diffusers' sin-cos
// position tables are made), each part a timestep_embed of its axis.
func plantGrid(t *testing.T, c gridCase) ([]float32, int, int) {
	t.Helper()
	n, d := 1, 0
	for _, x := range c.dims {
		n *= x
	}
	for _, p := range c.parts {
		d += 2 * p.half
	}
	tab := make([]float32, n*d)
	for _, p := range c.parts {
		pos := make([]float32, n)
		for r := range pos {
			pos[r] = float32(gridIndex(c.dims, r, p.axis)) * c.step
		}
		e, err := exec.TimestepEmbedding(pos, exec.TimestepParams{Dim: 2 * p.half, FlipSinToCos: p.flip, Scale: 1, MaxPeriod: 10000}, exec.MathF64SinCos)
		if err != nil {
			t.Fatal(err)
		}
		for r := range n {
			copy(tab[r*d+p.start:], e[r*2*p.half:(r+1)*2*p.half])
		}
	}
	return tab, n, d
}

var gridCases = []gridCase{
	{"one axis", []int{12}, []gridPart{{start: 0, half: 16, axis: 0}}, 1},
	{"two axes, columns' axis first", []int{4, 6}, []gridPart{{start: 0, half: 8, axis: 1}, {start: 16, half: 8, axis: 0}}, 1},
	{"two axes, cosines first, half steps", []int{6, 4}, []gridPart{{start: 0, half: 8, flip: true, axis: 0}, {start: 16, half: 8, flip: true, axis: 1}}, 0.5},
	{"frames, then columns and rows (unequal parts)", []int{2, 3, 4}, []gridPart{{start: 0, half: 4, axis: 0}, {start: 8, half: 6, axis: 2}, {start: 20, half: 6, axis: 1}}, 1},
}

// TestReadGrid: each planted table, read through bf16 noise (t = a + C
// rounded, C read as t − a), gives back its grid, parts and step.
func TestReadGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range gridCases {
		tab, n, d := plantGrid(t, c)
		r := make([]float32, len(tab))
		for i := range r {
			a := precision.BF16.Round(float32(rng.NormFloat64()))
			r[i] = precision.BF16.Round(a+tab[i]) - a
		}
		g, ok := readGrid(r, n, d)
		if !ok {
			t.Errorf("%s: not read", c.name)
			continue
		}
		if len(c.dims) > 1 && !slices.Equal(g.dims, c.dims) {
			t.Errorf("%s: grid %v, want %v", c.name, g.dims, c.dims)
		}
		if len(g.parts) != len(c.parts) {
			t.Errorf("%s: %d parts, want %d", c.name, len(g.parts), len(c.parts))
			continue
		}
		for i, p := range g.parts {
			w := c.parts[i]
			if p.start != w.start || p.half != w.half || p.flip != w.flip || p.axis != w.axis {
				t.Errorf("%s: part %d = %+v, want %+v", c.name, i, p, w)
			}
			if got := snapStep(p.step, 2e-3); got != float64(c.step) {
				t.Errorf("%s: part %d step %g (snapped %g), want %g", c.name, i, p.step, got, c.step)
			}
		}
	}
	// a table whose row 0 is not all sines and cosines of 0 is not one
	rows := make([]float32, 4*8)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	if _, ok := readGrid(rows, 4, 8); ok {
		t.Error("noise read as a grid table")
	}
}

// TestGridSinusoid: a grid table added to a bf16 value is explained as its
// timestep_embed parts in float64, and the sum reproduces t exactly.
func TestGridSinusoid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range gridCases[1:] {
		tab, n, d := plantGrid(t, c)
		a := &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.BF16, origin: "m.proj/out"}
		y := &val{shape: a.shape, data: make([]float32, n*d), format: precision.BF16, origin: "m/out"}
		r := make([]float32, n*d)
		for i := range a.data {
			a.data[i] = precision.BF16.Round(float32(rng.NormFloat64()))
			y.data[i] = precision.BF16.Round(a.data[i] + tab[i])
			r[i] = y.data[i] - a.data[i]
		}
		tr, _ := writeBF16Trace(t, bf16Call{name: "drop", class: "Dropout", shape: []int{1, 2}, x: []float32{0, 0}, y: []float32{0, 0}})
		s, _ := testSearch(tr, precision.BF16)
		w := s.gridSinusoid(y, a, r)
		if w == nil {
			t.Errorf("%s: not explained", c.name)
			continue
		}
		if e := relRMS(precision.BF16, w.data, y.data); e != 0 {
			t.Errorf("%s: rel-RMS %g, want 0", c.name, e)
		}
		embeds := 0
		var walk func(v *val)
		walk = func(v *val) {
			if v == nil || v.from == nil {
				return
			}
			if v.from.op == program.OpTimestepEmbed {
				embeds++
				if v.from.math != exec.MathF64SinCos {
					t.Errorf("%s: part made with math %v, want f64_sincos", c.name, v.from.math)
				}
			}
			for _, arg := range v.from.args {
				walk(arg)
			}
		}
		walk(w)
		if embeds != len(c.parts) {
			t.Errorf("%s: %d timestep_embed parts, want %d", c.name, embeds, len(c.parts))
		}
	}
}
