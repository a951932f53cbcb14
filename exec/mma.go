package exec

import (
	"math"

	"github.com/zflow/zflow/precision"
)

// MMABlock is the k extent of one tensor-core multiply-accumulate step for
// bf16 and f16 inputs (mma.sync m16n8k16, wgmma's k16).
const MMABlock = 16

// mmaBits is how many bits below the largest term's exponent a block's
// terms keep before they are summed.
const mmaBits = 26

// TensorCoreSums reports whether an op of spec s on operands of the given
// formats sums its products as a tensor core does: MathTensorCore with
// every operand bf16 or f16 (a GPU's GEMM on f32 operands uses no tensor
// core unless TF32 is on, which PyTorch leaves off).
func TensorCoreSums(s Spec, operands ...precision.Format) bool {
	if s.Math&MathTensorCore == 0 {
		return false
	}
	for _, f := range operands {
		if f != precision.BF16 && f != precision.F16 {
			return false
		}
	}
	return true
}

// DotMMA is Σ_k x[k]·w[k] as an NVIDIA tensor core accumulates it in f32
// (MathTensorCore): k in blocks of MMABlock; each block's f32 products
// (exact for bf16 and f16 operands) and the running sum are aligned to
// the largest of their exponents, truncated toward zero to mmaBits bits
// below it, added exactly, and the block's result truncated toward zero
// to f32. Measured on an H200 through cuBLAS: every output of 17 bf16 and
// f16 Linear shapes with k ≤ 1024 in one draw, every Linear boundary of
// 30 bf16 traces captured there, and cuda's TestCuBLASIsTensorCoreSums
// (k ≤ 512) reproduced; from k = 1024 on cuBLAS may split k in other ways
// (1 output of 8192 off at k = 1024 in a second draw; many at k = 3072).
// kernels' zf_mma_block is the same sum.
func DotMMA(x, w []float32) float32 {
	var acc float32
	var terms [MMABlock + 1]float64
	for k0 := 0; k0 < len(x); k0 += MMABlock {
		n := min(MMABlock, len(x)-k0)
		terms[0] = float64(acc)
		for i := 1; i <= n; i++ {
			terms[i] = float64(x[k0+i-1] * w[k0+i-1])
		}
		acc = mmaBlock(terms[:n+1])
	}
	return acc
}

// mmaBlock is one block's sum: NaN or opposite infinities give NaN, an
// infinity itself; finite terms are aligned and truncated, and the sum
// truncated toward zero to f32 (±MaxFloat32 beyond its range).
func mmaBlock(terms []float64) float32 {
	var pinf, ninf, nan bool
	maxExp := math.MinInt
	for _, t := range terms {
		switch {
		case math.IsNaN(t):
			nan = true
		case math.IsInf(t, 1):
			pinf = true
		case math.IsInf(t, -1):
			ninf = true
		case t != 0:
			_, e := math.Frexp(t)
			maxExp = max(maxExp, e)
		}
	}
	switch {
	case nan || pinf && ninf:
		return float32(math.NaN())
	case pinf:
		return float32(math.Inf(1))
	case ninf:
		return float32(math.Inf(-1))
	case maxExp == math.MinInt:
		return 0
	}
	// Every kept term is a multiple of q below 2^maxExp: the sum of 17
	// of them is exact in f64.
	q := math.Ldexp(1, maxExp-mmaBits)
	var s float64
	for _, t := range terms {
		s += math.Trunc(t/q) * q
	}
	return truncF32(s)
}

// truncF32 rounds s toward zero to f32: ±MaxFloat32 beyond its range.
func truncF32(s float64) float32 {
	r := float32(s)
	if math.Abs(float64(r)) > math.Abs(s) {
		r = math.Nextafter32(r, 0)
	}
	return r
}
