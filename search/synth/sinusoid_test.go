package synth

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestSinusoidScaleRead: a timestep sinusoid whose angles are scaled by
// neither 1 nor 1000 is explained with the scale read from its values,
// in each layout; values that are no sinusoid give no scale.
func TestSinusoidScaleRead(t *testing.T) {
	steps := []float32{0.9, 0.55, 0.2, 0.05}
	x := &val{shape: []int{len(steps)}, data: steps, format: precision.F32}
	for _, tc := range []struct {
		name  string
		p     exec.TimestepParams
		scale float32
	}{
		{"1e4, [cos | sin]", exec.TimestepParams{Dim: 32, FlipSinToCos: true, MaxPeriod: 10000}, 1e4},
		{"500, [sin | cos], shift 1", exec.TimestepParams{Dim: 16, FreqShift: 1, MaxPeriod: 10000}, 500},
		{"2.5, [sin | cos]", exec.TimestepParams{Dim: 32, MaxPeriod: 10000}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Scale = tc.scale
			data, err := exec.TimestepEmbedding(steps, p, exec.MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			target := &val{shape: []int{len(steps), p.Dim}, data: data, format: precision.F32}
			s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			v := s.fitSinusoid(x, target)
			if v == nil {
				t.Fatal("not explained")
			}
			got := v.from.attrs.Timestep
			if got.Scale != tc.scale || got.FlipSinToCos != p.FlipSinToCos || got.FreqShift != p.FreqShift {
				t.Errorf("read scale %g flip %v shift %g, want %g %v %g", got.Scale, got.FlipSinToCos, got.FreqShift, tc.scale, p.FlipSinToCos, p.FreqShift)
			}
			if sc := relRMS(precision.F32, v.data, data); sc > 1e-6 {
				t.Errorf("rel-RMS %g against the sinusoid", sc)
			}
		})
	}
	// the timestep scaled first (1e4·t, then the frequencies: the angles
	// round as (1e4·t)·f, not (t·f)·1e4)
	pre := make([]float32, len(steps))
	for i, v := range steps {
		pre[i] = v * 1e4
	}
	p := exec.TimestepParams{Dim: 32, FreqShift: 1, Scale: 1, MaxPeriod: 10000}
	data, err := exec.TimestepEmbedding(pre, p, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	target := &val{shape: []int{len(steps), p.Dim}, data: data, format: precision.F32}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.fitSinusoid(x, target)
	if v == nil {
		t.Fatal("the timestep scaled before its sinusoid: not explained")
	}
	if arg := v.from.args[0]; arg == x || v.from.attrs.Timestep.Scale != 1 {
		t.Errorf("scale %g on %v: want the scale applied to t first", v.from.attrs.Timestep.Scale, arg.shape)
	}
	if sc := relRMS(precision.F32, v.data, data); sc > 1e-6 {
		t.Errorf("rel-RMS %g against the sinusoid of 1e4·t", sc)
	}
	noise := &val{shape: []int{len(steps), 16}, data: make([]float32, len(steps)*16), format: precision.F32}
	for i := range noise.data {
		noise.data[i] = float32((i*37)%11) - 5
	}
	s = &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if got := s.sinusoidScales(x, noise, exec.TimestepParams{Dim: 16, MaxPeriod: 10000, Scale: 1}); got != nil {
		t.Errorf("scales %v read from values that are no sinusoid", got)
	}
}
