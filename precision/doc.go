// Package precision holds zflow's number formats and their rounding, and the
// definitions every other package uses when it says two tensors agree.
//
// # Formats and what is exact
//
// Values travel as float32. Every bf16 and f16 value is an f32 value, so
// widening bf16 or f16 to f32 (BF16ToF32, F16ToF32 and their
// slice forms) is exact, NaN payloads included.
//
// Narrowing f32 to bf16 (BF16Bits, RoundBF16) rounds to nearest, ties to
// even, as PyTorch's scalar c10::BFloat16 conversion does and as CUDA's
// cvt.rn.bf16.f32 does on sm_80 and newer: subnormals are kept, ±Inf stays
// ±Inf, and a finite value whose magnitude is at least the largest finite
// bf16 plus half an ULP becomes ±Inf. NaN stays a quiet NaN: here its sign
// and top payload bits are kept with the quiet bit set, while PyTorch's CPU
// path returns 0x7FC0 for every NaN and CUDA's hardware conversion returns
// its canonical NaN, 0x7FFF. Payloads differ between producers, so nothing
// in zflow compares them.
//
// Narrowing f32 to f16 (F16Bits, RoundF16) is IEEE 754 binary16 round to
// nearest, ties to even, with gradual underflow (subnormals down to 2^-24,
// never flushed; magnitudes up to and including 2^-25 become ±0, since
// 2^-25 is a tie and 0 is even) and overflow to ±Inf from 65520 (65504 plus
// half an ULP) upward. NaN stays a quiet NaN with its sign.
//
// Narrowing from f64 is not offered directly. PyTorch converts a double to
// bf16 or f16 through float (the c10 constructors take a float), which
// rounds twice; the same is had here with float32(x) (Go's conversion rounds
// to nearest even) followed by the functions above. Double rounding differs
// from one correctly rounded step on rare inputs that the first rounding
// turns into a tie; zflow matches PyTorch, not the single step.
//
// The conversions are checked against independent reference code on every
// one of the 2^32 f32 bit patterns (go test without -short).
//
// # Bit-exact
//
// Two values are bit-exact in a format when, rounded to that format, their
// bit patterns are equal, with two exceptions: +0 and -0 are equal (they
// are equal values, and which one an op yields can hang on summation order),
// and a NaN is never equal to anything, itself included; NaN pairs are
// counted separately by reports. For values already in the format, rounding
// is a no-op and this is plain bit equality.
//
// # ULP distance
//
// The ULP distance of a and b in a format is the number of steps between them
// on that format's ordered lattice of values. Bit patterns are sign-magnitude;
// the lattice maps a pattern with magnitude m to m if positive and -m if
// negative, which is monotone in the value, so adjacent values are 1 apart,
// +0 and -0 are both 0 (distance 0), the two smallest subnormals of opposite
// sign are 2 apart, and the largest finite value is 1 from Inf. A NaN has no
// place on the lattice: the distance is then ULPNaN (the largest uint64).
// ULPDistance rounds both values to the format first, a no-op for values
// already in it. On the f64 lattice, float32 inputs that are adjacent in
// f32 are 2^29 apart.
//
// # Rel-RMS
//
// The relative RMS error of ours against the reference b is
//
//	sqrt( Σ (a_i - b_i)² / Σ b_i² )
//
// summed in float64. If the reference is all zeros it is 0 when ours is all
// zeros too and +Inf otherwise. It is not symmetric: the reference is
// always the denominator. RelRMS over slices skips pairs that are both NaN
// or both the same infinity and is +Inf if any other pair is not finite.
package precision
