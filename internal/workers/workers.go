// Package workers runs goroutines whose panics reach the goroutine that
// waits for them: a panic in a worker would otherwise end the process from
// that worker, past every recover (the CLI's included), with Go's own exit
// code and a goroutine dump.
package workers

import (
	"fmt"
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
