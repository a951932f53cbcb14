// Package tempfiles creates the temporary files that zflow's writers
// rename into place, and remembers them, so that a run interrupted
// (SIGINT, SIGTERM) can remove every one it left instead of leaving
// ".X.tmp-*" files of a trace's size behind.
package tempfiles

import (
	"os"
	"sync"
)

var (
	mu   sync.Mutex
	live = map[string]bool{}
)

// Create is os.CreateTemp, remembering the file until Done.
func Create(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err == nil {
		mu.Lock()
		live[f.Name()] = true
		mu.Unlock()
	}
	return f, err
}

// Done forgets name: it was renamed into place or removed.
func Done(name string) {
	mu.Lock()
	delete(live, name)
	mu.Unlock()
}

// RemoveAll removes every file Create made that is not Done, and returns
// how many it removed.
func RemoveAll() int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for name := range live {
		if os.Remove(name) == nil {
			n++
		}
		delete(live, name)
	}
	return n
}
