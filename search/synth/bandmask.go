package synth

import (
	"fmt"
	"math"
	"strings"
)

// bandRule is a 0/1 mask over [P, Lq, Lk] (P the leading axes merged)
// made from the request's shape alone: entry (p, i, j) is 1 where key j
// lies in the range [lo[p], hi[p]) of its leading index and within the
// band minD ≤ j − i ≤ maxD of its query.
type bandRule struct {
	lo, hi     []int
	minD, maxD int
}

// bandMaskNote describes t, a 0/1 value no expression makes (a mask a
// forward builds from the sequence's length: LongT5's local blocks, each
// block's keys the valid ones of the block before, its own and the one
// after, within a band of its queries), as a constant of the request's
// shape, where one band and one key range per leading index reproduce
// every entry; "" where they do not. Both kinds of entry must occur.
func bandMaskNote(t *val) string {
	n := len(t.shape)
	if n < 2 || t.numel() < 4 || !zeroOneMask(t.data) {
		return ""
	}
	lq, lk := t.shape[n-2], t.shape[n-1]
	if lq < 2 || lk < 2 {
		return ""
	}
	r, ok := fitBand(t.data, lq, lk)
	if !ok {
		return ""
	}
	return fmt.Sprintf("a 0/1 mask made from the request's shape: key j of query i where %d ≤ j − i ≤ %d and j within the key range of its leading index (%s)", r.minD, r.maxD, r.ranges())
}

// fitBand reads the rule off a mask m of P·lq·lk entries: each leading
// index's key range from the keys any of its queries sees, the band from
// the least and greatest j − i seen; ok where the rule gives m back.
func fitBand(m []float32, lq, lk int) (bandRule, bool) {
	p := len(m) / (lq * lk)
	r := bandRule{lo: make([]int, p), hi: make([]int, p), minD: math.MaxInt, maxD: math.MinInt}
	zeros, ones := 0, 0
	for b := range p {
		r.lo[b], r.hi[b] = lk, 0
		for i := range lq {
			for j := range lk {
				if m[(b*lq+i)*lk+j] == 0 {
					zeros++
					continue
				}
				ones++
				r.lo[b], r.hi[b] = min(r.lo[b], j), max(r.hi[b], j+1)
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
				if j >= r.lo[b] && j < r.hi[b] && j-i >= r.minD && j-i <= r.maxD {
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
		parts = append(parts, fmt.Sprintf("[%d, %d)", r.lo[b], r.hi[b]))
	}
	if len(r.lo) > 4 {
		parts = append(parts, fmt.Sprintf("… %d in all", len(r.lo)))
	}
	return strings.Join(parts, ", ")
}
