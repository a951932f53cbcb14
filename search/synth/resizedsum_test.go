package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// bilinearRef is torch's F.interpolate(mode="bilinear", align_corners=
// False) of a [C, g, g] map to [C, h, h], written from its formula (source
// (i + ½)·g/h − ½, clamped at 0; the width pass, then the height pass, in
// f32), independent of resampleAxis.
func bilinearRef(x []float32, c, g, h int) []float32 {
	axis := func(i int) (lo, hi int, l1 float32) {
		src := (float32(i)+0.5)*(float32(g)/float32(h)) - 0.5
		if src < 0 {
			src = 0
		}
		lo = int(src)
		hi = min(lo+1, g-1)
		return lo, hi, src - float32(lo)
	}
	wide := make([]float32, c*g*h) // [C, g, h]: the width pass
	for ch := range c {
		for r := range g {
			for j := range h {
				lo, hi, l1 := axis(j)
				wide[(ch*g+r)*h+j] = (1-l1)*x[(ch*g+r)*g+lo] + l1*x[(ch*g+r)*g+hi]
			}
		}
	}
	out := make([]float32, c*h*h)
	for ch := range c {
		for i := range h {
			lo, hi, l1 := axis(i)
			for j := range h {
				out[(ch*h+i)*h+j] = (1-l1)*wide[(ch*g+lo)*h+j] + l1*wide[(ch*g+hi)*h+j]
			}
		}
	}
	return out
}

// TestResizedSum plants CoaT's parallel block: three scales' outputs
// [1, 1 + g², C] at grids 8, 4 and 2, the first plus the second upsampled
// twice and the third four times (bilinear, the class row carried), and a
// DPT-style map plus a map of half its size upsampled. Each is explained
// as a sum with resized terms; a target whose second term is the grid
// transposed before the resize is not.
func TestResizedSum(t *testing.T) {
	const c = 4
	f := precision.F32
	r := rand.New(rand.NewPCG(5, 8))
	fill := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64())
		}
		return out
	}
	// rows [1, 1 + g², C] → a [C, g, g] map and back, class row apart
	toMap := func(rows []float32, g int) []float32 {
		m := make([]float32, c*g*g)
		for p := range g * g {
			for ch := range c {
				m[ch*g*g+p] = rows[(1+p)*c+ch]
			}
		}
		return m
	}
	upRows := func(rows []float32, g, h int, transpose bool) []float32 {
		m := toMap(rows, g)
		if transpose {
			tm := make([]float32, len(m))
			for ch := range c {
				for i := range g {
					for j := range g {
						tm[(ch*g+j)*g+i] = m[(ch*g+i)*g+j]
					}
				}
			}
			m = tm
		}
		up := bilinearRef(m, c, g, h)
		out := make([]float32, (1+h*h)*c)
		copy(out, rows[:c])
		for p := range h * h {
			for ch := range c {
				out[(1+p)*c+ch] = up[ch*h*h+p]
			}
		}
		return out
	}
	a, b, d := fill((1+64)*c), fill((1+16)*c), fill((1+4)*c)
	for _, transpose := range []bool{false, true} {
		ub, ud := upRows(b, 4, 8, transpose), upRows(d, 2, 8, false)
		sum := make([]float32, len(a))
		for i := range sum {
			sum[i] = a[i] + ub[i] + ud[i]
		}
		va := &val{shape: []int{1, 65, c}, data: a, format: f, origin: "cur2", seq: 1}
		vb := &val{shape: []int{1, 17, c}, data: b, format: f, origin: "cur3", seq: 2}
		vd := &val{shape: []int{1, 5, c}, data: d, format: f, origin: "cur4", seq: 3}
		s, sc, target := planted(t, f, []int{1, 65, c}, sum, va, vb, vd)
		got := s.resizedSum(target, sc.vals)
		if transpose {
			if got != nil && relRMS(f, got.data, target.data) <= tolerance(f) {
				t.Errorf("a transposed grid resized explained as a resized sum (%.3g)", relRMS(f, got.data, target.data))
			}
			continue
		}
		if got == nil {
			t.Fatal("CoaT's fusion of three scales not explained")
		}
		if e := relRMS(f, got.data, target.data); e > 1e-6 {
			t.Errorf("CoaT's fusion explained to %.3g, want ≤ 1e-6", e)
		}
	}
	// maps: [1, C, 8, 8] + the upsampled [1, C, 4, 4]
	m8, m4 := fill(c*64), fill(c*16)
	up := bilinearRef(m4, c, 4, 8)
	sum := make([]float32, len(m8))
	for i := range sum {
		sum[i] = m8[i] + up[i]
	}
	s, sc, target := planted(t, f, []int{1, c, 8, 8}, sum,
		&val{shape: []int{1, c, 8, 8}, data: m8, format: f, origin: "fine", seq: 1},
		&val{shape: []int{1, c, 4, 4}, data: m4, format: f, origin: "coarse", seq: 2})
	got := s.resizedSum(target, sc.vals)
	if got == nil || relRMS(f, got.data, target.data) > 1e-6 {
		t.Errorf("a map plus an upsampled map not explained (%v)", got != nil)
	}
}
