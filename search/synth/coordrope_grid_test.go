package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// unitGridSpec makes RoPE tables the way a model does that builds them
// from the request's shape alone, in f32 step by step: each axis's
// positions linspace(−1, 1, n) (or 0…n−1 with ids), a row-major grid;
// one ladder f_i = π/θ^(i/half) of half = d/2 frequencies, of which
// every axis takes the same first F (axes sharing one ladder, not each
// a slice of it); angles u·f_i laid out axis by axis, interleaved; the
// pairs after the 3·F turning ones padded with cos = sin = 0.
type unitGridSpec struct {
	grid  []int
	d, f  int
	theta float32
	ids   bool // integer positions 0…n−1 rather than linspace(−1, 1, n)
}

// tables are the interleaved cos and sin tables [rows, d].
func (c unitGridSpec) tables() (cosT, sinT *val) {
	half := c.d / 2
	bands := make([]float32, half)
	for i := range bands {
		e := float32(i) / float32(half)
		bands[i] = float32(1/float32(math.Pow(float64(c.theta), float64(e)))) * float32(math.Pi)
	}
	axes := make([][]float32, len(c.grid))
	for a, n := range c.grid {
		axes[a] = linspaceF32(-1, 1, n)
		if c.ids {
			for i := range n {
				axes[a][i] = float32(i)
			}
		}
	}
	rows := 1
	for _, n := range c.grid {
		rows *= n
	}
	stride := rowMajorStrides(c.grid)
	cosT = &val{shape: []int{rows, c.d}, data: make([]float32, rows*c.d), format: precision.F32, origin: "t/kw.rotary_pos_emb"}
	sinT = &val{shape: []int{rows, c.d}, data: make([]float32, rows*c.d), format: precision.F32, origin: "t/kw.rotary_pos_emb"}
	for r := range rows {
		j := 0
		for a, n := range c.grid {
			u := axes[a][(r/stride[a])%n]
			for i := range c.f {
				ang := float64(float32(u * bands[i]))
				for _, ch := range []int{2 * j, 2*j + 1} {
					cosT.data[r*c.d+ch], sinT.data[r*c.d+ch] = float32(math.Cos(ang)), float32(math.Sin(ang))
				}
				j++
			}
		}
	}
	return cosT, sinT
}

// complexTable is the tables as one complex table [1, rows, d/2, 2].
func complexTable(cosT, sinT *val) *val {
	rows, d := cosT.shape[0], cosT.shape[1]
	t := &val{shape: []int{1, rows, d / 2, 2}, data: make([]float32, rows*d), format: cosT.format, origin: cosT.origin}
	for i := range rows * d / 2 {
		t.data[2*i], t.data[2*i+1] = cosT.data[2*i], sinT.data[2*i]
	}
	return t
}

// TestGridCoordRopeDeadPairs: tables made from the request's shape alone
// over fractional positions (each axis linspace(−1, 1)), every axis
// turning by the same leading frequencies of one ladder, the pairs after
// them padded with cos = sin = 0, are recomputed to the bit, as cos and
// sin tables and as one complex table, with their zero pairs; with
// integer positions the same; tables of zero pairs that do not trail
// are not taken.
func TestGridCoordRopeDeadPairs(t *testing.T) {
	for _, c := range []struct {
		name string
		spec unitGridSpec
	}{
		{"2x4x4 grid, d 16: 2 shared frequencies, 2 dead pairs", unitGridSpec{grid: []int{2, 4, 4}, d: 16, f: 2, theta: 1e4}},
		{"3x5x2 grid, d 24: 4 shared frequencies, no dead pair", unitGridSpec{grid: []int{3, 5, 2}, d: 24, f: 4, theta: 1e4}},
		{"4x6 grid, d 20: 3 shared frequencies, 4 dead pairs", unitGridSpec{grid: []int{4, 6}, d: 20, f: 3, theta: 1e4}},
		{"3x4x4 integer grid, d 16, 2 dead pairs", unitGridSpec{grid: []int{3, 4, 4}, d: 16, f: 2, theta: 1e4, ids: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cosT, sinT := c.spec.tables()
			s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			cv, sv := s.fitGridCoordRope(cosT, sinT)
			if cv == nil || sv == nil {
				t.Fatal("cos and sin tables: no fit")
			}
			// the program's f32 sin and cos are torch's, a rare entry an
			// ulp from the correctly rounded one the spec makes
			if e := max(relRMS(precision.F32, cv.data, cosT.data), relRMS(precision.F32, sv.data, sinT.data)); e > 1e-7 {
				t.Errorf("tables not reproduced: rel-RMS %g", e)
			}
			if n := exactCount(precision.F32, cv.data, cosT.data) + exactCount(precision.F32, sv.data, sinT.data); n < 2*len(cosT.data)*95/100 {
				t.Errorf("%d of %d entries equal to the bit", n, 2*len(cosT.data))
			}
			if len(s.coordRopes) == 0 || !s.coordRopes[0].best.read.shared && len(c.spec.grid) > 1 {
				t.Errorf("the axes' one ladder not read as shared")
			}
			z := complexTable(cosT, sinT)
			s = &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			v := s.fitGridCoordComplex(z)
			if v == nil {
				t.Fatal("complex table: no fit")
			}
			if e := relRMS(precision.F32, v.data, z.data); !slices.Equal(v.shape, z.shape) || e > 1e-7 {
				t.Errorf("complex table %v not reproduced: rel-RMS %g", v.shape, e)
			}
			if c.spec.f*len(c.spec.grid) < c.spec.d/2 && v.data[len(v.data)-1] != 0 {
				t.Error("the dead pairs not zero")
			}
		})
	}
	t.Run("zero pairs that do not trail", func(t *testing.T) {
		cosT, sinT := unitGridSpec{grid: []int{2, 4, 4}, d: 16, f: 2, theta: 1e4}.tables()
		for r := range cosT.shape[0] {
			// the dead pairs moved to the front
			row := r * 16
			for _, tb := range []*val{cosT, sinT} {
				seg := slices.Clone(tb.data[row : row+16])
				copy(tb.data[row:], seg[12:])
				copy(tb.data[row+4:], seg[:12])
			}
		}
		s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		if cv, _ := s.fitGridCoordRope(cosT, sinT); cv != nil {
			t.Error("leading zero pairs taken for a table the form makes")
		}
	})
}

// centreGridTables makes RoPE tables the way a vision encoder does that
// puts each patch at its centre: per axis c_i = (i + ½)/n, then 2·c − 1
// (f32, each step rounded); one ladder f_j = 1/θ^(4j/hd) of hd/4
// frequencies shared by both axes; angles (2π·u)·f_j laid out axis by
// axis, the whole repeated (half layout).
func centreGridTables(grid []int, hd int, theta float32) (cosT, sinT *val) {
	nf := hd / 4
	freqs := make([]float32, nf)
	for j := range freqs {
		e := float32(4*j) / float32(hd)
		freqs[j] = 1 / float32(math.Pow(float64(theta), float64(e)))
	}
	rows := grid[0] * grid[1]
	cosT = &val{shape: []int{rows, hd}, data: make([]float32, rows*hd), format: precision.F32, origin: "t/out.0"}
	sinT = &val{shape: []int{rows, hd}, data: make([]float32, rows*hd), format: precision.F32, origin: "t/out.1"}
	for r := range rows {
		us := []float32{centresF32(grid[0])[r/grid[1]], centresF32(grid[1])[r%grid[1]]}
		for a, u := range us {
			for j, f := range freqs {
				ang := float64(float32(float32(2*math.Pi)*u) * f)
				for _, ch := range []int{a*nf + j, hd/2 + a*nf + j} {
					cosT.data[r*hd+ch], sinT.data[r*hd+ch] = float32(math.Cos(ang)), float32(math.Sin(ang))
				}
			}
		}
	}
	return cosT, sinT
}

// TestGridCoordRopeCentres: tables made from the request's shape alone
// over the centres of a grid's cells normalised into [−1, 1] (no cell at
// either end: neither the integer positions nor linspace(−1, 1)), angles
// past π, are recomputed, and θ is read in the form that gives it short
// (1/θ^(4j/hd): θ 100, not the 31.6 the same ladder spans over F − 1
// steps); stored in bf16 (angles read to the format's noise), the same
// within bf16's tolerance.
func TestGridCoordRopeCentres(t *testing.T) {
	for _, c := range []struct {
		grid  []int
		hd    int
		theta float32
	}{{[]int{4, 4}, 16, 100}, {[]int{3, 5}, 32, 100}, {[]int{6, 2}, 32, 1e4}} {
		for _, f := range []precision.Format{precision.F32, precision.BF16} {
			cosT, sinT := centreGridTables(c.grid, c.hd, c.theta)
			for _, tb := range []*val{cosT, sinT} {
				tb.format = f
				for i, x := range tb.data {
					tb.data[i] = f.Round(x)
				}
			}
			s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			cv, sv := s.fitGridCoordRope(cosT, sinT)
			if cv == nil || sv == nil {
				t.Fatalf("%v hd %d %v: no fit", c.grid, c.hd, f)
			}
			tol := 1e-6
			if f == precision.BF16 {
				tol = 1e-3
			}
			if e := max(relRMS(f, cv.data, cosT.data), relRMS(f, sv.data, sinT.data)); e > tol {
				t.Errorf("%v hd %d %v: tables not reproduced: rel-RMS %g", c.grid, c.hd, f, e)
			}
			if f == precision.F32 && (len(s.coordRopes) != 1 || float32(s.coordRopes[0].theta) != c.theta) {
				t.Errorf("%v hd %d: θ not read as %g: %+v", c.grid, c.hd, c.theta, s.coordRopes)
			}
		}
	}
}

// TestGridCoordRopeOffsetXY: tables over a grid's positions from one,
// scaled to a reference grid ((i + 1)/n·ref, timm's grid offset and
// ref_feat_shape, the Perception Encoder's), the coordinates of the last
// axis first (meshgrid's 'xy' indexing), each axis's ladder f_i =
// 1/θ^(i/F) interleaved, axis by axis: explained as the grid's positions
// plus one, columns reversed, the scale absorbed by the ladder read off
// the angles; the tables reproduced.
func TestGridCoordRopeOffsetXY(t *testing.T) {
	const h, w, f, ref = 3, 4, 4, 14
	rows, d := h*w, 2*2*f
	bands := make([]float32, f)
	for i := range bands {
		bands[i] = 1 / float32(math.Pow(1e4, float64(i)/f))
	}
	cosT := &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: precision.F32, origin: "cos"}
	sinT := &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: precision.F32, origin: "sin"}
	for r := range rows {
		coords := []float32{float32(r%w+1) / w * ref, float32(r/w+1) / h * ref} // x (columns) first
		for ax, c := range coords {
			for i, b := range bands {
				a := float64(c * b)
				at := r*d + ax*2*f + 2*i
				cosT.data[at], cosT.data[at+1] = float32(math.Cos(a)), float32(math.Cos(a))
				sinT.data[at], sinT.data[at+1] = float32(math.Sin(a)), float32(math.Sin(a))
			}
		}
	}
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	cv, sv := s.fitGridCoordRope(cosT, sinT)
	if cv == nil || sv == nil {
		t.Fatal("no fit")
	}
	if e := max(relRMS(precision.F32, cv.data, cosT.data), relRMS(precision.F32, sv.data, sinT.data)); e > 1e-6 {
		t.Errorf("tables not reproduced: rel-RMS %g", e)
	}
}
