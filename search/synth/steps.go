package synth

// everyStepLimit is the size up to which a candidate is compared at every
// captured step; a larger target carries its evidence in its many values,
// and one other step (the last, farthest from step 0) shows a coincidence
// of step 0 at a fraction of the cost.
const everyStepLimit = 64

// everyStep checks candidate v against target t at the target's other
// captured steps: a value that matches step 0 by coincidence does not
// hold there (silu(0) = 0; 1 − σ = 0 at σ = 1 beside a table of zeros; a
// constant 1000 for a timestep of 1000·σ). A candidate made of nothing
// the step changes (parameters, constants) is compared as it is, without
// recomputing it. A target no other step holds passes: there is nothing
// to compare.
func (s *synth) everyStep(v, t *val, tol float64) bool {
	steps := s.tr.Steps()
	if len(steps) < 2 || !s.hasSteps(t) {
		return true
	}
	steps = steps[1:]
	if t.numel() > everyStepLimit {
		steps = steps[len(steps)-1:]
	}
	dep := s.stepDependent(v, map[*val]bool{})
	for _, st := range steps {
		want, ok := s.at(t, st)
		if !ok {
			continue
		}
		got := v.data
		if dep {
			if got, ok = s.at(v, st); !ok {
				continue
			}
		}
		if relRMS(t.format, got, want) > tol {
			return false
		}
	}
	return true
}

// hasSteps reports whether t's values at the other steps are known: a
// boundary captured in the steps, or a target read from one (readAs).
func (s *synth) hasSteps(t *val) bool {
	return t.perStep != nil || stepKey(t.keys) != ""
}

// stepDependent reports whether v's value may change with the step: it
// is, or is computed from, a boundary captured in the steps or a step
// input. seen holds the values already walked.
func (s *synth) stepDependent(v *val, seen map[*val]bool) bool {
	if v == nil || seen[v] {
		return false
	}
	seen[v] = true
	if s.hasSteps(v) {
		return true
	}
	if v.from == nil {
		return false
	}
	for _, a := range v.from.args {
		if s.stepDependent(a, seen) {
			return true
		}
	}
	return false
}

// readAs is target t read another way by f (a part of it, its axes
// moved) as a target of its own, in shape, whose values at the other
// steps are f of t's there: what explains the part is checked at every
// step as what explains t is.
func (s *synth) readAs(t *val, shape []int, f func([]float32) []float32) *val {
	r := &val{shape: shape, data: f(t.data), format: t.format, origin: t.origin}
	if s.hasSteps(t) {
		r.perStep = func(st int) []float32 {
			d, ok := s.at(t, st)
			if !ok || len(d) != len(t.data) {
				return nil
			}
			return f(d)
		}
	}
	return r
}

// part is t's entries [lo, hi) along ax as a target of its own (a join's
// piece), readAs.
func (s *synth) part(t *val, ax, lo, hi int) *val {
	shape := append([]int(nil), t.shape...)
	shape[ax] = hi - lo
	return s.readAs(t, shape, func(d []float32) []float32 {
		return sliceData(&val{shape: t.shape, data: d}, ax, lo, hi)
	})
}
