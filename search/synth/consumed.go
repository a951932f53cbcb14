package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// consuming prefers, over w (an explanation of target within its
// tolerance), one that also reads a captured result of a call of the
// scope that nothing in the scope reads: the reference called that module
// and its result went somewhere, so an explanation that leaves it unused
// is evidence against itself. A contribution under the format's tolerance
// (a mixture's output, small with random weights, added to a bf16
// residual) is otherwise dropped silently, and the program then computes
// an output that does not depend on a module the reference's does.
// The alternative, w plus the result (or plus a multiple of it), wins
// where it fits at least as well as w, at every step; w otherwise. A
// result k times target's size (k blocks along its leading axis, as
// experts run over the tokens repeated once per expert) enters as its
// blocks summed (view(k, n, d).sum(0)).
func (s *synth) consuming(w, target *val, sc *scope) *val {
	tol := tolerance(target.format)
	best := relRMS(target.format, w.data, target.data)
	for {
		var alt *val
		altErr := best
		for _, d := range s.unread(w, target, sc) {
			if k := d.numel() / target.numel(); k > 1 {
				// k blocks of target's size along its leading axis,
				// summed (the experts' rows, one block per expert)
				last := d.shape[len(d.shape)-1]
				d = s.blockSum(s.reshape(d, []int{d.numel() / last, last}), k, target.format)
				if d == nil {
					continue
				}
			}
			for _, v := range s.plusResult(w, d, target) {
				if v == nil {
					continue
				}
				if e := relRMS(target.format, v.data, target.data); e <= tol && e <= altErr && (alt == nil || e < altErr) && s.everyStep(v, target, tol) {
					alt, altErr = v, e
				}
			}
			if alt != nil {
				break // the most recent result that fits
			}
		}
		if alt == nil {
			return w
		}
		w, best = alt, altErr
	}
}

// plusResult are w + d and w + c·d (c fitted), d read in target's shape.
func (s *synth) plusResult(w, d, target *val) []*val {
	r := s.reshape(d, target.shape)
	if r == nil || !slices.Equal(w.shape, target.shape) {
		return nil
	}
	out := []*val{s.derive(&expr{op: program.OpAdd, args: []*val{w, r}, out: target.format, label: "add"})}
	rest := make([]float32, len(target.data))
	for k := range rest {
		rest[k] = target.data[k] - w.data[k]
	}
	if c, ok := fitScalar(r, &val{data: rest, format: target.format, shape: target.shape}); ok && c != 1 {
		if scaled := s.derive(&expr{op: program.OpMul, args: []*val{r, s.constant(c)}, out: target.format, label: "scaled"}); scaled != nil {
			out = append(out, s.derive(&expr{op: program.OpAdd, args: []*val{w, scaled}, out: target.format, label: "scaled residual"}))
		}
	}
	return out
}

// unread are the scope's results of its calls, most recent first, with
// target's last axis and its number of elements or a multiple of it, that
// neither w nor any value the scope holds reads.
func (s *synth) unread(w, target *val, sc *scope) []*val {
	in := map[*val]bool{}
	for _, v := range sc.vals {
		in[v] = true
	}
	// what the expressions read, down to the scope's values and captured
	// boundaries (whose own expressions were searched before, over values
	// of their own scopes)
	read := map[*val]bool{}
	var walk func(e *expr)
	walk = func(e *expr) {
		if e == nil {
			return
		}
		for _, a := range e.args {
			if a != nil && !read[a] {
				read[a] = true
				if !in[a] && a.origin == "" {
					walk(a.from)
				}
			}
		}
		walk(e.node)
	}
	walk(w.from)
	for _, v := range sc.vals {
		if !sc.own[v] && !sc.arg[v] {
			walk(v.from) // the arguments the scope's calls were given
		}
	}
	last := func(v *val) int { return v.shape[len(v.shape)-1] }
	var out []*val
	for _, v := range recentFirst(sc.vals) {
		if !sc.own[v] || read[v] || v == w || v.used || v.opaque || v.param || v.origin == "" ||
			len(v.shape) == 0 || len(target.shape) == 0 || target.numel() == 0 || v.numel()%target.numel() != 0 || last(v) != last(target) {
			continue
		}
		out = append(out, v)
	}
	return out
}
