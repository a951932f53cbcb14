package precision

import (
	"fmt"
	"math"
)

// RelRMS is sqrt(Σ(ours-ref)² / Σref²), summed in float64 (see the package
// doc). Pairs where both sides are NaN, or both the same infinity, add
// nothing; any other pair with a non-finite value makes the result +Inf.
func RelRMS(ours, ref []float32) (float64, error) {
	if len(ours) != len(ref) {
		return 0, fmt.Errorf("precision: rel-RMS of %d values against %d", len(ours), len(ref))
	}
	var sd, sr float64
	for i, o := range ours {
		a, b := float64(o), float64(ref[i])
		if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
			if a == b || a != a && b != b {
				continue
			}
			return math.Inf(1), nil
		}
		d := a - b
		sd += d * d
		sr += b * b
	}
	return RelRMSFromSums(sd, sr), nil
}

// ExactFraction is the fraction of pairs that are BitExact in f. NaN pairs
// are never exact. An empty pair of slices gives 1: nothing differs.
func ExactFraction(f Format, ours, ref []float32) (float64, error) {
	if len(ours) != len(ref) {
		return 0, fmt.Errorf("precision: exact fraction of %d values against %d", len(ours), len(ref))
	}
	if !f.Valid() {
		return 0, fmt.Errorf("precision: exact fraction in invalid %v", f)
	}
	if len(ref) == 0 {
		return 1, nil
	}
	n := 0
	for i, o := range ours {
		if BitExact(f, o, ref[i]) {
			n++
		}
	}
	return float64(n) / float64(len(ref)), nil
}
