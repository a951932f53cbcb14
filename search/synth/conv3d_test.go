package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestConv3DTimePadding: a (3, 1, 1) causal convolution by hand, its two
// past frames zeros or copies of the first frame (a video VAE's
// convolution that repeats frame 0 inside the module holding the
// weight), is read with the padding it has.
func TestConv3DTimePadding(t *testing.T) {
	const c, o, T, h, w, kt = 2, 3, 4, 2, 3, 3
	mk := func(shape []int, seed float64) *val {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := &val{shape: shape, data: make([]float32, n), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(math.Sin(seed + float64(i)*0.73))
		}
		return v
	}
	x, wt, bias := mk([]int{1, c, T, h, w}, 0.2), mk([]int{o, c, kt, 1, 1}, 1.1), mk([]int{o}, 2.3)
	for _, edge := range []bool{false, true} {
		frame := func(ch, f, p int) float64 { // the padded clip's frame f (kt-1 frames in front)
			f -= kt - 1
			if f < 0 {
				if !edge {
					return 0
				}
				f = 0
			}
			return float64(x.data[(ch*T+f)*h*w+p])
		}
		target := &val{shape: []int{1, o, T, h, w}, data: make([]float32, o*T*h*w), format: precision.F32}
		for oc := range o {
			for f := range T {
				for p := range h * w {
					sum := float64(bias.data[oc])
					for ch := range c {
						for k := range kt {
							sum += float64(wt.data[(oc*c+ch)*kt+k]) * frame(ch, f+k, p)
						}
					}
					target.data[(oc*T+f)*h*w+p] = float32(sum)
				}
			}
		}
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.fitConv3D(x, []*val{wt, bias}, target)
		if v == nil {
			t.Fatalf("edge %v: not explained", edge)
		}
		if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
			t.Errorf("edge %v: rel-RMS %g", edge, e)
		}
	}
}
