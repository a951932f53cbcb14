package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestFramePairsAveraged: a video map's frames averaged two by two, the
// first kept alone where their count is odd, computed here by hand, is
// read from the map, in the video's layout and with the frames folded
// into the batch; a map whose first frame is averaged too is not.
func TestFramePairsAveraged(t *testing.T) {
	const b, c, h, w = 1, 2, 2, 3
	for _, T := range []int{4, 5} {
		x := &val{shape: []int{b, c, T, h, w}, data: make([]float32, b*c*T*h*w), format: precision.F32}
		for i := range x.data {
			x.data[i] = float32(math.Sin(float64(i) * 0.61))
		}
		at := func(ch, f, i int) float32 { return x.data[(ch*T+f)*h*w+i] }
		tp := (T + 1) / 2
		video := make([]float32, c*tp*h*w)  // [1, C, T', H, W]
		folded := make([]float32, c*tp*h*w) // [T', C, H, W]
		for ch := range c {
			for f := range tp {
				for i := range h * w {
					var y float32
					switch {
					case T%2 == 1 && f == 0:
						y = at(ch, 0, i)
					case T%2 == 1:
						y = (at(ch, 2*f-1, i) + at(ch, 2*f, i)) / 2
					default:
						y = (at(ch, 2*f, i) + at(ch, 2*f+1, i)) / 2
					}
					video[(ch*tp+f)*h*w+i] = y
					folded[(f*c+ch)*h*w+i] = y
				}
			}
		}
		for _, tc := range []struct {
			name   string
			target *val
		}{
			{"video", &val{shape: []int{b, c, tp, h, w}, data: video, format: precision.F32}},
			{"folded", &val{shape: []int{tp, c, h, w}, data: folded, format: precision.F32}},
		} {
			s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			v := s.framePairsAveraged(tc.target, []*val{x})
			if v == nil {
				t.Errorf("T=%d %s: not explained", T, tc.name)
				continue
			}
			if !slices.Equal(v.data, tc.target.data) {
				t.Errorf("T=%d %s: not exact (rel-RMS %g)", T, tc.name, relRMS(precision.F32, v.data, tc.target.data))
			}
		}
	}
	// five frames averaged as 0+1, 2+3, then 4 alone: not this form
	x := &val{shape: []int{b, c, 5, h, w}, data: make([]float32, b*c*5*h*w), format: precision.F32}
	for i := range x.data {
		x.data[i] = float32(math.Cos(float64(i) * 0.43))
	}
	wrong := &val{shape: []int{b, c, 3, h, w}, data: make([]float32, b*c*3*h*w), format: precision.F32}
	for ch := range c {
		for f := range 3 {
			for i := range h * w {
				a := x.data[(ch*5+2*f)*h*w+i]
				if f < 2 {
					a = (a + x.data[(ch*5+2*f+1)*h*w+i]) / 2
				}
				wrong.data[(ch*3+f)*h*w+i] = a
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if v := s.framePairsAveraged(wrong, []*val{x}); v != nil && relRMS(precision.F32, v.data, wrong.data) < 1e-3 {
		t.Errorf("the last frame kept alone: explained (rel-RMS %g)", relRMS(precision.F32, v.data, wrong.data))
	}
}
