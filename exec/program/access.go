package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// This file holds what an evaluator that runs the nodes itself
// (search/plan) needs of a runner and a program to do what the interpreter
// does.

// StepEnv is the environment of model call i, as Forward gives it to the
// interpreter: the runner's weights, inputs and constants by value name
// and, in a flow_euler run, the latents xs (xs[k] of role LatentsRole(k);
// nil ones left out) and the timestep σ_i in the
// plan's timestep format (and σ_{i+1} where the program reads the next
// timestep). The runner owns every tensor but the timesteps, which done
// frees. An evaluator that runs the program's nodes itself
// (search/plan) reads the same values as the interpreter this way.
func (r *Runner) StepEnv(i int, xs ...exec.Tensor) (env map[string]exec.Tensor, done func(), err error) {
	env = make(map[string]exec.Tensor, len(r.env)+2)
	for k, v := range r.env {
		env[k] = v
	}
	if r.sigmas == nil {
		return env, func() {}, nil
	}
	if i < 0 || i >= r.Steps() {
		return nil, nil, fmt.Errorf("program: step %d of a run with %d steps", i, r.Steps())
	}
	t, err := r.B.Upload([]float32{r.sigmas[i]}, []int{1}, r.spec.timestep.Out)
	if err != nil {
		return nil, nil, fmt.Errorf("program: step %d: timestep: %w", i, err)
	}
	for k, x := range xs {
		if x != nil {
			env[LatentsValue(k)] = x
		}
	}
	env[stepTimestep] = t
	made := []exec.Tensor{t}
	done = func() {
		for _, x := range made {
			r.B.Free(x)
		}
	}
	// the step inputs a program reads only where it declares them: σ[i+1]
	// in the timestep's format (a mean-flow model's second time) and the
	// call's index i (a module switched by step)
	for _, opt := range []struct {
		name string
		x    float32
		f    precision.Format
	}{{stepNextTimestep, 0, r.spec.timestep.Out}, {stepIndex, float32(i), precision.F32}} {
		if v, ok := r.P.Values[opt.name]; !ok || v.Kind != StepInput {
			continue
		}
		x := opt.x
		if opt.name == stepNextTimestep {
			x = r.sigmas[i+1]
		}
		u, err := r.B.Upload([]float32{x}, []int{1}, opt.f)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("program: step %d: %s: %w", i, opt.name, err)
		}
		env[opt.name] = u
		made = append(made, u)
	}
	return env, done, nil
}

// Views reports whether o's outputs may share storage with its input, so
// that the input must outlive them (the interpreter's rule).
func (o Op) Views() bool { return o.movement() }

// LastUse is the index of the last node that reads temp name (ok false
// for a temp no node reads, and for any other value): the interpreter
// frees the temp after that node.
func (p *Program) LastUse(name string) (i int, ok bool) {
	i, ok = p.lastUse[name]
	return i, ok
}
