package exec

import (
	_ "embed"
	"encoding/binary"
	"math"
	"slices"
	"sync"

	"github.com/zflow/zflow/precision"
)

// The points where NVIDIA's ex2.approx.ftz.f32 (the MUFU.EX2 a flash
// kernel's softmax runs) and the correctly rounded 2^x round to different
// bf16 (resp. f16) values, over every f32 x in [−126, 0] (bf16) and
// [−128, 0] (f16): little-endian f32 bit patterns, ascending. Measured on
// an H200 by ex2approx/ex2.cu (2026-12-02); the README there says how.
// Everywhere else the instruction is within two f32 ulps of 2^x, which
// moves no weight that is rounded to bf16 or f16 before its product.
var (
	//go:embed ex2approx/bf16.u32
	ex2FlipsBF16Raw []byte
	//go:embed ex2approx/f16.u32
	ex2FlipsF16Raw []byte

	ex2Flips = sync.OnceValue(func() map[precision.Format][]uint32 {
		return map[precision.Format][]uint32{precision.BF16: words(ex2FlipsBF16Raw), precision.F16: words(ex2FlipsF16Raw)}
	})
)

func words(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// ex2FTZLimit: below it 2^x is an f32 subnormal, which ex2.approx.ftz
// flushes to zero.
const ex2FTZLimit = -126

// Exp2Approx is 2^x for x ≤ 0 as a flash kernel's weight: zero where
// ex2.approx.ftz.f32 flushes the result (x < −126), else the correctly
// rounded f32 value, which the instruction is within two ulps of.
func Exp2Approx(x float32) float32 {
	if x < ex2FTZLimit {
		return 0
	}
	return float32(math.Exp2(float64(x)))
}

// RoundExp2Approx is ex2.approx.ftz.f32(x) rounded to f for x ≤ 0, exactly
// as the GPU computes it for f bf16 or f16 (Exp2Approx rounded to f, moved
// to its neighbour at the tabulated points; the instruction's error there
// takes it across the midpoint, so the neighbour is on the side the exact
// value lies); Exp2Approx rounded to f for any other format.
func RoundExp2Approx(x float32, f precision.Format) float32 {
	e := Exp2Approx(x)
	r := f.Round(e)
	flips, ok := ex2Flips()[f]
	if !ok || e == 0 {
		return r
	}
	if _, hit := slices.BinarySearch(flips, math.Float32bits(x)); !hit {
		return r
	}
	return neighbour(f, r, e > r)
}

// neighbour is the next value of format f (bf16 or f16) above (up) or
// below r ≥ 0: one step of its bits.
func neighbour(f precision.Format, r float32, up bool) float32 {
	toBits, fromBits := precision.BF16Bits, precision.BF16ToF32
	if f == precision.F16 {
		toBits, fromBits = precision.F16Bits, precision.F16ToF32
	}
	h := toBits(r)
	if up {
		h++
	} else {
		h--
	}
	return fromBits(h)
}
