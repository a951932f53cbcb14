package precision

import "math"

// RelRMSFromSums is the relative RMS error sqrt(sumSqDiff / sumSqRef) given
// the two sums. When the reference is all zeros (sumSqRef == 0) it is 0 if
// the difference is also zero and +Inf otherwise: any error against a zero
// reference is infinitely large in relative terms.
func RelRMSFromSums(sumSqDiff, sumSqRef float64) float64 {
	if sumSqRef == 0 {
		if sumSqDiff == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Sqrt(sumSqDiff / sumSqRef)
}
