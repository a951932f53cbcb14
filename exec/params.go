package exec

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/precision"
)

// ActKind is a pointwise function: an activation, or a gate function.
type ActKind uint8

// The activations. PyTorch's definitions:
//
//	silu(x)      = x·σ(x) = x / (1 + e^−x)
//	gelu_tanh(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//	gelu_erf(x)  = 0.5·x·(1 + erf(x/√2))
//	sigmoid(x)   = 1 / (1 + e^−x)
//	relu(x)      = max(x, 0)
//
// and the elementary functions torch applies to tensors (sin, cos, atan,
// log, exp, expm1 = e^x − 1), which embeddings and learned activations
// spell out (Fourier features, a log or atan timestep, xIELU's negative
// side); each correctly rounded in f32.
const (
	ActIdentity ActKind = iota
	ActSiLU
	ActGELUTanh
	ActGELUErf
	ActTanh
	ActSigmoid
	ActReLU
	ActSin
	ActCos
	ActAtan
	ActLog
	ActExp
	ActExpm1
	ActSoftplus // log(1 + e^x), x past 20 as it is (torch's softplus, β 1, threshold 20)
	ActSqrt     // √x, NaN below 0
	// ActHardswish is x·min(max(x + 3, 0), 6)/6 and ActHardsigmoid
	// min(max(x + 3, 0), 6)/6, in f32 in that order (torch's
	// hardswish and hardsigmoid: MobileNetV3's, LeViT's).
	ActHardswish
	ActHardsigmoid
	// ActAbs is |x|, NaN kept (an output head's positive divisor,
	// (x − a)/(|1 − b| + ε)).
	ActAbs
	actEnd
)

var actNames = [...]string{"identity", "silu", "gelu_tanh", "gelu_erf", "tanh", "sigmoid", "relu", "sin", "cos", "atan", "log", "exp", "expm1", "softplus", "sqrt", "hardswish", "hardsigmoid", "abs"}

func (a ActKind) String() string {
	if a < actEnd {
		return actNames[a]
	}
	return fmt.Sprintf("ActKind(%d)", uint8(a))
}

// Valid reports whether a is one of the defined kinds.
func (a ActKind) Valid() bool { return a < actEnd }

// Kernel reports whether the GPU backends' shared kernel source has a:
// softplus is the CPU reference's only, and the CUDA and Metal backends
// refuse it as unsupported.
func (a ActKind) Kernel() bool { return a <= ActExpm1 || a >= ActSqrt && a < actEnd }

// ParseAct reads the String form.
func ParseAct(s string) (ActKind, error) {
	for i, n := range actNames {
		if strings.EqualFold(s, n) {
			return ActKind(i), nil
		}
	}
	return 0, fmt.Errorf("exec: unknown activation %q", s)
}

// NormKind is LayerNorm or RMSNorm.
type NormKind uint8

const (
	NormLayer NormKind = iota + 1 // x̂ = (x − mean) / √(var + eps), biased variance
	NormRMS                       // x̂ = x / √(mean(x²) + eps)
)

func (k NormKind) String() string {
	switch k {
	case NormLayer:
		return "layer"
	case NormRMS:
		return "rms"
	}
	return fmt.Sprintf("NormKind(%d)", uint8(k))
}

// NormParams configures Norm.
type NormParams struct {
	Kind   NormKind
	Eps    float32 // added to the variance (f32, as PyTorch passes it)
	Offset float32 // γ' = γ + Offset: 0 (γ) or 1 (1 + γ, zero-centred weights)
	Group  int     // elements normalised together along the last axis; 0 = all
}

// ModulateParams configures Modulate.
type ModulateParams struct {
	PlusOne bool // x·(1 + scale) rather than x·scale
}

// RopeLayout says which elements rotate together.
type RopeLayout uint8

const (
	RopeInterleaved RopeLayout = iota + 1 // pairs (2i, 2i+1); tables repeat each frequency twice adjacently
	RopeHalf                              // pairs (i, i + R/2); tables are [f, f] ("rotate half")
)

func (l RopeLayout) String() string {
	switch l {
	case RopeInterleaved:
		return "interleaved"
	case RopeHalf:
		return "half"
	}
	return fmt.Sprintf("RopeLayout(%d)", uint8(l))
}

// RopeParams configures Rope.
type RopeParams struct {
	Heads     int        // H: x's last axis is H·D
	Layout    RopeLayout //
	RotaryDim int        // elements of each head that rotate (even); 0 = all D
}

// MaskKind is the attention mask.
type MaskKind uint8

const (
	MaskNone     MaskKind = iota // every key visible
	MaskCausal                   // query i sees keys j ≤ i (top-left aligned, as PyTorch's is_causal)
	MaskExplicit                 // the mask tensor: nonzero = attend
)

func (m MaskKind) String() string {
	switch m {
	case MaskNone:
		return "none"
	case MaskCausal:
		return "causal"
	case MaskExplicit:
		return "explicit"
	}
	return fmt.Sprintf("MaskKind(%d)", uint8(m))
}

// AttentionParams configures Attention. Layout: q [B, Sq, H·D], k and v
// [B, Sk, KV·D], output [B, Sq, H·D] (heads contiguous within a row).
// Causal masking is top-left aligned as in PyTorch's SDPA is_causal: query i
// sees keys j ≤ i.
type AttentionParams struct {
	Heads   int // H, query heads
	KVHeads int // KV, key/value heads; 0 = H; must divide H
	Mask    MaskKind
	Scale   float32 // 0 = 1/√D, computed in f32
	// Window is a sliding window: on a causal mask query i sees keys j with
	// i − Window < j ≤ i (HF's sliding-window causal mask); on MaskNone, a
	// band around each query, |i − j| < Window (bidirectional local
	// attention); 0 = none. An explicit mask with a window is refused.
	Window int
	// Block, when > 0 on MaskNone, is block-local attention: with P =
	// Sk − Sq keys first (global keys, seen by every query), query i sees
	// key j ≥ P only when ⌊i/Block⌋ = ⌊(j − P)/Block⌋ (the queries' block
	// of the keys that follow); 0 = none. Sk < Sq, or a block with a
	// window, a causal or an explicit mask, is refused.
	Block int
	// Softcap, when > 0, caps the scaled scores: s ← Softcap·tanh(s/Softcap),
	// in f32, before any bias or mask is added (attention-logit soft-capping).
	Softcap float32
	// ALiBi adds slope_h·j to head h's scores, j the key position 0…Sk−1 and
	// slope_h = ALiBiSlopes(H)[h]; the bias value f32(slope_h·j) is rounded to
	// q's format before the add (a bias tensor built in f32, then cast).
	ALiBi bool
	// ALiBiScale multiplies the slopes (0: 1): ALiBi added to q·kᵀ before
	// the scores are scaled, (q·kᵀ + slope·j)·scale, as Falcon does.
	ALiBiScale float32
}

// Slopes are the ALiBi slopes of p's heads (ALiBiSlopes), times
// ALiBiScale when set; nil without ALiBi.
func (p AttentionParams) Slopes(heads int) []float32 {
	if !p.ALiBi {
		return nil
	}
	s := ALiBiSlopes(heads)
	if p.ALiBiScale != 0 {
		for i := range s {
			s[i] *= p.ALiBiScale
		}
	}
	return s
}

// TimestepParams configures TimestepEmbed (diffusers get_timestep_embedding).
type TimestepParams struct {
	Dim          int     // embedding width
	FlipSinToCos bool    // [cos, sin] rather than [sin, cos]
	FreqShift    float32 // downscale_freq_shift
	Scale        float32 // multiplies the arguments (diffusers' scale; 1 by default there); 0 is refused
	MaxPeriod    float32 // 10000 in diffusers; 0 is refused
	// FreqOverrides replace frequencies f_i by the values the reference's
	// exp gave where they are not the exp(e_i) computed here (a vector
	// math library's exp is faithful, not correctly rounded: one ulp of
	// f_i moves the argument t·f_i by t·ulp, visible at t = 6000). Read
	// off captured embeddings; nil for the table as computed.
	FreqOverrides []FreqOverride
}

// FreqOverride is one frequency of a timestep table: f_Index = Value.
type FreqOverride struct {
	Index int
	Value float32
}

// RopeTableParams configures RopeTable: per axis a, with d = AxesDims[a],
// frequencies f_i = 1/θ^(2i/d), i < d/2, angles pos[:, a]·f_i, tables
// cos and sin of the angles laid out by Layout, axes concatenated.
type RopeTableParams struct {
	Theta    float64
	AxesDims []int // even widths, one per position column
	Layout   RopeLayout
	// FreqFormat is the format the frequencies are computed in and stored
	// in (F64: diffusers Flux; F32; BF16: an f32 buffer cast to bf16 by a
	// whole-model cast, as in HF Llama under .to(bfloat16)).
	FreqFormat precision.Format
	// AngleFormat is the format of pos·f and of cos/sin (F64 or F32).
	AngleFormat precision.Format
	// Rotated, where set (one per axis), is how many leading frequencies
	// of each axis turn: f_i for i ≥ Rotated[a] is 0 (cos 1, sin 0), the
	// others keep the axis's full width in their exponent (Gemma 4's
	// "proportional" RoPE: a quarter of the pairs turn, at the
	// frequencies of the whole head). nil: every frequency turns.
	Rotated []int
	// FreqAxes, where set, is the position column that turns each
	// frequency of one axis (AxesDims one width d, d/2 entries):
	// f_i = 1/θ^(2i/d) turned by pos[:, FreqAxes[i]], over positions
	// [S, k] with k > every entry. Multi-axis RoPE whose axes share one
	// frequency ladder (t h w t h w …, sections, any map). nil: axis a
	// is column a.
	FreqAxes []int
	// Joined lays the axes' frequencies out as one axis's: half gives
	// [a_0 … a_m b_0 … b_n a_0 … a_m b_0 … b_n] (each axis's ladder over
	// its own width, the ladders joined, then the whole half layout), as
	// a 2-D RoPE whose per-axis frequencies are concatenated before the
	// cat(freqs, freqs) (the Qwen-VL vision towers'); false, each axis is
	// laid out by itself. The interleaved layout is the same either way.
	Joined bool
}

// PatchParams configures Patchify and Unpatchify.
type PatchParams struct {
	Patch  int // p: square patches
	Height int // H of the unpatchified image (Unpatchify needs it; Patchify checks it if set)
	Width  int // W, likewise
}
