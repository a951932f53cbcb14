package precision

import "fmt"

// RelRMS is the rel-RMS of ours against ref compared in f (Sums.RelRMS,
// see the package doc): sqrt(Σ(ours-ref)² / Σref²) over the ordinary
// pairs, summed in float64; +Inf if any pair mismatches.
func RelRMS(f Format, ours, ref []float32) (float64, error) {
	if len(ours) != len(ref) {
		return 0, fmt.Errorf("precision: rel-RMS of %d values against %d", len(ours), len(ref))
	}
	var s Sums
	s.Add(f, ours, ref)
	return s.RelRMS(), nil
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
