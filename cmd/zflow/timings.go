package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/zflow/zflow/exec"
)

// syncer is a backend whose ops are queued (CUDA): Sync waits for them.
type syncer interface{ Sync() error }

// stepTimer measures the wall time of each model call of a run (the
// sampler's update included), waiting for the backend at each end, so a
// step's time is its work, not the time to queue it.
type stepTimer struct {
	b     exec.Backend
	sync  syncer // nil: the backend finishes each op before returning
	last  time.Time
	steps []stepTime
	err   error
}

type stepTime struct {
	Step int     `json:"step"`
	MS   float64 `json:"ms"`
}

// timingsDoc is the --timings file of zflow generate, version 1.
type timingsDoc struct {
	Format  string `json:"format"` // "zflow-timings"
	Version int    `json:"version"`
	Backend string `json:"backend"`
	// Synchronized: the backend was synchronised at each step's ends; false
	// for a backend whose ops complete before they return (cpu).
	Synchronized bool       `json:"synchronized"`
	Steps        []stepTime `json:"steps"`
	TotalMS      float64    `json:"total_ms"` // the steps summed
}

// newStepTimer waits for the work queued so far (the uploads) and starts
// the clock.
func newStepTimer(b exec.Backend) (*stepTimer, error) {
	t := &stepTimer{b: b}
	t.sync, _ = b.(syncer)
	if err := t.wait(); err != nil {
		return nil, fmt.Errorf("--timings: before the first step: %w", err)
	}
	t.last = time.Now()
	return t, nil
}

func (t *stepTimer) wait() error {
	if t.sync == nil {
		return nil
	}
	return t.sync.Sync()
}

// lap ends step i (called from the run's progress callback); the first
// error is kept for err.
func (t *stepTimer) lap(i int) {
	if t.err != nil {
		return
	}
	if err := t.wait(); err != nil {
		t.err = fmt.Errorf("--timings: after step %d: %w", i, err)
		return
	}
	now := time.Now()
	t.steps = append(t.steps, stepTime{Step: i, MS: float64(now.Sub(t.last).Microseconds()) / 1e3})
	t.last = now
}

// wrap returns a progress callback that ends a step, then calls next.
func (t *stepTimer) wrap(next func(done, total int), info io.Writer) func(done, total int) {
	return func(done, total int) {
		t.lap(done - 1)
		if t.err == nil {
			fmt.Fprintf(info, "generate: step %d of %d: %.2f ms\n", done-1, total, t.steps[len(t.steps)-1].MS)
		}
		if next != nil {
			next(done, total)
		}
	}
}

// write stores the timings at path (atomically).
func (t *stepTimer) write(path string) error {
	d := timingsDoc{Format: "zflow-timings", Version: 1, Backend: t.b.Name(), Synchronized: t.sync != nil, Steps: t.steps}
	for _, s := range t.steps {
		d.TotalMS += s.MS
	}
	d.TotalMS = math.Round(d.TotalMS*1e3) / 1e3 // µs, as the steps
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, append(data, '\n')); err != nil {
		return fmt.Errorf("--timings %s: %w", path, err)
	}
	return nil
}
