package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
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
	if v, ok := r.P.Values[stepNextTimestep]; !ok || v.Kind != StepInput {
		return env, func() { r.B.Free(t) }, nil
	}
	// σ[i+1], in the timestep's format (a mean-flow model's second time)
	n, err := r.B.Upload([]float32{r.sigmas[i+1]}, []int{1}, r.spec.timestep.Out)
	if err != nil {
		r.B.Free(t)
		return nil, nil, fmt.Errorf("program: step %d: next timestep: %w", i, err)
	}
	env[stepNextTimestep] = n
	return env, func() { r.B.Free(t); r.B.Free(n) }, nil
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
