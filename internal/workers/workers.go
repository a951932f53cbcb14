// Package workers runs goroutines whose panics reach the goroutine that
// waits for them: a panic in a worker would otherwise end the process from
// that worker, past every recover (the CLI's included), with Go's own exit
// code and a goroutine dump.
package workers

import (
	"fmt"
	"runtime"
	"sync"
)

// Group is a sync.WaitGroup whose Wait re-panics with the first worker's
// panic. The zero value is ready to use.
type Group struct {
	wg   sync.WaitGroup
	once sync.Once
	p    any
}

// Go runs fn in a new goroutine.
func (g *Group) Go(fn func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				g.once.Do(func() { g.p = r })
			}
		}()
		fn()
	}()
}

// Wait waits for every goroutine Go started, then panics if one did.
func (g *Group) Wait() {
	g.wg.Wait()
	if g.p != nil {
		panic(fmt.Sprintf("in a worker goroutine: %v", g.p))
	}
}

// Split runs fn on [0, n) cut into one contiguous range per CPU (fewer
// for a small n), each in its own goroutine, and waits for them.
func Split(n int, fn func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 {
		fn(0, n)
		return
	}
	var g Group
	for k := range w {
		lo, hi := k*n/w, (k+1)*n/w
		g.Go(func() { fn(lo, hi) })
	}
	g.Wait()
}
