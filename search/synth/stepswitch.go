package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// stepSwitched binds each result of c that its explanation makes at
// the run's first steps while at its last ones c returns one of its
// arguments as it is, its children not called (a module the pipeline
// switches off after a fraction of the steps: GLIGEN's fusers, disabled
// once scheduled sampling ends), to where(i < N, made, argument) on the
// model call's index i. The explanation must hold at every step it can
// be computed at, and the argument at every other step the trace holds
// the result at; the steps it is off at are the run's last ones.
func (s *synth) stepSwitched(c trace.Call, sc *scope, outs map[string]*val) {
	steps := s.tr.Steps()
	if !s.stepped || len(steps) < 2 || !consecutive(steps) {
		return
	}
	for _, p := range c.Tensors {
		v, ok := outs[p.Name]
		if !ok || v.opaque || v.from == nil {
			continue
		}
		tol := tolerance(v.format)
		var arg *val
		first := -1 // the first step the call passes its argument through
		held := true
		for _, st := range steps[1:] {
			want, ok := s.at(v, st)
			if !ok {
				continue // not captured at this step
			}
			if made, ok := s.madeAt(v, st); ok {
				if first >= 0 || relRMS(v.format, made, want) > tol {
					held = false // made after the switch, or not made as at step 0
					break
				}
				continue
			}
			if first < 0 {
				first = st
				arg = s.passedThrough(sc, st, want, v)
			}
			if arg == nil {
				held = false
				break
			}
			if d, ok := s.at(arg, st); !ok || relRMS(v.format, d, want) > tol {
				held = false
				break
			}
		}
		if !held || first < 1 {
			continue
		}
		if w := s.switchedAt(v, arg, first); w != nil {
			outs[p.Name] = w
		}
	}
}

// switchedAt is where(i < n, v's expression, arg), bound to v's
// boundaries.
func (s *synth) switchedAt(v, arg *val, n int) *val {
	made := &val{shape: v.shape, data: v.data, format: v.format, from: v.from, fit: v.fit, seq: v.seq}
	on := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(float64(n) - 0.5), s.stepIndexValue()}, out: f32,
		label: fmt.Sprintf("%d − ½ − i: > 0 for the first %d steps", n, n)})
	if on == nil {
		return nil
	}
	w := s.derive(&expr{op: program.OpWhere, args: []*val{on, made, arg}, out: v.format,
		label: fmt.Sprintf("made for the first %d steps, then %s as it is", n, arg.origin)})
	if w == nil || relRMS(v.format, w.data, v.data) != 0 {
		return nil
	}
	return adopt(v, w)
}

// passedThrough is the argument of the scope equal to want at step st
// (the call returns it as it is), nil when none is.
func (s *synth) passedThrough(sc *scope, st int, want []float32, v *val) *val {
	for _, a := range sc.vals {
		if !sc.arg[a] || !slices.Equal(a.shape, v.shape) {
			continue
		}
		if d, ok := s.at(a, st); ok && relRMS(v.format, d, want) <= tolerance(v.format) {
			return a
		}
	}
	return nil
}

// madeAt is v's expression computed at step st from its arguments there
// (not v's own capture); false where an argument is not held at st (a
// child the call did not make at that step).
func (s *synth) madeAt(v *val, st int) ([]float32, bool) {
	if v.from == nil {
		return nil, false
	}
	u := &val{shape: v.shape, data: v.data, format: v.format, from: v.from}
	d := s.compute(u, st)
	return d, d != nil
}

// stepIndexValue is the model call's index i as a step input (f32 [1]),
// declared on first use.
func (s *synth) stepIndexValue() *val {
	if s.stepIndex == nil {
		s.stepIndex = &val{shape: []int{1}, data: []float32{0}, format: f32,
			perStep: func(step int) []float32 { return []float32{float32(step)} }}
		s.em.bindLeaf(s.stepIndex, program.StepInput, program.StepIndex, "index")
	}
	return s.stepIndex
}

// consecutive reports whether steps are 0, 1, …, n−1 (the sampler's
// order, so a step's number is its model call's index).
func consecutive(steps []int) bool {
	for i, st := range steps {
		if st != i {
			return false
		}
	}
	return true
}
