package synth

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// val is a tensor the search knows at step 0: a captured boundary, a
// parameter, a request input, or a value a candidate expression computed
// from them (teacher forced: every captured value is the reference's own).
type val struct {
	shape  []int
	data   []float32
	format precision.Format
	// origin is the boundary it was captured at ("<module>/<port>"), the
	// parameter path, or "" for a computed value.
	origin string
	// keys are the trace keys of the boundaries the value is (taps).
	keys []string
	// name is the program value it is bound to once emitted ("" before).
	name string
	// from is how a computed value is made (nil for a leaf value).
	from *expr
	// opaque: a captured value no expression explains; a program that
	// reads it takes it from the trace as a constant. unsearched: opaque
	// because the search's time ran out first (Options.Hurry).
	opaque     bool
	unsearched bool
	iota       bool // positions 0…n−1: a constant of the request's shape
	// fit is what a fitted leaf found about the value (its activation, its
	// norm): read by the factor readers.
	fit *leafFit
	seq int // creation order within the search (recent = larger)
	// param: a parameter of the model (a weight), not a computed value.
	param bool
	// intType: captured in an integer dtype (whole numbers by type, not
	// only by value, as a router's indices are and its weights of one are
	// not).
	intType bool
	// used: a later call of the scope reads it (so attention does not).
	used bool
	// request: a value the pipeline gives the model (its timestep made
	// from σ), not one the model computes.
	request bool
	// perStep gives the value at each other step where no key or
	// expression does: a step input (σ_i), or a target read from a
	// captured one another way (readAs: a join's piece, its axes moved).
	perStep func(step int) []float32
	// reshapedFrom: a target read in another value's shape (glue's
	// reshaped form), not to be reshaped again.
	reshapedFrom bool
	// perHead: a RoPE table [S, H, r] of one row per position and head
	// (H heads, each rotated by its own angles: learned per-head
	// frequencies), made from a captured [S, H, r/2] table.
	perHead int
	// samples: a RoPE table [B·S, r] holding one table per sample (B =
	// samples, the samples' rows end to end), each sample's rows turned
	// by its own.
	samples int
	// constNote: a constant made by the search (an index pattern of a
	// candidate that may lose), declared with this note only when a
	// program first reads it
	constNote string
	// scalar: a scalar constant of the search (s.constant), declared
	// only when a program first reads it
	scalar bool
	// beforeLoop: the call outside the sampling loop whose result this
	// model argument is (an adapter's features): the forms may read it,
	// and the program takes it from the trace, saying so
	beforeLoop string
}

func (v *val) numel() int { return exec.Numel(v.shape) }

func (v *val) String() string {
	if v.origin != "" {
		return v.origin
	}
	if v.from != nil {
		return v.from.desc()
	}
	return fmt.Sprintf("value%v", v.shape)
}

// expr is a candidate computation: one node of the vocabulary over
// values. Its result is a val (data computed eagerly, at step 0).
type expr struct {
	op    program.Op
	attrs program.Attrs
	args  []*val // nil entries: absent optional inputs
	out   precision.Format
	label string     // what it is, for evidence ("silu", "causal", ...)
	pick  int        // which result of a multi-result op
	math  exec.Math  // math variants (the reference's exp, its division)
	round exec.Round // internal rounding points (an activation composed of primitives)
	// shapes: every result's shape (multi-result ops), set by run.
	shapes [][]int
	// node: the expression of result 0 when this is another result of
	// the same node (one node, several values); sibling memoises them.
	node    *expr
	sibling map[int]*expr
}

func (e *expr) desc() string {
	s := e.op.String()
	if e.label != "" {
		s += "(" + e.label + ")"
	}
	return s
}

// relRMS is b's rel-RMS error of a compared in f (precision.RelRMS:
// mask-sized values compared apart; 0 when both are zero), +Inf on a
// length mismatch.
func relRMS(f precision.Format, a, b []float32) float64 {
	r, err := precision.RelRMS(f, a, b)
	if err != nil {
		return math.Inf(1)
	}
	return r
}

// evaluator runs single nodes on the CPU reference backend.
type evaluator struct {
	b     exec.Backend
	evals int
	// ctx ends the search: once it is done every run fails at once, so a
	// call's candidates stop within one evaluation of the budget.
	ctx context.Context
}

// run computes e's result at step 0 from its arguments' data.
func (ev *evaluator) run(e *expr) (*val, error) {
	if ev.ctx != nil {
		if err := ev.ctx.Err(); err != nil {
			return nil, err
		}
	}
	ins := make([]exec.Tensor, len(e.args))
	defer func() {
		for _, t := range ins {
			if t != nil {
				ev.b.Free(t)
			}
		}
	}()
	for i, a := range e.args {
		if a == nil {
			continue
		}
		t, err := exec.Borrow(ev.b, a.data, a.shape, a.format) // read in place for this run only (the result is downloaded, a copy)
		if err != nil {
			return nil, err
		}
		ins[i] = t
	}
	n := program.Node{Op: e.op, Attrs: e.attrs, Spec: exec.Spec{Out: e.out, Round: e.round, Math: e.math}}
	ev.evals++
	outs, err := program.RunNode(ev.b, &n, ins)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, t := range outs {
			ev.b.Free(t)
		}
	}()
	if e.pick < 0 || e.pick >= len(outs) {
		return nil, fmt.Errorf("%s: result %d of %d", e.op, e.pick, len(outs))
	}
	e.shapes = e.shapes[:0]
	for _, t := range outs {
		e.shapes = append(e.shapes, slices.Clone(t.Shape()))
	}
	o := outs[e.pick]
	data, err := ev.b.Download(o)
	if err != nil {
		return nil, err
	}
	return &val{shape: slices.Clone(o.Shape()), data: data, format: o.Format(), from: e}, nil
}

// score is a candidate's error against a target, +Inf when it cannot be
// computed or has another number of elements.
func (ev *evaluator) score(e *expr, target *val) (*val, float64) {
	v, err := ev.run(e)
	if err != nil || v.numel() != target.numel() {
		return nil, math.Inf(1)
	}
	return v, relRMS(target.format, v.data, target.data)
}
