package reports

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestULPBuckets(t *testing.T) {
	cases := []struct {
		d      uint64
		bucket int
	}{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 3}, {5, 4}, {8, 4}, {9, 5}, {512, 10}, {513, 11}, {1024, 11}, {1025, 12}, {1 << 40, 12}}
	for _, c := range cases {
		if got := ulpBucket(c.d); got != c.bucket {
			t.Errorf("ulpBucket(%d) = %d, want %d", c.d, got, c.bucket)
		}
	}
	labels := []string{"0", "1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65-128", "129-256", "257-512", "513-1024", ">1024"}
	for i, want := range labels {
		if got := ULPBucketLabel(i); got != want {
			t.Errorf("ULPBucketLabel(%d) = %q, want %q", i, got, want)
		}
	}
}

// TestULPHistExact: below the overflow cap every quantile is exact, dense
// or not.
func TestULPHistExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var h ulpHist
	var all []uint64
	for range 50000 {
		d := rng.Uint64N(1 << 20) // mixes dense and overflow distances
		if rng.IntN(2) == 0 {
			d %= 40
		}
		h.add(d)
		all = append(all, d)
	}
	slices.Sort(all)
	s := h.stats()
	n := len(all)
	if s.Resolution != 1 || s.Median != all[(n+1)/2-1] || s.P99 != all[(99*n+99)/100-1] || s.Max != all[n-1] || s.Count != n {
		t.Errorf("stats %+v; want median %d p99 %d max %d", s, all[(n+1)/2-1], all[(99*n+99)/100-1], all[n-1])
	}
}

// TestULPHistCoarse: past the cap the overflow histogram coarsens, says so
// in Resolution, and its quantiles stay within one bucket below the truth.
func TestULPHistCoarse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var h ulpHist
	var all []uint64
	for range 4 * ulpOverflowKeys {
		d := ulpDense + rng.Uint64N(1<<32)
		h.add(d)
		all = append(all, d)
	}
	if len(h.over) > ulpOverflowKeys {
		t.Fatalf("overflow kept %d keys", len(h.over))
	}
	slices.Sort(all)
	s := h.stats()
	n := len(all)
	if s.Resolution <= 1 {
		t.Fatalf("resolution %d after %d distinct distances", s.Resolution, n)
	}
	for _, q := range []struct {
		name      string
		got, want uint64
	}{{"median", s.Median, all[(n+1)/2-1]}, {"p99", s.P99, all[(99*n+99)/100-1]}} {
		if q.got > q.want || q.want-q.got >= s.Resolution {
			t.Errorf("%s %d, true %d, resolution %d", q.name, q.got, q.want, s.Resolution)
		}
	}
	if s.Max != all[n-1] || s.Hist[NumULPBuckets-1] != n {
		t.Errorf("max %d (want %d), last bucket %d (want %d)", s.Max, all[n-1], s.Hist[NumULPBuckets-1], n)
	}
}
