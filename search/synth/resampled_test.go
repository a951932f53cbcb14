package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestAxisResampledShortcut: Allegro's temporal convolutions by hand,
// their output plus the input's every other frame (a downsampler) or
// each frame twice (an upsampler), are read as a value of the scope plus
// the input resampled in time.
func TestAxisResampledShortcut(t *testing.T) {
	const c, h, w = 2, 3, 2
	rng := rand.New(rand.NewPCG(6, 1))
	mk := func(frames int) *val { return randVal(rng, 1, c, frames, h, w) }
	for _, tc := range []struct {
		name      string
		in, out   int
		fromFrame func(f int) int
	}{
		{"every other frame", 4, 2, func(f int) int { return 2 * f }},
		{"each frame twice", 2, 4, func(f int) int { return f / 2 }},
	} {
		x, conv := mk(tc.in), mk(tc.out)
		target := &val{shape: conv.shape, data: make([]float32, len(conv.data)), format: precision.F32}
		for ch := range c {
			for f := range tc.out {
				for p := range h * w {
					target.data[(ch*tc.out+f)*h*w+p] = conv.data[(ch*tc.out+f)*h*w+p] + x.data[(ch*tc.in+tc.fromFrame(f))*h*w+p]
				}
			}
		}
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.channelShortcut(target, []*val{x, conv})
		if v == nil {
			t.Fatalf("%s: not explained", tc.name)
		}
		if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
			t.Errorf("%s: rel-RMS %g", tc.name, e)
		}
		if s.channelShortcut(target, []*val{conv}) != nil {
			t.Errorf("%s: explained without the input", tc.name)
		}
	}
}
