package exec

import (
	"math"
	"math/bits"

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
//
// A block whose terms are all normal f32 numbers or zeros (as good as
// every block of a real GEMM) is summed by mmaBlockNormal, the same sum
// without the cases it cannot meet; any other by mmaBlock.
func DotMMA(x, w []float32) float32 { return DotMMAFrom(0, x, w) }

// DotMMAFrom is DotMMA with the accumulator starting at acc (an MMA's C
// operand: a flash kernel's running output, rescaled, before a key tile's
// products are added to it).
func DotMMAFrom(acc float32, x, w []float32) float32 {
	var pr [MMABlock]float32
	for k0 := 0; k0 < len(x); k0 += MMABlock {
		n := min(MMABlock, len(x)-k0)
		xs, ws := x[k0:k0+n], w[k0:k0+n]
		var ok bool
		if acc, ok = mmaBlockNormal(acc, xs, ws); !ok {
			for i := range xs {
				pr[i] = xs[i] * ws[i]
			}
			acc = mmaBlock(acc, pr[:n])
		}
	}
	return acc
}

// mmaBlockNormal is mmaBlock(acc, the products x[i]·w[i]) for a block
// whose terms (acc and the f32 products) are all normal numbers or zeros;
// ok false, and acc unchanged, for any other (a subnormal, an infinity, a
// NaN). A normal term's bits hold its biased exponent be, and the largest
// magnitude's the largest, so mmaBlock's emax (the largest term's
// exponent) is maxbe − 126, and a term's integer on the grid
// 2^(emax − mmaBits) (its magnitude shifted, the sign put back: truncated
// toward zero) is the term times 2^(mmaBits − emax) converted to an
// integer: in f64 that product is exact (an f32 value scaled by a power
// of two, far inside f64's range), and the conversion truncates toward
// zero. From there the sum and the conversion are mmaBlock's.
func mmaBlockNormal(acc float32, x, w []float32) (float32, bool) {
	var p [MMABlock + 1]float32
	p[0] = acc
	w = w[:len(x)]
	for i := range x {
		p[i+1] = x[i] * w[i]
	}
	terms := p[:len(x)+1]
	// the largest magnitude's bits, and the smallest's less one (a zero
	// wraps around): ±Inf or NaN, or a subnormal, goes to mmaBlock
	var hi uint32
	lo := uint32(math.MaxUint32)
	for _, v := range terms {
		a := math.Float32bits(v) & 0x7FFFFFFF
		hi, lo = max(hi, a), min(lo, a-1)
	}
	if hi >= 0x7F800000 || lo < 0x7FFFFF {
		return acc, false
	}
	maxbe := int(hi >> 23)
	emax := maxbe - 126
	scale := math.Float64frombits(uint64(1023+mmaBits-emax) << 52) // 2^(mmaBits − emax)
	var sum int64
	for _, v := range terms {
		sum += int64(float64(v) * scale)
	}
	if sum == 0 {
		return 0, true
	}
	return mmaFloat32(sum, emax), true
}

// mmaBlock is one block's sum, on the terms' bits (each ±M·2^E, M an
// integer): NaN or opposite infinities give NaN, an infinity itself;
// finite terms become integers on the grid 2^(emax − mmaBits) (below 2^26
// each, seventeen sum below 2^31), and the sum is truncated toward zero
// to f32, ±MaxFloat32 beyond its range (mmaFloat32). kernels'
// zf_mma_block is this function and mmaFloat32 line for line.
func mmaBlock(acc float32, pr []float32) float32 {
	var mant [MMABlock + 1]uint32
	var exps [MMABlock + 1]int
	var neg [MMABlock + 1]bool
	emax := math.MinInt
	var pinf, ninf, nan bool
	n := len(pr)
	for t := 0; t <= n; t++ {
		v := acc
		if t > 0 {
			v = pr[t-1]
		}
		b := math.Float32bits(v)
		be := int(b>>23) & 0xFF
		m := b & 0x7FFFFF
		neg[t] = b>>31 != 0
		if be == 255 {
			switch {
			case m != 0:
				nan = true
			case neg[t]:
				ninf = true
			default:
				pinf = true
			}
			m = 0
		}
		e := -149
		if be != 0 && be != 255 {
			m |= 0x800000
			e = be - 150
		}
		mant[t], exps[t] = m, e
		if m != 0 {
			emax = max(emax, e+bits.Len32(m))
		}
	}
	switch {
	case nan || pinf && ninf:
		return float32(math.NaN())
	case pinf:
		return float32(math.Inf(1))
	case ninf:
		return float32(math.Inf(-1))
	case emax == math.MinInt:
		return 0
	}
	var sum int64
	for t := 0; t <= n; t++ {
		var iv uint32
		if sh := exps[t] - emax + mmaBits; sh >= 0 {
			iv = mant[t] << sh
		} else if sh > -32 {
			iv = mant[t] >> -sh
		}
		if neg[t] {
			sum -= int64(iv)
		} else {
			sum += int64(iv)
		}
	}
	if sum == 0 {
		return 0
	}
	return mmaFloat32(sum, emax)
}

// mmaFloat32 is a block's sum (sum ≠ 0, on the grid 2^(emax − mmaBits))
// truncated toward zero to f32, ±MaxFloat32 beyond its range: the end of
// kernels' zf_mma_block.
func mmaFloat32(sum int64, emax int) float32 {
	var sign uint32
	u := uint32(sum)
	if sum < 0 {
		sign, u = 1<<31, uint32(-sum)
	}
	l := bits.Len32(u)
	fe := l + emax - mmaBits // the value's frexp exponent
	switch {
	case fe > 128:
		return math.Float32frombits(sign | 0x7F7FFFFF)
	case fe >= -125:
		var frac uint32
		if l >= 24 {
			frac = u >> (l - 24) & 0x7FFFFF
		} else {
			frac = u << (24 - l) & 0x7FFFFF
		}
		return math.Float32frombits(sign | uint32(fe+126)<<23 | frac)
	}
	var m uint32
	if sub := emax - mmaBits + 149; sub >= 0 {
		m = u << sub
	} else if sub > -32 {
		m = u >> -sub
	}
	return math.Float32frombits(sign | m)
}
