package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// oneHotRouted explains t [.., k, E], integers 0 or 1, as a router's
// top-k choice laid one-hot over the E experts (one_hot(argmax) of
// Switch's router), from a [.., E] value of the scope: the rows of an
// identity [E, E] gathered at each route candidate's indices. A row the
// reference cleared (a token over an expert's capacity) matches no
// candidate, and the form fails.
func (s *synth) oneHotRouted(t *val, vals []*val) *val {
	if len(t.shape) < 2 || !t.intType || !zeroOne(t) {
		return nil
	}
	e := t.shape[len(t.shape)-1]
	for _, v := range vals {
		if v.opaque || v.integral() || len(v.shape) == 0 || v.shape[len(v.shape)-1] != e || t.numel()%v.numel() != 0 {
			continue
		}
		rows := v.numel() / e
		k := t.numel() / (rows * e)
		if k < 1 || k >= e {
			continue
		}
		in := s.reshape(v, []int{rows, e})
		if in == nil {
			continue
		}
		var eye *val
		for _, r := range routeExprs(in, nil, k, f32, "") {
			idx, err := s.ev.run(pickOf(r, 1))
			if err != nil || !oneHotOf(idx.data, e, t.data) {
				continue
			}
			if eye == nil {
				eye = s.identity(e)
			}
			g := &expr{op: program.OpGather, args: []*val{eye, s.derive(pickOf(r, 1))}, out: f32, label: "one-hot of " + r.label}
			if w, _ := s.best(t, []*expr{g}); w != nil && slices.Equal(w.data, t.data) {
				return s.reshape(w, t.shape)
			}
		}
	}
	return nil
}

// oneHotOf reports whether oh is idx laid one-hot over e entries.
func oneHotOf(idx []float32, e int, oh []float32) bool {
	if len(oh) != len(idx)*e {
		return false
	}
	for i, x := range idx {
		for j := range e {
			want := float32(0)
			if int(x) == j {
				want = 1
			}
			if oh[i*e+j] != want {
				return false
			}
		}
	}
	return true
}

// identity is the [n, n] identity, a constant the program holds.
func (s *synth) identity(n int) *val {
	s.seq++
	v := &val{shape: []int{n, n}, data: make([]float32, n*n), format: precision.F32, seq: s.seq, origin: fmt.Sprintf("identity%d", n)}
	for i := range n {
		v.data[i*n+i] = 1
	}
	s.em.constant(v, fmt.Sprintf("the %d×%d identity (rows gathered: a one-hot)", n, n))
	return v
}

// maskedWeights are dense routing weights [T, E] made from a 0/1 choice
// of the scope laid over the experts ([T, 1, E] or [T, E]: one expert a
// token) times the chosen expert's weight [T] of the scope; nil where
// the scope holds no such pair.
func (s *synth) maskedWeights(vals []*val, tokens, e int) *val {
	var mask, w *val
	for _, v := range recentFirst(vals) {
		if mask == nil && !v.opaque && v.integral() && v.numel() == tokens*e && len(v.shape) >= 2 && v.shape[len(v.shape)-1] == e && zeroOne(v) {
			mask = v
		}
		if w == nil && !v.opaque && !v.integral() && v.numel() == tokens {
			w = v
		}
	}
	if mask == nil || w == nil {
		return nil
	}
	m2, w2 := s.reshape(mask, []int{tokens, e}), s.reshape(w, []int{tokens, 1})
	if m2 == nil || w2 == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpMul, args: []*val{m2, w2}, out: w.format, label: "the one-hot choice × its weight"})
}

// gatheredRows explains t [.., D] as rows of a matrix [V, D] of the scope
// at an integer value of t's leading shape (maybe scaled, maybe at ids
// plus an offset: fitEmbedding's readings), where the lookup is no call
// of its own (an nn.Embedding subclass whose forward calls the parent's
// lookup, then a child norm).
func (s *synth) gatheredRows(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	lead := t.shape[:len(t.shape)-1]
	for _, ids := range vals {
		if ids.opaque || !ids.integral() || ids.numel() != t.numel()/t.shape[len(t.shape)-1] || !slices.Equal(ids.shape, lead) {
			continue
		}
		for _, m := range vals {
			if isMatrix(m) && m.param && m.shape[1] == t.shape[len(t.shape)-1] {
				if v := s.fitEmbedding(ids, []*val{m}, t); v != nil {
					return v
				}
			}
		}
	}
	return nil
}
