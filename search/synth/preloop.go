package synth

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// beforeLoop explains the calls a pipeline makes once, before its sampling
// loop, whose results the model reads at every step (a T2I adapter's
// features): each such call is read like a model call, its arguments bound
// to the request's inputs, and the model arguments it made (drive's
// beforeLoop targets) become its results, times the constant the pipeline
// scales them by. The program then makes them from the request; they are
// step-invariant, so a run makes them once (program.Memo). A call that
// cannot be read leaves its targets as they were: taken from the trace,
// and named.
func (s *synth) beforeLoop(d *drive) error {
	made := map[string][]string{} // a call's module → the model arguments it made
	for _, port := range slices.Sorted(maps.Keys(d.args)) {
		if v := d.args[port]; v.beforeLoop != "" {
			made[v.beforeLoop] = append(made[v.beforeLoop], port)
		}
	}
	if len(made) == 0 {
		return nil
	}
	var pool []*val
	for _, v := range valuesInOrder(d.args) {
		if v.beforeLoop == "" {
			pool = append(pool, v)
		}
	}
	for _, c := range s.tr.Manifest.Calls {
		ports := made[c.Module]
		if c.Step != nil || c.Parent != nil || len(ports) == 0 {
			continue
		}
		args, err := s.chainedArgs(c, pool, func(target *val) *val { return s.requestFor(d, target) })
		if err != nil {
			if s.logf != nil {
				s.logf("synth: the call %s before the loop is not read: %v", c.Module, err)
			}
			continue
		}
		s.callsTotal += subtreeSize(s.tr, c)
		outs, err := s.call(c, args)
		if err != nil {
			return err
		}
		results := valuesInOrder(outs)
		for _, port := range ports {
			target := d.args[port]
			if v := s.scaledResult(target, results); v != nil {
				d.args[port] = v
			}
		}
		pool = append(pool, results...)
	}
	return nil
}

// scaledResult is the result of results that, times one constant (1, or
// a pipeline's conditioning scale), holds target within its format's
// tolerance, made in target's shape and carrying its taps; nil where none
// does or the one that does is not computed.
func (s *synth) scaledResult(target *val, results []*val) *val {
	tol := tolerance(target.format)
	for _, r := range results {
		if r == nil || r.opaque || r.numel() != target.numel() {
			continue
		}
		c, ok := scaleOf(r.data, target.data)
		if !ok {
			continue
		}
		v := s.reshape(r, target.shape)
		if c != 1 {
			v = s.derive(&expr{op: program.OpMul, args: []*val{v, s.constant(float64(c))}, out: target.format, label: fmt.Sprintf("×%g, the conditioning scale", c)})
		}
		if v == nil || relRMS(target.format, v.data, target.data) > tol {
			continue
		}
		return adopt(target, v)
	}
	return nil
}

// scaleOf is the c (float32) minimising |c·a − b|, snapped to 1 where 1
// does as well; ok false where a or b is all zero or c is not finite.
func scaleOf(a, b []float32) (float32, bool) {
	var ab, aa float64
	for i, x := range a {
		ab += float64(x) * float64(b[i])
		aa += float64(x) * float64(x)
	}
	if aa == 0 || ab == 0 {
		return 0, false
	}
	c := ab / aa
	if math.IsInf(c, 0) || math.IsNaN(c) {
		return 0, false
	}
	if math.Abs(c-1) < 1e-6 {
		return 1, true
	}
	return float32(c), true
}
