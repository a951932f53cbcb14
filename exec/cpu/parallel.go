package cpu

import "github.com/zflow/zflow/internal/workers"

// parallel calls fn on [lo, hi) ranges that cover [0, n), at most one range
// per worker and none smaller than grain (so small ops run inline).
func (b *Backend) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	parts := min(b.workers, (n+grain-1)/max(grain, 1))
	if parts <= 1 {
		fn(0, n)
		return
	}
	var g workers.Group
	step := (n + parts - 1) / parts
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		g.Go(func() { fn(lo, hi) })
	}
	g.Wait()
}
