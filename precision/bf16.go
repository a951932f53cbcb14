package precision

import "math"

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
	i := 0
	// Four at a time with capped subslices: one bounds check per group,
	// about 1.5x the simple loop (BenchmarkBF16ToF32).
	for ; i+4 <= len(src); i += 4 {
		s := src[i : i+4 : i+4]
		d := dst[i : i+4 : i+4]
		d[0] = math.Float32frombits(uint32(s[0]) << 16)
		d[1] = math.Float32frombits(uint32(s[1]) << 16)
		d[2] = math.Float32frombits(uint32(s[2]) << 16)
		d[3] = math.Float32frombits(uint32(s[3]) << 16)
	}
	for ; i < len(src); i++ {
		dst[i] = math.Float32frombits(uint32(src[i]) << 16)
	}
}
