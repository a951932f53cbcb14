package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// gatheredScores explains t [T, k] as a router's weights taken at given
// expert indices: scores [.., E] (T rows) gathered per row at the k
// indices of an integer value [T, k] of the scope (scores.gather(1,
// idx)), then as they are, or renormalised over the k (w / Σw), either
// times a constant read off the values (a routed scaling factor). The
// gather is the one-hot of the indices (rows of an identity) times the
// scores, a batched matmul with one nonzero term per entry: exact. For
// routers whose choice is not a top-k of the scores (indices looked up
// by token id): tried where every other form fails.
func (s *synth) gatheredScores(t *val, vals []*val) *val {
	if len(t.shape) != 2 || t.integral() || t.intType {
		return nil
	}
	rows, k := t.shape[0], t.shape[1]
	for _, idx := range vals {
		if !idx.intType || idx.numel() != rows*k || !nonNegative(idx) {
			continue
		}
		for _, sc := range vals {
			if sc.opaque || sc.integral() || len(sc.shape) < 2 {
				continue
			}
			e := sc.shape[len(sc.shape)-1]
			if sc.numel() != rows*e || e < 2 || maxOf(idx) >= float32(e) {
				continue
			}
			if !gatherFits(t, idx, sc, rows, k, e) {
				continue
			}
			if v := s.gatheredFrom(t, idx, sc, rows, k, e); v != nil {
				return v
			}
		}
	}
	return nil
}

func (s *synth) gatheredFrom(t, idx, sc *val, rows, k, e int) *val {
	oh := s.derive(&expr{op: program.OpGather, args: []*val{s.identity(e), s.reshape(idx, []int{rows, k})}, out: f32, label: "one-hot of the indices"})
	col := s.reshape(sc, []int{rows, e, 1})
	if oh == nil || col == nil {
		return nil
	}
	g := s.derive(&expr{op: program.OpMatMul, args: []*val{oh, col}, out: t.format, label: "scores at the indices"})
	w := s.reshape(g, []int{rows, k})
	if w == nil {
		return nil
	}
	ones := &val{shape: []int{1, k, 1}, data: make([]float32, k), format: f32, origin: fmt.Sprintf("ones%d", k)}
	for i := range ones.data {
		ones.data[i] = 1
	}
	s.seq++
	ones.seq = s.seq
	s.em.constant(ones, fmt.Sprintf("%d ones (a sum over the picks)", k))
	sum := s.reshape(s.derive(&expr{op: program.OpMatMul, args: []*val{s.reshape(w, []int{1, rows, k}), ones}, out: t.format, label: "sum over the picks"}), []int{rows, 1})
	var forms []*val
	forms = append(forms, w)
	if sum != nil {
		if n := s.derive(&expr{op: program.OpDiv, args: []*val{w, sum}, out: t.format, label: "renormalised over the picks"}); n != nil {
			forms = append(forms, n)
		}
	}
	tol := tolerance(t.format)
	for _, f := range forms {
		if relRMS(t.format, f.data, t.data) <= tol && s.everyStep(f, t, tol) {
			return f
		}
		c, ok := s.scalarOf(f, t)
		if !ok {
			continue
		}
		if v, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{f, s.constant(c)}, out: t.format, label: fmt.Sprintf("times %g", c)}}); v != nil {
			return v
		}
	}
	return nil
}

// gatherFits is gatheredScores' check in plain arithmetic, before any
// constant is made: the scores at the indices, as they are or
// renormalised, are t up to one factor (to ten times the tolerance).
func gatherFits(t, idx, sc *val, rows, k, e int) bool {
	g := make([]float32, rows*k)
	n := make([]float32, rows*k)
	for i := range rows {
		var sum float32
		for j := range k {
			g[i*k+j] = sc.data[i*e+int(idx.data[i*k+j])]
			sum += g[i*k+j]
		}
		for j := range k {
			n[i*k+j] = g[i*k+j] / sum
		}
	}
	for _, f := range [][]float32{g, n} {
		c, ok := fitScalar(&val{shape: t.shape, data: f}, t)
		if !ok {
			continue
		}
		scaled := make([]float32, len(f))
		for i, x := range f {
			scaled[i] = float32(c) * x
		}
		if relRMS(t.format, scaled, t.data) <= 10*tolerance(t.format) {
			return true
		}
	}
	return false
}

// nonNegative reports whether every entry of v is 0 or more.
func nonNegative(v *val) bool {
	for _, x := range v.data {
		if !(x >= 0) {
			return false
		}
	}
	return true
}

// maxOf is v's largest entry.
func maxOf(v *val) float32 {
	m := v.data[0]
	for _, x := range v.data {
		m = max(m, x)
	}
	return m
}
