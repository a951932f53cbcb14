package precision

import (
	"math"
	"unsafe"
)

// BF16Bits rounds x to bfloat16 (round to nearest, ties to even) and returns
// its bit pattern. ±Inf stay ±Inf; finite values at or beyond the overflow
// threshold (0x1.FFp127 + half an ULP) become ±Inf. A NaN stays a NaN with
// its sign and its top 7 payload bits, the quiet bit forced on.
func BF16Bits(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7FFFFFFF > 0x7F800000 {
		return uint16(u>>16) | 0x0040
	}
	// Adding 0x7FFF plus the lowest kept bit rounds half to even; the carry
	// runs into the exponent, which is how overflow reaches Inf.
	return uint16((u + 0x7FFF + (u>>16)&1) >> 16)
}

// BF16ToF32 widens a bfloat16 bit pattern to float32; this is exact.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundBF16 rounds x to the nearest bfloat16 (ties to even) and returns it
// as a float32.
func RoundBF16(x float32) float32 { return BF16ToF32(BF16Bits(x)) }

// RoundSliceBF16 writes RoundBF16(src[i]) to dst[i]; dst and src may be the
// same slice. It panics if dst is shorter than src.
func RoundSliceBF16(dst, src []float32) {
	dst = dst[:len(src)]
	parallel(len(src), func(lo, hi int) { roundBF16(dst[lo:hi], src[lo:hi]) })
}

func roundBF16(dst, src []float32) {
	for i, x := range src {
		u := math.Float32bits(x)
		if u&0x7FFFFFFF > 0x7F800000 {
			dst[i] = math.Float32frombits((u | 0x00400000) &^ 0xFFFF)
			continue
		}
		dst[i] = math.Float32frombits((u + 0x7FFF + (u>>16)&1) &^ 0xFFFF)
	}
}

// BF16ToF32Slice widens bfloat16 bit patterns to float32. It panics if dst
// is shorter than src.
func BF16ToF32Slice(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	parallel(len(src), func(lo, hi int) { bf16ToF32(dst[lo:hi], src[lo:hi]) })
}

func bf16ToF32(dst []float32, src []uint16) {
	i := words64(dst, src)
	for ; i < len(src); i++ {
		dst[i] = math.Float32frombits(uint32(src[i]) << 16)
	}
}

// words64 widens as many leading elements as it can four at a time, one
// 64-bit load and two 64-bit stores per four: each bf16 becomes the high
// half of its f32 (bit patterns, little-endian). It returns how many it
// did (0 when the slices are not 8-byte aligned).
func words64(dst []float32, src []uint16) int {
	n := len(src) / 4
	if n == 0 || uintptr(unsafe.Pointer(&src[0]))%8 != 0 || uintptr(unsafe.Pointer(&dst[0]))%8 != 0 {
		return 0
	}
	in := unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), n)
	out := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), 2*n)
	for j, x := range in {
		o := out[2*j : 2*j+2 : 2*j+2]
		o[0] = (x<<16)&0x00000000FFFF0000 | (x<<32)&0xFFFF000000000000
		o[1] = (x>>16)&0x00000000FFFF0000 | x&0xFFFF000000000000
	}
	return 4 * n
}
