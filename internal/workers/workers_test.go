package workers

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestGroup: every worker runs; a worker's panic reaches Wait's caller.
func TestGroup(t *testing.T) {
	var g Group
	var n atomic.Int64
	for range 8 {
		g.Go(func() { n.Add(1) })
	}
	g.Wait()
	if n.Load() != 8 {
		t.Errorf("%d of 8 workers ran", n.Load())
	}
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "in a worker goroutine: boom") {
			t.Errorf("recovered %v", r)
		}
	}()
	var h Group
	h.Go(func() { panic("boom") })
	h.Go(func() {})
	h.Wait()
	t.Error("Wait returned after a worker panicked")
}

// TestSplit: every index of [0, n) is given to exactly one call, for n
// below, at and above the number of CPUs.
func TestSplit(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 1000} {
		seen := make([]atomic.Int32, n)
		Split(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Errorf("n %d: index %d given %d times", n, i, c)
			}
		}
	}
}
