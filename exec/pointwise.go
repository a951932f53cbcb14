package exec

import (
	"math"

	"github.com/zflow/zflow/precision"
)

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
	if y, ok := expNear(x); ok {
		return y
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

// Min32 and Max32 are torch.minimum and torch.maximum of two f32 values:
// NaN when either is.
func Min32(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	return min(a, b)
}

func Max32(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	return max(a, b)
}

// Erf32 is erf(x) in f32, correctly rounded.
func Erf32(x float32) float32 { return float32(math.Erf(float64(x))) }

// ActivateSpec is f(x) as an op with spec s computes it before its final
// rounding: Activate in f32, or, when s has RoundEach, ActivateComposed.
func ActivateSpec(f ActKind, x float32, s Spec) float32 {
	if s.Round&RoundEach != 0 {
		return ActivateComposed(f, x, s.Out, s.Math)
	}
	return Activate(f, x, s.Math)
}

// ActivateComposed is f(x) written as separate PyTorch primitives on tensors of
// format out: every intermediate and every constant rounded to out (PyTorch
// ≤ 1.13's CPU kernels for bf16, whose Vectorized<BFloat16> arithmetic
// rounds after each operation; a model that spells the formula out in
// bf16 tensors does the same). With r = round to out:
//
//	silu:      r(x / r(1 + r(exp(−x))))
//	sigmoid:   r(1 / r(1 + r(exp(−x))))
//	gelu_tanh: c = r(r(x·x)·x); u = r(k(β)·r(x + r(k(κ)·c))); r(r(0.5·x)·r(1 + r(tanh u)))
//	           MathGELUFactored: u = r(r(k(β)·x)·r(1 + r(r(k(κ)·x)·x))); r(r(x·0.5)·r(1 + r(tanh u)))
//	gelu_erf:  r(r(x·0.5)·r(1 + r(erf(r(x·k(√½))))))
//
// where k = r, or the identity under MathScalarF32 (constants kept in
// f32). tanh, relu and identity are one primitive: r(Activate). The
// result is rounded to out (an op's final rounding changes nothing).
func ActivateComposed(f ActKind, x float32, out precision.Format, m Math) float32 {
	r := out.Round
	k := r
	if m&MathScalarF32 != 0 {
		k = func(c float32) float32 { return c }
	}
	switch f {
	case ActSiLU:
		return r(x / r(1+r(Exp32(-x, m))))
	case ActSigmoid:
		return r(1 / r(1+r(Exp32(-x, m))))
	case ActGELUTanh:
		var inner float32
		if m&MathGELUFactored != 0 {
			inner = r(float32(r(float32(k(geluBeta)*x)) * r(1+r(float32(r(float32(k(geluKappa)*x))*x)))))
			return r(float32(r(float32(x*0.5)) * r(1+r(Tanh32(inner, m)))))
		}
		cube := r(float32(r(float32(x*x)) * x))
		inner = r(float32(k(geluBeta) * r(x+r(float32(k(geluKappa)*cube)))))
		return r(float32(r(float32(0.5*x)) * r(1+r(Tanh32(inner, m)))))
	case ActGELUErf:
		return r(float32(r(float32(x*0.5)) * r(1+r(Erf32(r(float32(x*k(sqrtHalf))))))))
	}
	return r(Activate(f, x, m))
}

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
	case ActSin:
		if m&MathCUDASinCos != 0 {
			return SinCUDA(x)
		}
		return float32(math.Sin(float64(x)))
	case ActCos:
		if m&MathCUDASinCos != 0 {
			return CosCUDA(x)
		}
		return float32(math.Cos(float64(x)))
	case ActAtan:
		return float32(math.Atan(float64(x)))
	case ActLog:
		return float32(math.Log(float64(x)))
	case ActExp:
		return Exp32(x, m)
	case ActExpm1:
		return float32(math.Expm1(float64(x)))
	case ActSoftplus:
		if x > 20 {
			return x
		}
		return float32(math.Log1p(math.Exp(float64(x))))
	case ActSqrt:
		return float32(math.Sqrt(float64(x)))
	case ActHardswish:
		return x * hardClamp(x) / 6
	case ActHardsigmoid:
		return hardClamp(x) / 6
	case ActAbs:
		return float32(math.Abs(float64(x)))
	}
	return float32(math.NaN())
}

// hardClamp is min(max(x + 3, 0), 6) in f32, NaN kept (torch's
// std::min(std::max(x + 3, 0), 6) returns x + 3 for a NaN argument).
func hardClamp(x float32) float32 {
	y := x + 3
	if y != y {
		return y
	}
	return min(max(y, 0), 6)
}
