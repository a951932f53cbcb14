package precision

import (
	"fmt"
	"runtime"
	"sync"
)

// parallelMin is the slice length below which splitting across cores costs
// more than it saves (goroutine start-up is a few microseconds).
const parallelMin = 1 << 18

// parallel runs fn over [0, n) in contiguous pieces, one per core when n is
// large, inline otherwise. Pieces are multiples of 64 elements so that no
// two goroutines write the same cache line.
func parallel(n int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < parallelMin || workers == 1 {
		fn(0, n)
		return
	}
	piece := (n/workers + 63) &^ 63
	// A worker's panic is carried to the caller (as github.com/zflow/zflow/internal/workers
	// does; precision is a leaf and imports nothing of zflow).
	var wg sync.WaitGroup
	var once sync.Once
	var caught any
	for lo := 0; lo < n; lo += piece {
		hi := min(lo+piece, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { caught = r })
				}
			}()
			fn(lo, hi)
		}()
	}
	wg.Wait()
	if caught != nil {
		panic(fmt.Sprintf("in a worker goroutine: %v", caught))
	}
}
