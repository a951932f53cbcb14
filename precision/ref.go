package precision

import "math"

// Ref is a reference held for many comparisons against one bound, as a
// search holds its target while it scores candidates: Beyond answers
// whether RelRMS(f, ours, ref) > bound, exactly as RelRMS would, and
// stops as soon as the pairs read so far prove it.
type Ref struct {
	f    Format
	data []float32
	// sq is Σ r² over the entries ordinary in f, summed in order: no
	// smaller than the R2 of any comparison (which sums a subset of
	// those terms in the same order), so a partial D2 over sq bounds
	// the final rel-RMS from below.
	sq float64
}

// NewRef holds ref for comparisons in f.
func NewRef(f Format, ref []float32) *Ref {
	lim := MaskBits(f)
	var sq float64
	for _, r := range ref {
		if math.Float32bits(r)&0x7FFFFFFF < lim {
			sq += float64(r) * float64(r)
		}
	}
	return &Ref{f: f, data: ref, sq: sq}
}

// beyondStride is how many pairs Beyond folds in between its checks.
const beyondStride = 16

// beyondSlack widens Beyond's early test past the rounding of the
// division and square root that RelRMS does: a partial D2 above
// bound²·sq·(1 + beyondSlack) holds, after those roundings, a rel-RMS
// above bound.
const beyondSlack = 1e-9

// Beyond reports whether RelRMS(f, ours, ref) > bound. ours of another
// length than the reference is beyond every finite bound (RelRMS refuses
// it; the search scores it +Inf).
func (r *Ref) Beyond(ours []float32, bound float64) bool {
	if !(bound < math.Inf(1)) {
		return false // nothing is beyond +Inf (or NaN)
	}
	if len(ours) != len(r.data) {
		return true
	}
	lim := MaskBits(r.f)
	early := bound * bound * r.sq * (1 + beyondSlack)
	var d2, r2 float64
	for i, o := range ours {
		b := r.data[i]
		uo, ur := math.Float32bits(o), math.Float32bits(b)
		if uo&0x7FFFFFFF >= lim || ur&0x7FFFFFFF >= lim {
			if classifySpecial(lim, uo, ur) == Mismatch {
				return true // RelRMS is +Inf
			}
			continue
		}
		d := float64(o) - float64(b)
		d2 += d * d
		r2 += float64(b) * float64(b)
		if i%beyondStride == beyondStride-1 && d2 > early {
			return true
		}
	}
	return RelRMSFromSums(d2, r2) > bound
}
