package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestAffinePerChannelFlatRows: a sample whose rows are all equal (a
// guided batch's unconditional caption of zeros) shows no slope; it
// takes the other sample's per channel, with the intercept its rows
// need, so the batch's modulation is read; a batch where no sample shows
// a channel's slope is refused, as is a map no affine one fits.
func TestAffinePerChannelFlatRows(t *testing.T) {
	const R, C = 4, 3
	scale := []float64{0.5, -2, 1.25}
	shift := []float64{0.1, 0.2, -0.3}
	x := make([]float32, 2*R*C)
	for r := range R {
		for c := range C {
			x[r*C+c] = float32(math.Sin(float64(3*r + c + 1))) // sample 0: rows differ
			x[(R+r)*C+c] = float32(0.25 * float64(c+1))        // sample 1: every row alike
		}
	}
	y := make([]float32, len(x))
	for i := range x {
		c := i % C
		y[i] = float32(scale[c]*float64(x[i]) + shift[c])
	}
	xv := &val{shape: []int{2, R, C}, data: x, format: precision.F32}
	yv := &val{shape: []int{2, R, C}, data: y, format: precision.F32}
	a, d, ok := affinePerChannel(xv, yv, tolerance(precision.F32))
	if !ok {
		t.Fatal("a batch with one flat sample: no fit")
	}
	for b := range 2 {
		for c := range C {
			if math.Abs(a[b*C+c]-scale[c]) > 1e-5 || math.Abs(d[b*C+c]-shift[c]) > 1e-5 {
				t.Errorf("sample %d channel %d: a %g d %g, want %g %g", b, c, a[b*C+c], d[b*C+c], scale[c], shift[c])
			}
		}
	}
	one := &val{shape: []int{1, R, C}, data: x[R*C:], format: precision.F32}
	if _, _, ok := affinePerChannel(one, &val{shape: one.shape, data: y[R*C:], format: precision.F32}, tolerance(precision.F32)); ok {
		t.Error("a lone flat sample: fitted, though no slope shows")
	}
	bent := &val{shape: yv.shape, data: append([]float32(nil), y...), format: precision.F32}
	for i := range R * C {
		bent.data[i] = x[i] * x[i]
	}
	if _, _, ok := affinePerChannel(xv, bent, tolerance(precision.F32)); ok {
		t.Error("a square read as an affine map")
	}
}
