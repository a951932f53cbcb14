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
// summed in float64 over the ordinary pairs (below). If the reference is
// all zeros there it is 0 when ours is all zeros too and +Inf otherwise. It
// is not symmetric: the reference is always the denominator.
//
// # Mask-sized values
//
// Attention masks and biases hold values such as finfo.min (−3.4e38 in
// f32, −65504 in f16) or −Inf beside ordinary ones. Squared, one such
// entry outweighs any number of ordinary ones, so a rel-RMS over all
// entries is about 1e-39 whatever the ordinary entries are: a mask would
// hide every error beside it. Such values are therefore compared apart,
// exactly.
//
// A value is mask-sized in a format f when its magnitude is at least
// MaskLimit(f), the bottom of f's top binade: 2^127 ≈ 1.7e38 for f32 and
// bf16 (their largest finite values are just under 2^128), 2^15 = 32768
// for f16 (largest finite 65504). ±Inf is mask-sized; NaN is not. f64
// values are compared as float32 and take f32's limit. Masks written as
// finfo.min, −finfo.max or ±Inf are mask-sized; masks written as moderate
// numbers (−1e4, −1e9, −1e30 in f32, or finfo.min halved) are not, and
// still weigh on the rel-RMS as before. The limit is a fixed fraction
// of the format's range rather than a multiple of the tensor's typical
// size so that a tensor without mask-sized values is compared exactly as
// it would be without this rule, and so that an ordinary activation
// (a massive LLM activation of 1e4, a position index in f32) is never
// taken for a mask.
//
// Each pair (a, b) of a comparison in f is one of (Classify):
//
//   - Ordinary: both finite and neither mask-sized. Only these enter the
//     rel-RMS sums.
//   - BothNaN: NaN on both sides; left out (reports count them).
//   - MaskMatch: both mask-sized with the same sign, whatever their
//     magnitudes (finfo.min against −Inf, or f32's finfo.min against
//     bf16's): a match, left out of the sums and counted.
//   - Mismatch: anything else (one side mask-sized and the other not,
//     masks of opposite signs, a NaN on one side only).
//
// A comparison fails if either part fails: Sums.RelRMS and RelRMS are
// +Inf when any pair is a Mismatch, and otherwise the rel-RMS of the
// ordinary pairs. For a tensor with no mask-sized value and no NaN this is
// the plain formula above, unchanged to the last bit.
package precision
