package exec

import "math"

// MMABlock is the k extent of one tensor-core multiply-accumulate step for
// bf16 and f16 inputs (mma.sync m16n8k16, wgmma's k16).
const MMABlock = 16

// mmaBits is how many bits below the largest term's exponent a block's
// terms keep before they are summed.
const mmaBits = 26

// DotMMA is Σ_k x[k]·w[k] as an NVIDIA tensor core accumulates it in f32
// (MathTensorCore): k in blocks of MMABlock; each block's exact products
// and the running sum are aligned to the largest of their exponents,
// truncated toward zero to mmaBits bits below it, added exactly, and the
// block's result truncated toward zero to f32. Measured on an H200 through
// cuBLAS (bf16 and f16 Linear, k ≤ 1024: every output of 17 shapes, and
// every Linear boundary of 30 bf16 traces captured there, reproduced);
// cuBLAS splits larger k across blocks in other ways. x and w hold values
// of a ≤ 12-bit-significand format, so each product is exact in f64.
func DotMMA(x, w []float32) float32 {
	var acc float32
	var terms [MMABlock + 1]float64
	for k0 := 0; k0 < len(x); k0 += MMABlock {
		n := min(MMABlock, len(x)-k0)
		terms[0] = float64(acc)
		maxExp := math.MinInt
		for i := 0; i <= n; i++ {
			if i > 0 {
				terms[i] = float64(x[k0+i-1]) * float64(w[k0+i-1])
			}
			if t := terms[i]; t != 0 {
				_, e := math.Frexp(t)
				maxExp = max(maxExp, e)
			}
		}
		if maxExp == math.MinInt {
			acc = 0
			continue
		}
		// Every kept term is a multiple of q below 2^maxExp: the sum of
		// 17 of them is exact in f64.
		q := math.Ldexp(1, maxExp-mmaBits)
		var s float64
		for _, t := range terms[:n+1] {
			s += math.Trunc(t/q) * q
		}
		acc = truncF32(s)
	}
	return acc
}

// truncF32 rounds s toward zero to f32.
func truncF32(s float64) float32 {
	r := float32(s)
	if math.Abs(float64(r)) > math.Abs(s) {
		r = math.Nextafter32(r, 0)
	}
	return r
}
