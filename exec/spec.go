package exec

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/precision"
)

// Spec is an op's precision: where its result is stored, where inside it
// rounds, and which math variants it uses. Arithmetic is always f32; a
// rounding point rounds an intermediate to Out (nearest, ties to even).
type Spec struct {
	Out   precision.Format // storage format of the result; the zero value is refused
	Round Round            // internal rounding points, besides the final one
	Math  Math             // math variants (fast exp, reciprocal division)
}

// Out is the Spec that stores in f, rounds nowhere else, precise math:
// one PyTorch op on tensors of format f (compute in f32, round once).
func Out(f precision.Format) Spec { return Spec{Out: f} }

// Composed is the Spec of the same op written as separate PyTorch
// primitives on tensors of format f: rounded after each of them.
func Composed(f precision.Format) Spec { return Spec{Out: f, Round: RoundEach} }

// Has reports whether s rounds at point r (RoundEach includes every point).
func (s Spec) Has(r Round) bool { return s.Round&(r|RoundEach) != 0 }

// Check returns an error if s names an invalid format or unknown bits.
func (s Spec) Check() error {
	if !s.Out.Valid() {
		return fmt.Errorf("exec: spec: invalid output format %v", s.Out)
	}
	if s.Round&^roundAll != 0 {
		return fmt.Errorf("exec: spec: unknown rounding bits %#x", uint32(s.Round&^roundAll))
	}
	if s.Math&^mathAll != 0 {
		return fmt.Errorf("exec: spec: unknown math bits %#x", uint16(s.Math&^mathAll))
	}
	if s.Math&MathNormalizeF32 != 0 && s.Math&MathL2 == 0 {
		return fmt.Errorf("exec: spec: %v without %v", MathNormalizeF32, MathL2)
	}
	if s.Math&MathSqrtDiv != 0 && s.Round&RoundStats == 0 {
		return fmt.Errorf("exec: spec: %v without round %v", MathSqrtDiv, RoundStats)
	}
	return nil
}

func (s Spec) String() string {
	str := s.Out.String()
	if s.Round != 0 {
		str += " round=" + s.Round.String()
	}
	if s.Math != MathPrecise {
		str += " math=" + s.Math.String()
	}
	return str
}

// Round is a set of internal rounding points. Each op documents which
// points it has (backend.go); a point an op does not have is ignored.
type Round uint32

const (
	// RoundEach: every intermediate rounded, as when the op is written as
	// separate PyTorch primitives on tensors of the storage format.
	RoundEach Round = 1 << iota
	// RoundNormalized: norm: x̂ rounded before the γ multiply (HF Llama,
	// diffusers RMSNorm: x̂ computed in f32 then .to(dtype), then ·γ).
	RoundNormalized
	// RoundScale: modulate: 1+scale rounded; norm: γ+offset rounded.
	RoundScale
	// RoundProduct: the product rounded before the following add
	// (modulate, gated residual, norm's γ·x̂ before +β, rope's two products).
	RoundProduct
	// RoundGate: glu / gated residual: the activated gate rounded before
	// the multiply.
	RoundGate
	// RoundBeforeBias: linear: x·Wᵀ rounded before +b (an unfused bias).
	RoundBeforeBias
	// RoundScores: attention: the scores rounded before the softmax, once,
	// after the last of q·kᵀ·scale, the soft-cap, ALiBi and the bias
	// (RoundEach rounds after each of them instead, q·kᵀ before the
	// scale included: the matmul's stored output).
	RoundScores
	// RoundProbs: attention: the normalised softmax probabilities rounded
	// before ·v (PyTorch's math SDPA: softmax output in the storage format).
	RoundProbs
	// RoundWeights: attention: the unnormalised weights exp(s − max) rounded
	// before ·v, the division by their f32 sum done after (flash attention's
	// bf16 P; memory-efficient attention likewise).
	RoundWeights
	// RoundStats: layer norm: the statistics computed in the storage format
	// as PyTorch's CPU kernel computes them for a reduced-precision tensor
	// when its compute type is the tensor's own (torch ≤ 1.13 on bf16):
	// Welford moments over 256-bit vectors with every operation rounded,
	// eps, var + eps, √ and 1/√ rounded, and y = x·rstd + (−rstd·mean)
	// (see NormMoments); in f32 (the kernel on an f32 tensor), the same
	// moments in f32 and x·rstd + shift, then ·γ + β, each one fused
	// multiply-add, as its compiled vector code contracts them. On an RMS norm: the norm written as primitives on
	// tensors of the storage format, x·rsqrt(mean(x²) + eps) with x², the
	// mean, the sum with eps, rsqrt and x·r each rounded (RMSStats; eps
	// kept f32, as a Python scalar is). RoundEach does not imply it.
	RoundStats
	// RoundAccum: attention: probabilities·v accumulated in the storage
	// format, in key order, every product and every partial sum rounded
	// (PyTorch ≤ 1.13's CPU matmul without transposed operands on bf16).
	// Linear (and the convolutions composed on it): the same in k order,
	// the bias the first partial sum (PyTorch ≤ 1.13's CPU convolutions on
	// bf16, their columns (channel, row, column) of the filter); a
	// narrow output only. RoundEach does not imply it.
	RoundAccum
	// RoundQuery: attention: q·scale computed in f32 and rounded to the
	// storage format element by element before q·kᵀ, which is then not
	// scaled again (the scale applied to the queries first: timm's and
	// other eager attentions, q = q * scale; attn = q @ kᵀ). RoundEach does
	// not imply it.
	RoundQuery
	// RoundMoments: norm: the mean and 1/√(σ²+eps), computed in f32, each
	// rounded to x's storage format before they are applied, x̂ = (x −
	// mean)·rstd in f32 (PyTorch's CUDA group norm: native_group_norm
	// keeps its statistics in the input's dtype, and its affine step
	// reads them back). RoundEach does not imply it.
	RoundMoments

	roundEnd
	roundAll = roundEnd - 1
)

var roundNames = []string{"each", "normalized", "scale", "product", "gate", "before_bias", "scores", "probs", "weights", "stats", "accum", "query", "moments"}

// String lists the points joined by "|" ("none" for the empty set).
func (r Round) String() string {
	if r == 0 {
		return "none"
	}
	var parts []string
	for i, n := range roundNames {
		if r&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := r &^ roundAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(parts, "|")
}

// ParseRound reads the String form ("product|gate", "none", "").
func ParseRound(s string) (Round, error) {
	var r Round
	for _, part := range strings.Split(s, "|") {
		part = strings.TrimSpace(part)
		if part == "" || part == "none" {
			continue
		}
		found := false
		for i, n := range roundNames {
			if part == n {
				r |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("exec: unknown rounding point %q", part)
		}
	}
	return r, nil
}

// Math is a set of math variants; the zero value is precise everywhere.
type Math uint16

const (
	// MathPrecise: exp, tanh, erf, sin, cos correctly rounded to f32
	// (computed in f64, then rounded); PyTorch's CPU (Sleef, ≤1 ulp) and
	// CUDA (expf, tanhf, ≤2 ulp) kernels are within an ulp or two of it.
	MathPrecise Math = 0
	// MathFastExp: exp(x) = 2^(f32(x·log2 e)) (CUDA's __expf: the product
	// rounded to f32 first); tanh(x) = 1 − 2/(exp(2x) + 1) with that exp.
	MathFastExp Math = 1 << 0
	// MathRecipDiv: a division by a scalar is done as a multiplication by
	// its f32 reciprocal (PyTorch on CUDA when the divisor is a CPU scalar).
	MathRecipDiv Math = 1 << 1
	// MathWelford: layer norm: the statistics as PyTorch's CUDA layer-norm
	// kernel reduces them (per-thread Welford over 4-element vectors with
	// FMA, a warp-shuffle tree, then across warps), rstd = 1/√(var + eps)
	// rounded once (rsqrt), and γ·x̂ + β fused (see WelfordMoments). RMS
	// norms refuse it.
	MathWelford Math = 1 << 2
	// MathTensorCore: linear: x·Wᵀ accumulated as an NVIDIA tensor core
	// does for bf16 and f16 inputs, k in blocks of 16, each block's sum
	// truncated toward zero (DotMMA): cuBLAS's GEMMs on a GPU.
	MathTensorCore Math = 1 << 3
	// MathCUDASinCos: sin and cos as CUDA's sinf and cosf compute them
	// (SinCUDA, CosCUDA): PyTorch's f32 sin and cos on a GPU.
	MathCUDASinCos Math = 1 << 4
	// MathScalarF32: an activation composed of primitives (RoundEach)
	// keeps its constants in f32, as PyTorch 2 passes a Python scalar to
	// a kernel in its opmath type; without it they are rounded to the
	// storage format first (PyTorch ≤ 1.13's CPU kernels).
	MathScalarF32 Math = 1 << 5
	// MathGELUFactored: gelu_tanh composed as x·0.5·(1 + tanh(β·x·(1 +
	// κ·x·x))) (Megatron's and BLOOM's spelling) instead of
	// 0.5·x·(1 + tanh(β·(x + κ·x³))) (ActivateComposed).
	MathGELUFactored Math = 1 << 6
	// MathF64SinCos: a sinusoid table (timestep_embed) computed in float64
	// from its f32 inputs, frequencies 1/max_period^(i/(half − shift)),
	// rounded once to f32 at the end: diffusers' sin-cos position tables
	// (get_1d_sincos_pos_embed_from_grid), made in float64 and cast.
	MathF64SinCos Math = 1 << 7
	// MathOnlineSoftmax: attention's softmax as a flash kernel computes
	// it (cuDNN's SDPA on Hopper; measured in BENCHMARKS.md): keys in
	// tiles of FlashKeyTile, scores in log2 units, a running maximum, each
	// tile's weights 2^(x − m) by ex2.approx (RoundExp2Approx), the
	// running sum and output rescaled by 2^(m_old − m_new), the output
	// divided by the sum once at the end (exec/cpu's Attention).
	MathOnlineSoftmax Math = 1 << 8
	// MathL2: an RMS norm computed as F.normalize times √G (G the group):
	// n = ‖x‖₂ (the sum of squares in f64, rounded to f32, √ in f32)
	// stored in the output format, x̂ = x / max(n, eps), then x̂·√G, ·γ'
	// and +β, each step stored in the output format (PyTorch ops one
	// after another: the Wan and Qwen-Image VAEs' norms). √G is f32 with
	// MathScalarF32 (PyTorch 2's opmath scalar) and in the output format
	// without it (PyTorch ≤ 1.13's CPU kernels); with RoundStats the sum of
	// squares is kept in the output format, each square and partial sum
	// rounded in element order (1.13's CPU norm). Layer norms refuse it.
	MathL2 Math = 1 << 9
	// MathNormalizeF32: MathL2 on x upcast to f32 and the result cast
	// back (F.normalize(x.float()).to(dtype): the HunyuanVideo 1.5 VAE's
	// norms): n = ‖x‖₂ kept in f32, x̂ = x / max(n, eps) rounded once to
	// the output format; √G, γ and β then as MathL2's. Only with MathL2.
	MathNormalizeF32 Math = 1 << 10
	// MathSqrtDiv: an RMS norm written out in the storage format
	// (RoundStats) as x / √(mean(x²) + eps): the root rounded and x
	// divided by it, where RoundStats alone multiplies by a rounded
	// reciprocal root (LTX-2's VAE: torch.sqrt, then x / rms). Only with
	// RoundStats, on RMS norms (the CPU's; the GPU kernels refuse
	// RoundStats).
	MathSqrtDiv Math = 1 << 11

	mathAll = MathFastExp | MathRecipDiv | MathWelford | MathTensorCore | MathCUDASinCos | MathScalarF32 | MathGELUFactored | MathF64SinCos | MathOnlineSoftmax | MathL2 | MathNormalizeF32 | MathSqrtDiv
)

// FlashKeyTile is the key tile of MathOnlineSoftmax: cuDNN's SDPA on an
// H200 reproduces with 128 for every head dim measured (8 to 256).
const FlashKeyTile = 128

var mathNames = []string{"fast_exp", "recip_div", "welford", "tensor_core", "cuda_sincos", "scalar_f32", "gelu_factored", "f64_sincos", "online_softmax", "l2", "normalize_f32", "sqrt_div"}

// String lists the variants joined by "|" ("precise" for none).
func (m Math) String() string {
	if m == 0 {
		return "precise"
	}
	var parts []string
	for i, n := range mathNames {
		if m&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := m &^ mathAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint16(rest)))
	}
	return strings.Join(parts, "|")
}

// ParseMath reads the String form ("fast_exp|recip_div", "precise", "").
func ParseMath(s string) (Math, error) {
	var m Math
	for _, part := range strings.Split(s, "|") {
		part = strings.TrimSpace(part)
		if part == "" || part == "precise" {
			continue
		}
		found := false
		for i, n := range mathNames {
			if part == n {
				m |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("exec: unknown math variant %q", part)
		}
	}
	return m, nil
}
