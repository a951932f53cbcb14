package synth

import (
	"github.com/zflow/zflow/exec/program"
)

// maxAddends bounds the values peeledAdd tries as the known term.
const maxAddends = 8

// peeledAdd explains t as a + b: b a value of the scope with t's elements
// (a learned position table, an embedding's rows looked up by position
// ids), a an expression glue's first forms find for t − b (the patches
// joined after a class token, then the table added: a ViT's embeddings).
// Tried once every other form failed on t; never inside itself, and only
// over the first forms (no attention is searched for t − b).
func (s *synth) peeledAdd(t *val, sc *scope, vals []*val) *val {
	if s.peeling || len(t.shape) < 2 || t.integral() {
		return nil
	}
	s.peeling = true
	defer func() { s.peeling = false }()
	tol := tolerance(t.format)
	for _, b := range s.addends(t, vals) {
		rest := s.minus(t, b)
		a := s.glueIn(rest, sc)
		if a == nil || a.opaque {
			continue
		}
		w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "a value added to an expression"}})
		if w != nil && relRMS(t.format, w.data, t.data) <= tol && s.everyStep(w, t, tol) {
			return w
		}
	}
	return nil
}

// addends are the values peeledAdd tries as the known term of t = a + b,
// in t's shape: the scope's parameters of t's elements first (tables),
// then its other values of t's elements, most recent first, skipping
// values that are t itself to the format's tolerance (a − nothing).
func (s *synth) addends(t *val, vals []*val) []*val {
	tol := tolerance(t.format)
	var params, others []*val
	for _, v := range vals {
		if v.opaque || v.integral() || v.numel() != t.numel() || relRMS(t.format, v.data, t.data) <= tol {
			continue
		}
		r := s.reshape(v, t.shape)
		if r == nil {
			continue
		}
		if v.param {
			params = append(params, r)
		} else {
			others = append(others, r)
		}
	}
	out := append(params, others...)
	if len(out) > maxAddends {
		out = out[:maxAddends]
	}
	return out
}

// minus is t − b as a target of its own, at every step t is known at.
func (s *synth) minus(t, b *val) *val {
	sub := func(d, e []float32) []float32 {
		out := make([]float32, len(d))
		for i := range d {
			out[i] = d[i] - e[i]
		}
		return out
	}
	r := &val{shape: t.shape, data: sub(t.data, b.data), format: t.format, origin: t.origin + " − " + b.origin, reshapedFrom: true}
	if s.hasSteps(t) {
		r.perStep = func(st int) []float32 {
			d, ok := s.at(t, st)
			e, ok2 := s.at(b, st)
			if !ok || !ok2 || len(d) != len(e) {
				return nil
			}
			return sub(d, e)
		}
	}
	return r
}
