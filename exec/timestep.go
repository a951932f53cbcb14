package exec

import (
	"fmt"
	"math"
)

// TimestepEmbedding is diffusers' get_timestep_embedding on timesteps t,
// computed as PyTorch computes it in f32, step by step:
//
//	e_i   = f32(−ln(max_period)) · i                  i < half = dim/2
//	e_i   = e_i / (half − freq_shift)                 (× f32 reciprocal under MathRecipDiv)
//	f_i   = exp(e_i)
//	a_ni  = f32(t_n) · f_i, then · scale              (the scale multiply skipped when scale = 1, exact anyway)
//	emb_n = [sin a_n, cos a_n], or [cos a_n, sin a_n] with FlipSinToCos
//	        and one zero column appended when dim is odd.
//
// The result is f32, [len(t), dim] row-major; sin, cos and exp are
// correctly rounded to f32 (MathFastExp changes exp).
func TimestepEmbedding(t []float32, p TimestepParams, m Math) ([]float32, error) {
	half := p.Dim / 2
	switch {
	case p.Dim <= 0:
		return nil, fmt.Errorf("exec: timestep embed: dim %d", p.Dim)
	case p.Scale == 0 || p.MaxPeriod <= 0:
		return nil, fmt.Errorf("exec: timestep embed: scale %g and max period %g must be set", p.Scale, p.MaxPeriod)
	case float32(half)-p.FreqShift == 0:
		return nil, fmt.Errorf("exec: timestep embed: half dim %d − freq shift %g is zero", half, p.FreqShift)
	}
	negLog := float32(-math.Log(float64(p.MaxPeriod)))
	div := float32(half) - p.FreqShift
	recip := 1 / div
	freqs := make([]float32, half)
	for i := range freqs {
		e := negLog * float32(i)
		if m&MathRecipDiv != 0 {
			e *= recip
		} else {
			e /= div
		}
		freqs[i] = Exp32(e, m&^MathRecipDiv)
	}
	out := make([]float32, len(t)*p.Dim)
	sinAt, cosAt := 0, half
	if p.FlipSinToCos {
		sinAt, cosAt = half, 0
	}
	for n, tn := range t {
		row := out[n*p.Dim : (n+1)*p.Dim]
		for i, f := range freqs {
			a := tn * f
			a = a * p.Scale
			row[sinAt+i] = float32(math.Sin(float64(a)))
			row[cosAt+i] = float32(math.Cos(float64(a)))
		}
	}
	return out, nil
}
