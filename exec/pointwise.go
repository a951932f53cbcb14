package exec

import "math"

// The scalar f32 math every backend's pointwise kernels must reproduce.
// Each function is written as PyTorch's kernel computes it in f32 "opmath"
// (aten/src/ATen/native/cuda/ActivationGeluKernel.cu and friends): the
// order of operations matters at the last bit, and float32(...) around a
// product keeps Go from fusing it into an FMA.

const (
	geluBeta  = float32(0.7978845608028654) // √(2/π) = M_SQRT2·M_2_SQRTPI·0.5, rounded to f32
	geluKappa = float32(0.044715)
	sqrtHalf  = float32(0.7071067811865476) // M_SQRT1_2
	log2e     = float32(1.4426950408889634)
)

// Exp32 is e^x in f32: correctly rounded, or the fast form (spec.go).
func Exp32(x float32, m Math) float32 {
	if m&MathFastExp != 0 {
		return float32(math.Exp2(float64(float32(x * log2e))))
	}
	return float32(math.Exp(float64(x)))
}

// Tanh32 is tanh(x) in f32.
func Tanh32(x float32, m Math) float32 {
	if m&MathFastExp != 0 {
		if x > 10 || x < -10 { // 1 − 2/(e^2x + 1) is ±1 in f32 beyond this
			return float32(math.Copysign(1, float64(x)))
		}
		return 1 - 2/(Exp32(2*x, m)+1)
	}
	return float32(math.Tanh(float64(x)))
}

// Erf32 is erf(x) in f32, correctly rounded.
func Erf32(x float32) float32 { return float32(math.Erf(float64(x))) }

// Activate is f(x) for one of the ActKinds, in f32 (not rounded to a
// storage format). An invalid kind gives NaN; ops check kinds first.
func Activate(f ActKind, x float32, m Math) float32 {
	switch f {
	case ActIdentity:
		return x
	case ActSiLU: // x / (1 + exp(−x))
		return x / (1 + Exp32(-x, m))
	case ActGELUTanh: // 0.5·x·(1 + tanh(β·(x + κ·x³))), x³ = (x·x)·x
		cube := float32(float32(x*x) * x)
		inner := float32(geluBeta * float32(x+float32(geluKappa*cube)))
		return float32(0.5*x) * (1 + Tanh32(inner, m))
	case ActGELUErf: // x·0.5·(1 + erf(x·√½))
		return float32(x*0.5) * (1 + Erf32(float32(x*sqrtHalf)))
	case ActTanh:
		return Tanh32(x, m)
	case ActSigmoid: // 1 / (1 + exp(−x))
		return 1 / (1 + Exp32(-x, m))
	case ActReLU:
		if x > 0 || x != x {
			return x
		}
		return 0
	}
	return float32(math.NaN())
}
