package sampler

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/trace"
)

// Loop is a sampler loop read off a trace by values alone: the call that
// is repeated once per step, the port that receives x (at the first step,
// a request input unchanged), the port that returns the velocity (x's
// shape), the port that receives the timestep, and the σ schedule.
type Loop struct {
	Model    string // module of the per-step call
	Latents  string // its input port that receives x
	Velocity string // its output port of x's shape
	Timestep string // its input port proportional to σ ("" when none)
	Noise    string // the request input equal to x at the first step
	Sigmas   string // the request input holding σ[0..steps]
	Final    string // the request output that is x after the last step ("" when absent)
	Steps    []int
	// TimestepRatio is timestep / σ at the call (constant over the steps
	// where σ ≠ 0): what the caller passes the model.
	TimestepRatio float64
}

// FindLoop locates the sampler loop. It fails, naming what is missing,
// when the trace has no steps or no call takes a request input unchanged.
func FindLoop(tr *trace.Trace) (*Loop, error) {
	steps := tr.Steps()
	if len(steps) == 0 {
		return nil, fmt.Errorf("%s: no sampler steps in the trace (a forward-only capture?)", tr.Path)
	}
	l := &Loop{Steps: steps}
	if err := l.findModel(tr); err != nil {
		return nil, err
	}
	if err := l.findSigmas(tr); err != nil {
		return nil, err
	}
	l.findFinal(tr)
	return l, nil
}

// findModel: a root call of the first step with an input port holding a
// request input bit for bit, and an output port of that shape.
func (l *Loop) findModel(tr *trace.Trace) error {
	first := l.Steps[0]
	for _, c := range tr.Tree().Calls() {
		if c.Parent != nil || c.Step == nil || *c.Step != first {
			continue
		}
		for _, p := range c.Tensors {
			if trace.IsResult(p.Name) {
				continue
			}
			name, ok := sameAsInput(tr, p.Key)
			if !ok {
				continue
			}
			in, _ := tr.Info(p.Key)
			for _, q := range c.Tensors {
				if oi, _ := tr.Info(q.Key); trace.IsResult(q.Name) && equalShape(oi.Shape, in.Shape) {
					l.Model, l.Latents, l.Velocity, l.Noise = c.Module, p.Name, q.Name, name
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%s: no call of step %d takes a request input unchanged and returns its shape: cannot find the sampler's model call", tr.Path, first)
}

// findSigmas: a 1-D request input of steps+1 values to which the model's
// timestep port is proportional.
func (l *Loop) findSigmas(tr *trace.Trace) error {
	n := len(l.Steps) + 1
	for _, name := range sortedNames(tr.Manifest.Inputs) {
		key := tr.Manifest.Inputs[name]
		in, _ := tr.Info(key)
		if len(in.Shape) != 1 || in.Shape[0] != n || !in.DType.IsFloat() {
			continue
		}
		sig, err := floats(tr, key)
		if err != nil {
			return err
		}
		port, ratio := l.timestepPort(tr, sig)
		if port == "" {
			continue
		}
		l.Sigmas, l.Timestep, l.TimestepRatio = name, port, ratio
		return nil
	}
	return fmt.Errorf("%s: no request input of %d values matches the model's timestep across steps: cannot find σ", tr.Path, n)
}

// timestepPort finds the input port of the model call whose single value
// per step is a constant multiple of σ[i], and that multiple.
func (l *Loop) timestepPort(tr *trace.Trace, sigmas []float32) (string, float64) {
	first, _ := l.Call(tr, l.Steps[0])
	for _, p := range first.Tensors {
		if trace.IsResult(p.Name) || p.Name == l.Latents {
			continue
		}
		ratio, ok := math.NaN(), true
		for i, st := range l.Steps {
			c, found := l.Call(tr, st)
			key, has := c.Tensors.Key(p.Name)
			if !found || !has {
				ok = false
				break
			}
			v, err := floats(tr, key)
			if err != nil || len(v) == 0 || !allEqual(v) {
				ok = false
				break
			}
			if sigmas[i] == 0 {
				continue
			}
			r := float64(v[0]) / float64(sigmas[i])
			if math.IsNaN(ratio) {
				ratio = r
			} else if math.Abs(r-ratio) > 1e-2*math.Abs(ratio) { // bf16 holds σ to 3 digits
				ok = false
			}
		}
		if ok && !math.IsNaN(ratio) {
			return p.Name, ratio
		}
	}
	return "", 0
}

func (l *Loop) findFinal(tr *trace.Trace) {
	last, _ := l.Call(tr, l.Steps[len(l.Steps)-1])
	key, _ := last.Tensors.Key(l.Latents)
	want, _ := tr.Info(key)
	for _, name := range sortedNames(tr.Manifest.Outputs) {
		if in, _ := tr.Info(tr.Manifest.Outputs[name]); equalShape(in.Shape, want.Shape) {
			l.Final = name
			return
		}
	}
}

// Call returns the model call of a step.
func (l *Loop) Call(tr *trace.Trace, step int) (trace.Call, bool) {
	calls, _ := tr.Tree().Select(trace.Filter{Step: &step, Module: l.Model})
	for _, c := range calls {
		if c.Parent == nil && c.Ordinal == 0 && c.Module == l.Model {
			return c, true
		}
	}
	return trace.Call{}, false
}

// sameAsInput reports which request input holds exactly the bytes of key.
func sameAsInput(tr *trace.Trace, key string) (string, bool) {
	in, err := tr.Info(key)
	if err != nil {
		return "", false
	}
	for _, name := range sortedNames(tr.Manifest.Inputs) {
		ik := tr.Manifest.Inputs[name]
		ii, _ := tr.Info(ik)
		if ii.DType != in.DType || !equalShape(ii.Shape, in.Shape) || in.Len() < 2 {
			continue
		}
		a, err1 := tr.Tensor(key)
		b, err2 := tr.Tensor(ik)
		if err1 == nil && err2 == nil && bytes.Equal(a.Bytes(), b.Bytes()) {
			return name, true
		}
	}
	return "", false
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func allEqual(v []float32) bool {
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return true
}

// floats reads a tensor as float32 values.
func floats(tr *trace.Trace, key string) ([]float32, error) {
	t, err := tr.Tensor(key)
	if err != nil {
		return nil, err
	}
	return t.Float32()
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
