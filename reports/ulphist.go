package reports

import (
	"fmt"
	"math/bits"
	"slices"
)

// NumULPBuckets is the number of buckets in ULPStats.Hist: 0, 1, 2, 3-4,
// 5-8, ..., 513-1024 and >1024 ULPs.
const NumULPBuckets = 13

// ulpDense is the bound below which ULP distances are counted one by one.
// It covers every distance on the bf16 and f16 lattices (at most
// 2·0x7F80 = 65280), so those quantiles are always exact.
const ulpDense = 1 << 16

// ulpOverflowKeys caps the distinct distances kept at or above ulpDense;
// past it the overflow histogram halves its resolution (see ulpHist).
const ulpOverflowKeys = 1 << 16

// ulpBucket is the ULPStats.Hist bucket of distance d.
func ulpBucket(d uint64) int {
	if d == 0 {
		return 0
	}
	return min(bits.Len64(d-1)+1, NumULPBuckets-1)
}

// ULPBucketLabel names bucket i of ULPStats.Hist ("0", "3-4", ">1024").
func ULPBucketLabel(i int) string {
	switch {
	case i < 0 || i >= NumULPBuckets:
		return fmt.Sprintf("bucket(%d)", i)
	case i <= 2:
		return fmt.Sprint(i)
	case i == NumULPBuckets-1:
		return fmt.Sprintf(">%d", uint64(1)<<(i-2))
	}
	return fmt.Sprintf("%d-%d", uint64(1)<<(i-2)+1, uint64(1)<<(i-1))
}

// ulpHist counts ULP distances exactly: a dense array below ulpDense, and a
// map for larger ones. Only an f32 comparison far off can have many
// distinct large distances; if the map would exceed ulpOverflowKeys it
// keys by d>>shift with shift one larger, so memory stays bounded and the
// loss of resolution is reported rather than hidden.
type ulpHist struct {
	dense []uint64 // allocated on first use
	over  map[uint64]uint64
	shift uint
	n     uint64
	max   uint64
}

func (h *ulpHist) add(d uint64) {
	h.n++
	h.max = max(h.max, d)
	if d < ulpDense {
		if h.dense == nil {
			h.dense = make([]uint64, ulpDense)
		}
		h.dense[d]++
		return
	}
	if h.over == nil {
		h.over = make(map[uint64]uint64)
	}
	h.over[d>>h.shift]++
	for len(h.over) > ulpOverflowKeys {
		coarse := make(map[uint64]uint64, len(h.over)/2)
		for k, c := range h.over {
			coarse[k>>1] += c
		}
		h.over = coarse
		h.shift++
	}
}

// quantile is the nearest-rank quantile: the smallest d with at least rank
// distances <= d (rank counted from 1). exact is false when it falls in a
// coarsened overflow bucket; d is then that bucket's lower edge.
func (h *ulpHist) quantile(rank uint64) (d uint64, exact bool) {
	if h.n == 0 {
		return 0, true
	}
	var seen uint64
	for d, c := range h.dense {
		if seen += c; seen >= rank {
			return uint64(d), true
		}
	}
	keys := make([]uint64, 0, len(h.over))
	for k := range h.over {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if seen += h.over[k]; seen >= rank {
			return max(k<<h.shift, ulpDense), h.shift == 0
		}
	}
	return h.max, true
}

// stats summarises the histogram.
func (h *ulpHist) stats() ULPStats {
	s := ULPStats{Count: int(h.n), Max: h.max, Resolution: 1}
	var exact bool
	// nearest rank: ceil(q·n)
	if s.Median, exact = h.quantile((h.n + 1) / 2); !exact {
		s.Resolution = 1 << h.shift
	}
	if s.P99, exact = h.quantile((99*h.n + 99) / 100); !exact {
		s.Resolution = 1 << h.shift
	}
	for d, c := range h.dense {
		s.Hist[ulpBucket(uint64(d))] += int(c)
	}
	for _, c := range h.over {
		s.Hist[NumULPBuckets-1] += int(c)
	}
	return s
}
