package precision

import "math"

// F16Bits rounds x to IEEE 754 binary16 (round to nearest, ties to even,
// subnormals kept, never flushed) and returns its bit pattern. Finite values
// of magnitude 65520 (65504 plus half an ULP) or more become ±Inf. A NaN
// stays a NaN with its sign and its top 10 payload bits, the quiet bit
// forced on.
func F16Bits(x float32) uint16 {
	u := math.Float32bits(x)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7FFFFFFF
	switch {
	case a > 0x7F800000: // NaN
		return sign | 0x7E00 | uint16(a>>13)&0x03FF
	case a >= 0x477FF000: // >= 65520: the tie with 65504 goes to Inf (even)
		return sign | 0x7C00
	case a >= 0x38800000: // >= 2^-14: normal in f16
		// Rebias the exponent (127 -> 15) and round away 13 mantissa bits;
		// a carry out of the mantissa correctly bumps the exponent.
		a -= (127 - 15) << 23
		a += 0x0FFF + (a>>13)&1
		return sign | uint16(a>>13)
	case a <= 0x33000000: // <= 2^-25: rounds to zero (2^-25 is a tie, 0 is even)
		return sign
	}
	// Subnormal result m·2^-24: shift the 24-bit significand right by
	// 126-e and round the dropped bits half to even. m may reach 0x400,
	// the smallest normal, which is the right encoding.
	e := a >> 23
	mant := a&0x007FFFFF | 0x00800000
	shift := 126 - e
	m := mant >> shift
	rem := mant & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && m&1 == 1 {
		m++
	}
	return sign | uint16(m)
}

// F16ToF32 widens a binary16 bit pattern to float32; this is exact (NaN
// payloads are kept).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1F
	m := uint32(h) & 0x03FF
	switch e {
	case 0x1F: // Inf or NaN
		return math.Float32frombits(sign | 0x7F800000 | m<<13)
	case 0: // zero or subnormal: m·2^-24, exact in float32
		v := float32(m) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	return math.Float32frombits(sign | (e+127-15)<<23 | m<<13)
}

// RoundF16 rounds x to the nearest binary16 (ties to even) and returns it
// as a float32.
func RoundF16(x float32) float32 { return F16ToF32(F16Bits(x)) }

// RoundSliceF16 writes RoundF16(src[i]) to dst[i]; dst and src may be the
// same slice. It panics if dst is shorter than src.
func RoundSliceF16(dst, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = F16ToF32(F16Bits(x))
	}
}

// F16ToF32Slice widens binary16 bit patterns to float32. It panics if dst
// is shorter than src.
func F16ToF32Slice(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	parallel(len(src), func(lo, hi int) { f16ToF32(dst[lo:hi], src[lo:hi]) })
}

func f16ToF32(dst []float32, src []uint16) {
	for i, h := range src {
		// Normal values, nearly all of real data, in one predictable branch:
		// rebias the exponent in place (the mantissa shifts with it).
		if e := uint32(h>>10) & 0x1F; e-1 < 30 {
			dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7FFF)+(127-15)<<10)<<13)
			continue
		}
		dst[i] = F16ToF32(h)
	}
}
