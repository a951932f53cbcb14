package synth

import (
	"fmt"
	"math"
	"strings"
)

// bandRule is a 0/1 mask over [P, Lq, Lk] (P the leading axes merged)
// made from the request's shape alone: entry (p, i, j) is 1 where key j
// lies in the range [lo[p], hi[p]) of its leading index, query i in the
// range [qlo[p], qhi[p]) (a block padded past the sequence), and j within
// the band minD ≤ j − i ≤ maxD of its query.
type bandRule struct {
	lo, hi, qlo, qhi []int
	minD, maxD       int
}

// bandMaskNote describes t, a 0/1 value no expression makes (a mask a
// forward builds from the sequence's length: LongT5's local blocks, each
// block's keys the valid ones of the block before, its own and the one
// after, within a band of its queries), as a constant of the request's
// shape, where one band and one key range per leading index reproduce
// every entry; "" where they do not. Both kinds of entry must occur.
//
// An additive mask (entries 0 and one value c ≤ hardMaskLimit: a padding
// mask made additive with finfo.min) is read the same way, its zeros the
// kept keys; a mask of one row per leading index ([B, L]: the padding a
// forward adds to reach a multiple of its block size) has no band.
func bandMaskNote(t *val) string {
	n := len(t.shape)
	if n < 1 || t.numel() < 4 {
		return ""
	}
	keep, kind := t.data, "a 0/1 mask"
	if !zeroOneMask(t.data) {
		var ok bool
		if keep, ok = additiveKeep(t.data); !ok {
			return ""
		}
		kind = "an additive mask"
	}
	lq, lk := 1, t.shape[n-1]
	if n >= 2 {
		lq = t.shape[n-2]
	}
	if lk < 2 {
		return ""
	}
	r, ok := fitBand(keep, lq, lk)
	if !ok {
		return ""
	}
	if lq == 1 {
		return fmt.Sprintf("%s made from the request's shape: the keys of each leading index's range kept (%s)", kind, r.ranges())
	}
	return fmt.Sprintf("%s made from the request's shape: key j of query i kept where %d ≤ j − i ≤ %d and both within their leading index's ranges (%s)", kind, r.minD, r.maxD, r.ranges())
}

// additiveKeep is the 0/1 map of an additive mask's zeros: ok where every
// other entry is one value at most hardMaskLimit and both kinds occur.
func additiveKeep(d []float32) ([]float32, bool) {
	var c float32
	keep := make([]float32, len(d))
	zeros := 0
	for i, x := range d {
		switch {
		case x == 0:
			keep[i] = 1
			zeros++
		case float64(x) > hardMaskLimit || c != 0 && x != c:
			return nil, false
		default:
			c = x
		}
	}
	return keep, zeros > 0 && zeros < len(d)
}

// fitBand reads the rule off a mask m of P·lq·lk entries: each leading
// index's key range from the keys any of its queries sees, the band from
// the least and greatest j − i seen; ok where the rule gives m back.
func fitBand(m []float32, lq, lk int) (bandRule, bool) {
	p := len(m) / (lq * lk)
	r := bandRule{lo: make([]int, p), hi: make([]int, p), qlo: make([]int, p), qhi: make([]int, p), minD: math.MaxInt, maxD: math.MinInt}
	zeros, ones := 0, 0
	for b := range p {
		r.lo[b], r.hi[b], r.qlo[b], r.qhi[b] = lk, 0, lq, 0
		for i := range lq {
			for j := range lk {
				if m[(b*lq+i)*lk+j] == 0 {
					zeros++
					continue
				}
				ones++
				r.lo[b], r.hi[b] = min(r.lo[b], j), max(r.hi[b], j+1)
				r.qlo[b], r.qhi[b] = min(r.qlo[b], i), max(r.qhi[b], i+1)
				r.minD, r.maxD = min(r.minD, j-i), max(r.maxD, j-i)
			}
		}
	}
	if zeros == 0 || ones == 0 {
		return r, false
	}
	for b := range p {
		for i := range lq {
			for j := range lk {
				want := float32(0)
				if j >= r.lo[b] && j < r.hi[b] && i >= r.qlo[b] && i < r.qhi[b] && j-i >= r.minD && j-i <= r.maxD {
					want = 1
				}
				if m[(b*lq+i)*lk+j] != want {
					return r, false
				}
			}
		}
	}
	return r, true
}

// ranges names the key ranges, the first four.
func (r bandRule) ranges() string {
	var parts []string
	for b := range min(len(r.lo), 4) {
		parts = append(parts, fmt.Sprintf("keys [%d, %d) of queries [%d, %d)", r.lo[b], r.hi[b], r.qlo[b], r.qhi[b]))
	}
	if len(r.lo) > 4 {
		parts = append(parts, fmt.Sprintf("… %d in all", len(r.lo)))
	}
	return strings.Join(parts, ", ")
}
