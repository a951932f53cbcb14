package precision

import "math"

// MaskLimit is the magnitude from which a value compared in f is
// mask-sized (see the package doc): 2^127 for f32, bf16 and f64, 2^15 for
// f16, the bottom of each format's top binade. f64 uses f32's limit since
// values are compared as float32.
func MaskLimit(f Format) float32 { return math.Float32frombits(MaskBits(f)) }

// MaskBits is MaskLimit(f) as a float32 bit pattern, for hot loops: x is
// mask-sized or NaN exactly when math.Float32bits(x)&0x7FFFFFFF >=
// MaskBits(f), one integer comparison per value.
func MaskBits(f Format) uint32 {
	if f == F16 {
		return (127 + 15) << 23 // 2^15
	}
	return 254 << 23 // 2^127
}

// MaskSized reports whether x is mask-sized in f: |x| >= MaskLimit(f),
// ±Inf included. NaN is not.
func MaskSized(f Format, x float32) bool {
	u := math.Float32bits(x) & 0x7FFFFFFF
	return u >= MaskBits(f) && u <= 0x7F800000
}

// Pair is how a pair of values (ours, the reference's) enters a
// comparison in a format.
type Pair uint8

// The kinds of pair.
const (
	// Ordinary: both finite and neither mask-sized; the pair enters the
	// rel-RMS sums.
	Ordinary Pair = iota
	// BothNaN: left out of every sum; reports count such pairs.
	BothNaN
	// MaskMatch: both mask-sized with the same sign; a match, left out of
	// the sums.
	MaskMatch
	// Mismatch: one side mask-sized and the other not, masks of opposite
	// signs, or a NaN on one side only; the comparison fails.
	Mismatch
)

// Classify says how the pair (a ours, b the reference's) enters a
// comparison in f.
func Classify(f Format, a, b float32) Pair {
	lim := MaskBits(f)
	ua, ub := math.Float32bits(a), math.Float32bits(b)
	ma, mb := ua&0x7FFFFFFF, ub&0x7FFFFFFF
	if ma < lim && mb < lim {
		return Ordinary
	}
	return classifySpecial(lim, ua, ub)
}

// classifySpecial is Classify for a pair with at least one side at or
// beyond lim (mask-sized or NaN).
func classifySpecial(lim, ua, ub uint32) Pair {
	ma, mb := ua&0x7FFFFFFF, ub&0x7FFFFFFF
	nanA, nanB := ma > 0x7F800000, mb > 0x7F800000
	switch {
	case nanA && nanB:
		return BothNaN
	case nanA || nanB:
		return Mismatch
	case ma >= lim && mb >= lim && (ua^ub)>>31 == 0:
		return MaskMatch
	}
	return Mismatch
}

// Sums accumulates a rel-RMS comparison in a format (see the package
// doc): the squared differences and references over the ordinary pairs,
// and counts of the pairs left out.
type Sums struct {
	D2, R2     float64 // Σ(ours−ref)², Σref² over ordinary pairs
	Masked     int     // mask-sized pairs that match (MaskMatch)
	Mismatched int     // pairs that cannot match (Mismatch)
	NaNs       int     // pairs NaN on both sides (BothNaN)
}

// Add folds in the pairs (ours[i], ref[i]) compared in f; ours is at
// least as long as ref.
func (s *Sums) Add(f Format, ours, ref []float32) {
	lim := MaskBits(f)
	ours = ours[:len(ref)]
	var d2, r2 float64
	for i, o := range ours {
		r := ref[i]
		uo, ur := math.Float32bits(o), math.Float32bits(r)
		if uo&0x7FFFFFFF >= lim || ur&0x7FFFFFFF >= lim {
			s.Count(classifySpecial(lim, uo, ur))
			continue
		}
		a, b := float64(o), float64(r)
		d := a - b
		d2 += d * d
		r2 += b * b
	}
	s.D2 += d2
	s.R2 += r2
}

// AddRounded folds in the pairs (ours[i] stored in f, ref[i]): ours
// computed wider, as the float64 re-statements of a model do, and rounded
// to the reference's format before the comparison. ours is at least as
// long as ref.
func (s *Sums) AddRounded(f Format, ours []float64, ref []float32) {
	lim := MaskBits(f)
	var d2, r2 float64
	for i, r := range ref {
		o := f.Round(float32(ours[i]))
		uo, ur := math.Float32bits(o), math.Float32bits(r)
		if uo&0x7FFFFFFF >= lim || ur&0x7FFFFFFF >= lim {
			s.Count(classifySpecial(lim, uo, ur))
			continue
		}
		d := float64(o) - float64(r)
		d2 += d * d
		r2 += float64(r) * float64(r)
	}
	s.D2 += d2
	s.R2 += r2
}

// Count counts a pair that is not Ordinary (an ordinary one adds its
// squares to D2 and R2 instead).
func (s *Sums) Count(p Pair) {
	switch p {
	case BothNaN:
		s.NaNs++
	case MaskMatch:
		s.Masked++
	case Mismatch:
		s.Mismatched++
	}
}

// Merge folds in t.
func (s *Sums) Merge(t Sums) {
	s.D2 += t.D2
	s.R2 += t.R2
	s.Masked += t.Masked
	s.Mismatched += t.Mismatched
	s.NaNs += t.NaNs
}

// RelRMS is the rel-RMS of the ordinary pairs (RelRMSFromSums), or +Inf
// when any pair is a Mismatch: a comparison fails if either part does.
func (s Sums) RelRMS() float64 {
	if s.Mismatched > 0 {
		return math.Inf(1)
	}
	return RelRMSFromSums(s.D2, s.R2)
}
