package precision

import "math"

// ULPNaN is what ULPDistance returns when either value is a NaN: NaN has no
// place on the lattice, and the largest distance cannot be mistaken for a
// near miss.
const ULPNaN = math.MaxUint64

// ULPDistance is the number of steps between a and b on f's lattice of
// values: the bit patterns read as sign-magnitude integers and mapped onto
// one monotone integer line, so adjacent values are 1 apart, +0 and -0 are
// the same point, the smallest subnormals of opposite sign are 2 apart and
// the largest finite value is 1 from Inf. a and b are first rounded to f
// (a no-op for values already representable in f, which is the intended
// use). If either is a NaN the result is ULPNaN. ULPDistance panics on an
// invalid Format.
func ULPDistance(f Format, a, b float32) uint64 {
	if a != a || b != b {
		return ULPNaN
	}
	var ma, mb uint64 // magnitudes on the lattice
	var sa, sb bool   // negative?
	switch f {
	case F32:
		ua, ub := math.Float32bits(a), math.Float32bits(b)
		ma, sa = uint64(ua&0x7FFFFFFF), ua>>31 == 1
		mb, sb = uint64(ub&0x7FFFFFFF), ub>>31 == 1
	case BF16:
		ha, hb := BF16Bits(a), BF16Bits(b)
		ma, sa = uint64(ha&0x7FFF), ha>>15 == 1
		mb, sb = uint64(hb&0x7FFF), hb>>15 == 1
	case F16:
		ha, hb := F16Bits(a), F16Bits(b)
		ma, sa = uint64(ha&0x7FFF), ha>>15 == 1
		mb, sb = uint64(hb&0x7FFF), hb>>15 == 1
	case F64:
		ua, ub := math.Float64bits(float64(a)), math.Float64bits(float64(b))
		ma, sa = ua&(1<<63-1), ua>>63 == 1
		mb, sb = ub&(1<<63-1), ub>>63 == 1
	default:
		panic("precision: ULPDistance on invalid " + f.String())
	}
	if sa == sb {
		if ma > mb {
			return ma - mb
		}
		return mb - ma
	}
	// Opposite signs: the distance passes through zero. It cannot overflow:
	// each magnitude is at most Inf's, below 2^63.
	return ma + mb
}
