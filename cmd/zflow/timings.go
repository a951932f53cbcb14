package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
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
	// ops: each op kind's wall time over the run (--timings-ops), the
	// backend waited for before and after each node.
	ops map[string]*opTime
}

type opTime struct {
	Op    string  `json:"op"`
	Count int     `json:"count"`
	MS    float64 `json:"ms"`
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
	// Ops (--timings-ops): each op kind's time, most first; regions a
	// backend fused run as one and are not in it.
	Ops []opTime `json:"ops,omitempty"`
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

// runNode is an interpreter's Run hook that times node n (--timings-ops):
// the backend is waited for before and after, so each node's time is its
// own work (and the queue no longer overlaps: the steps get slower).
func (t *stepTimer) runNode(b exec.Backend) func(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
	t.ops = map[string]*opTime{}
	return func(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
		if err := t.wait(); err != nil {
			return nil, err
		}
		start := time.Now()
		outs, err := program.RunNode(b, n, in)
		if err == nil {
			err = t.wait()
		}
		o := t.ops[n.Op.String()]
		if o == nil {
			o = &opTime{Op: n.Op.String()}
			t.ops[o.Op] = o
		}
		o.Count++
		o.MS += float64(time.Since(start).Microseconds()) / 1e3
		return outs, err
	}
}

// opList is the op kinds' times, most first.
func (t *stepTimer) opList() []opTime {
	var out []opTime
	for _, o := range t.ops {
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MS > out[j].MS || out[i].MS == out[j].MS && out[i].Op < out[j].Op })
	return out
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
	d := timingsDoc{Format: "zflow-timings", Version: 1, Backend: t.b.Name(), Synchronized: t.sync != nil, Steps: t.steps, Ops: t.opList()}
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
