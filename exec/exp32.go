package exec

import "math"

// A search runs softmax and SiLU millions of times on small tensors, and
// float32(math.Exp(float64(x))) was an eighth of its time. expNear gives
// the same f32 for x where its result is a normal f32, faster: e^x in
// float64 from a table of 2^(j/64) and a short polynomial (a few float64
// ulps from e^x, as math.Exp is within one or two), rounded to f32 unless
// that value lies within expMargin float64 ulps of a point halfway between
// two f32 values, where the rounding of the two could differ and math.Exp
// decides. TestExpNearExhaustive compares every f32 of the range.

const (
	expLo = -87 // e^x a normal f32 above here (the least is e^−87.34)
	expHi = 88  // and finite below here (the greatest is e^88.72)
	// expMargin is how near (in float64 ulps) to an f32 rounding midpoint
	// the fast value must not be: thousands of times both errors.
	expMargin = 1 << 13
	// ln2/64 split so that n·expLn2Hi is exact for |n| < 2^14
	expLn2Hi = 0.01083042468962958   // ln2/64 with its low 22 bits cleared
	expLn2Lo = 6.619564634077006e-12 // ln2/64 − expLn2Hi
	// expShifter = 1.5·2^52: a float64 added to it is rounded to an
	// integer held in the sum's low mantissa bits
	expShifter = 0x1.8p52
)

// expTable holds 2^(j/64), j = 0…63, each within an ulp.
var expTable = func() (t [64]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 64)
	}
	return t
}()

// expNear is float32(math.Exp(float64(x))) for expLo ≤ x ≤ expHi, and
// false where x is outside that range or the fast value is too near a
// rounding midpoint to decide.
func expNear(x float32) (float32, bool) {
	if !(x >= expLo && x <= expHi) {
		return 0, false
	}
	xd := float64(x)
	// n = x·64/ln2 rounded to an integer: adding 1.5·2^52 leaves it in
	// the low bits of the sum (ties to even), and subtracting takes it out
	t := xd*(64/math.Ln2) + expShifter
	n := t - expShifter
	k := int64(math.Float64bits(t))   // n in the low bits, 2^51 above them
	r := xd - n*expLn2Hi - n*expLn2Lo // |r| ≤ ln2/128
	// e^r to r⁶ (the next term is below 3e-20)
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	// 2^(n/64) = 2^(j/64)·2^m: m added to the exponent of the table's
	// value times p (both near 1, so the sum stays a normal float64)
	m := int64(int32(k)) >> 6
	y := math.Float64frombits(uint64(int64(math.Float64bits(expTable[k&63]*p)) + m<<52))
	// f32 keeps 23 of the 52 mantissa bits: the 29 it drops decide the
	// rounding, and 1<<28 of them is the midpoint
	low := int64(math.Float64bits(y) & (1<<29 - 1))
	if d := low - 1<<28; d < expMargin && d > -expMargin {
		return 0, false
	}
	return float32(y), true
}
