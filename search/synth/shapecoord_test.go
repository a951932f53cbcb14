package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestShapeCoordRope: RoPE tables a model makes from the frame, height
// and width counts it is handed as numbers (LTX-Video's rope module):
// integer positions on that grid, each axis scaled in f32 as the module
// does (i·0.32/20, i·32/2048), u = 2c − 1, a ladder θ^linspace(0, 1, F)·π/2
// in f32, frequency-major, interleaved pairs, the first D mod 6 channels
// still. The grid comes from the call's sizes, the map's maxima read
// (62.5 = 20/0.32: a short decimal, not an integer) and θ 10⁴ scored
// with the ladder made in f32; sizes whose product is not the rows give
// nothing.
func TestShapeCoordRope(t *testing.T) {
	const fr, h, w, dim = 2, 4, 4, 32
	rows, nf, pad := fr*h*w, dim/6, dim%6
	lad := ladderF32(1e4, math.Pi/2, nf, ladderForms[0].exps(nf))
	scale := []struct{ mul, base float32 }{{0.32, 20}, {32, 2048}, {32, 2048}}
	cosT := make([]float32, rows*dim)
	sinT := make([]float32, rows*dim)
	for r := range rows {
		idx := []int{r / (h * w), (r / w) % h, r % w}
		for c := range pad {
			cosT[r*dim+c] = 1
		}
		for k := range nf {
			for a := range 3 {
				coord := float32(idx[a]) * scale[a].mul / scale[a].base
				ang := lad[k] * (coord*2 - 1)
				j := pad + 2*(k*3+a)
				cosT[r*dim+j], cosT[r*dim+j+1] = float32(math.Cos(float64(ang))), float32(math.Cos(float64(ang)))
				sinT[r*dim+j], sinT[r*dim+j+1] = float32(math.Sin(float64(ang))), float32(math.Sin(float64(ang)))
			}
		}
	}
	shape := []int{1, rows, dim}
	s, _, _ := planted(t, precision.F32, shape, cosT)
	cv := &val{shape: shape, data: cosT, format: precision.F32, origin: "rope/out.0"}
	sv := &val{shape: shape, data: sinT, format: precision.F32, origin: "rope/out.1"}
	sizes := map[string]any{"arg1": float64(fr), "arg2": float64(h), "arg3": float64(w), "arg4.0": 0.32, "arg4.1": 32.0}
	c, sn := s.fitShapeCoordRope(sizes, cv, sv)
	if c == nil {
		t.Fatal("tables not explained")
	}
	if e := max(relRMS(precision.F32, c.data, cosT), relRMS(precision.F32, sn.data, sinT)); e > 1e-6 {
		t.Errorf("tables recomputed to rel-RMS %.3g", e)
	}
	if len(s.coordRopes) != 1 {
		t.Fatalf("%d coordinate records, want 1", len(s.coordRopes))
	}
	r := s.coordRopes[0]
	if r.theta != 1e4 {
		t.Errorf("θ %g, want 10000 (candidates %v)", r.theta, r.thetaCands)
	}
	if got := r.best.read.maxes; len(got) != 3 || got[0] != 62.5 || got[1] != 64 || got[2] != 64 {
		t.Errorf("maxima %v, want [62.5 64 64]", got)
	}
	// sizes that do not make the rows
	s2, _, _ := planted(t, precision.F32, shape, cosT)
	if c, _ := s2.fitShapeCoordRope(map[string]any{"arg1": 3.0, "arg2": 4.0, "arg3": 4.0}, cv, sv); c != nil {
		t.Error("explained from a 3×4×4 grid of 32 rows")
	}
}
