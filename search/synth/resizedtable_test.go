package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestResampleMatrixTorch: the antialiased filters' weights against
// torch's own, read from F.interpolate(antialias=True) of one-hot rows
// (torch 1.13, CPU, f32): a whole ratio, one that is not, and a map grown;
// with align_corners=True too (Würstchen's resized EfficientNet maps).
func TestResampleMatrixTorch(t *testing.T) {
	cases := []struct {
		n, m int
		mode resampleMode
		ulps float64   // 0: bit for bit; else within this many ulps of each weight
		want []float32 // torch's [m, n], row-major
	}{
		{8, 4, resampleCubicAA, 0, []float32{
			0.46443516, 0.46443516, 0.121338911, -0.0376569033, -0.0125523014, 0, 0, 0,
			-0.0347490348, 0.111969113, 0.428571433, 0.428571433, 0.111969113, -0.0347490348, -0.0115830116, 0,
			0, -0.0115830116, -0.0347490348, 0.111969113, 0.428571433, 0.428571433, 0.111969113, -0.0347490348,
			0, 0, 0, -0.0125523014, -0.0376569033, 0.121338911, 0.46443516, 0.46443516}},
		{8, 4, resampleLinearAA, 0, []float32{
			0.428571433, 0.428571433, 0.142857149, 0, 0, 0, 0, 0,
			0, 0.125, 0.375, 0.375, 0.125, 0, 0, 0,
			0, 0, 0, 0.125, 0.375, 0.375, 0.125, 0,
			0, 0, 0, 0, 0, 0.142857149, 0.428571433, 0.428571433}},
		{4, 6, resampleCubicAA, 4, []float32{ // growing: the same kernel, a = −½ (torch's rounding not all recovered)
			1.06578934, -0.0657893196, 0, 0,
			0.529411793, 0.529411793, -0.0588235296, 0,
			-0.0578704588, 0.937500119, 0.131944552, -0.0115741827,
			-0.0115740048, 0.131944269, 0.9375, -0.0578702986,
			0, -0.0588235296, 0.529411793, 0.529411793,
			0, 0, -0.0657895729, 1.06578958}},
		{6, 4, resampleLinearAA, 0, []float32{
			0.625, 0.37500003, 0, 0, 0, 0,
			0, 0.333333373, 0.555555582, 0.111111097, 0, 0,
			0, 0, 0.111111082, 0.555555522, 0.333333343, 0,
			0, 0, 0, 0, 0.37500003, 0.625}},
		// align_corners=True with antialias=True: the scale (n − 1)/(m − 1)
		{6, 4, resampleLinearAACorner, 8, []float32{
			0.571428597, 0.428571403, 0, 0, 0, 0,
			0, 0.222222209, 0.555555582, 0.222222209, 0, 0,
			0, 0, 0, 0.375000089, 0.49999997, 0.124999925,
			0, 0, 0, 0, 0.200000092, 0.799999893}},
		{3, 8, resampleCubicAACorner, 32, []float32{ // grown: one weight 22 ulps off (the tap sum's rounding)
			1.10922337, -0.109223314, 0,
			1.03217816, -0.0321781375, 0,
			0.844128966, 0.172790945, -0.0169199593,
			0.529411793, 0.529411793, -0.0588235296,
			0.180955678, 0.884016514, -0.0649721846,
			-0.0307218414, 0.985457301, 0.0452645682,
			-0.0708909631, 0.719936967, 0.350954086,
			-0.0381808169, 0.340233952, 0.697946846}},
	}
	for _, c := range cases {
		got := resampleMatrix(c.n, c.m, c.mode)
		for i, w := range c.want {
			ulp := float64(math.Nextafter32(float32(math.Abs(float64(w))), 2) - float32(math.Abs(float64(w))))
			if d := math.Abs(float64(got[i] - w)); c.ulps == 0 && d != 0 || d > c.ulps*ulp {
				t.Errorf("%s %d→%d: weight [%d, %d] %.9g, torch %.9g", c.mode, c.n, c.m, i/c.n, i%c.n, got[i], w)
			}
		}
	}
}

// TestResizedTable plants a NaFlex-style embedding: two register rows,
// then the patches' projection plus a channels-last position table of
// an 8×8 grid resized to the image's 4×4 (bicubic, antialiased; torch's
// weights, each output's taps summed in order). Explained with the table
// resized, to f32 rounding; the same target made from the table's grid
// transposed is not explained by the table.
func TestResizedTable(t *testing.T) {
	const c, g, h = 6, 8, 4
	f := precision.F32
	r := rand.New(rand.NewPCG(3, 9))
	rnd := func(param bool, shape ...int) *val {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := &val{shape: shape, data: make([]float32, n), format: f, param: param}
		for i := range v.data {
			v.data[i] = float32(r.NormFloat64())
		}
		return v
	}
	wm := resampleMatrix(g, h, resampleCubicAA)
	// resize [g, g, C] (channels last) to [h·h, C]: the width pass, then the height pass
	resize := func(tab []float32, transpose bool) []float32 {
		at := func(y, x, ch int) float32 {
			if transpose {
				y, x = x, y
			}
			return tab[(y*g+x)*c+ch]
		}
		wide := make([]float32, g*h*c)
		for y := range g {
			for j := range h {
				for ch := range c {
					var sum float32
					for x := range g {
						sum += float32(wm[j*g+x] * at(y, x, ch))
					}
					wide[(y*h+j)*c+ch] = sum
				}
			}
		}
		out := make([]float32, h*h*c)
		for i := range h {
			for j := range h {
				for ch := range c {
					var sum float32
					for y := range g {
						sum += float32(wm[i*g+y] * wide[(y*h+j)*c+ch])
					}
					out[(i*h+j)*c+ch] = sum
				}
			}
		}
		return out
	}
	for _, transpose := range []bool{false, true} {
		table, reg, proj := rnd(true, 1, g, g, c), rnd(true, 1, 2, c), rnd(false, 1, h*h, c)
		for i := range table.data {
			table.data[i] *= 0.5
		}
		table.origin, reg.origin, proj.origin = "param:pos_embed", "param:reg_token", "proj"
		pos := resize(table.data, transpose)
		data := append([]float32(nil), reg.data...)
		for i, p := range proj.data {
			data = append(data, p+pos[i])
		}
		s, sc, target := planted(t, f, []int{1, 2 + h*h, c}, data, table, reg, proj)
		v := s.glue(target, sc)
		e := math.Inf(1)
		if v != nil {
			e = relRMS(f, v.data, target.data)
		}
		if transpose {
			if v != nil && e <= tolerance(f) && strings.Contains(describe(v), "antialiased") {
				t.Errorf("a transposed table explained as the table resized: %s (%.3g)", describe(v), e)
			}
			continue
		}
		if v == nil || e > 1e-6 {
			t.Fatalf("a resized position table not explained (rel-RMS %.3g)", e)
		}
		if d := describe(v); !strings.Contains(d, "bicubic, antialiased") {
			t.Errorf("explained as %s: want the table resized bicubic, antialiased", d)
		}
	}
}
