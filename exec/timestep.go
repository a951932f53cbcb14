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
//	f_i   = exp(e_i), or p.FreqOverrides' value for i
//	a_ni  = f32(t_n) · f_i, then · scale              (the scale multiply skipped when scale = 1, exact anyway)
//	emb_n = [sin a_n, cos a_n], or [cos a_n, sin a_n] with FlipSinToCos
//	        and one zero column appended when dim is odd.
//
// The result is f32, [len(t), dim] row-major; sin, cos and exp are
// correctly rounded to f32 (MathFastExp changes exp, MathCUDASinCos sin
// and cos; MathF64SinCos computes it all in float64, timestepF64).
func TimestepEmbedding(t []float32, p TimestepParams, m Math) ([]float32, error) {
	freqs, err := TimestepFreqs(p, m)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(t)*p.Dim)
	sinAt, cosAt := TimestepColumns(p)
	if m&MathF64SinCos != 0 {
		timestepF64(out, t, p, sinAt, cosAt)
		return out, nil
	}
	for n, tn := range t {
		row := out[n*p.Dim : (n+1)*p.Dim]
		for i, f := range freqs {
			row[sinAt+i], row[cosAt+i] = TimestepSinCos(tn, f, p.Scale, m)
		}
	}
	return out, nil
}

// TimestepFreqs is the frequency table f_i, i < Dim/2, of TimestepEmbedding:
// exp(e_i) under m, then p.FreqOverrides.
func TimestepFreqs(p TimestepParams, m Math) ([]float32, error) {
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
	for _, o := range p.FreqOverrides {
		if o.Index < 0 || o.Index >= half || !(math.Abs(float64(o.Value)) <= math.MaxFloat32) {
			return nil, fmt.Errorf("exec: timestep embed: frequency override %d = %g outside [0, %d) or not finite", o.Index, o.Value, half)
		}
		freqs[o.Index] = o.Value
	}
	return freqs, nil
}

// timestepF64 is the table as a float64 program makes it (diffusers'
// get_1d_sincos_pos_embed_from_grid: ω = arange(half) / half, ω = 1 /
// max_period**ω, the angles pos·ω, then sin and cos, cast to f32 once):
// row n of out is [sin, cos] (or flipped) of f64(t_n)·ω_i·scale.
// Frequency overrides, read as f32, stand for ω_i.
func timestepF64(out, t []float32, p TimestepParams, sinAt, cosAt int) {
	half := p.Dim / 2
	omega := make([]float64, half)
	for i := range omega {
		omega[i] = 1 / math.Pow(float64(p.MaxPeriod), float64(i)/(float64(half)-float64(p.FreqShift)))
	}
	for _, o := range p.FreqOverrides {
		omega[o.Index] = float64(o.Value)
	}
	for n, tn := range t {
		row := out[n*p.Dim : (n+1)*p.Dim]
		for i, w := range omega {
			a := float64(tn) * w * float64(p.Scale)
			row[sinAt+i], row[cosAt+i] = float32(math.Sin(a)), float32(math.Cos(a))
		}
	}
}

// TimestepColumns are where frequency i's sine and cosine sit in a row:
// columns sinAt+i and cosAt+i.
func TimestepColumns(p TimestepParams) (sinAt, cosAt int) {
	if p.FlipSinToCos {
		return p.Dim / 2, 0
	}
	return 0, p.Dim / 2
}

// TimestepSinCos is one frequency's pair: a = f32(t·f)·scale in f32, then
// sin a and cos a correctly rounded to f32, or as CUDA's sinf and cosf
// compute them under MathCUDASinCos.
func TimestepSinCos(t, f, scale float32, m Math) (sin, cos float32) {
	a := t * f
	a = a * scale
	if m&MathCUDASinCos != 0 {
		return SinCUDA(a), CosCUDA(a)
	}
	return float32(math.Sin(float64(a))), float32(math.Cos(float64(a)))
}
