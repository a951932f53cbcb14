package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// hardAssigned explains t [B, G, C] as a hard assignment of L tokens to G
// slots (GroupViT's assign attention in eval): the scores S = s·q·kᵀ [B,
// G, L] of the slots' queries q [B, G, C] against the tokens' keys k [B,
// L, C], each token given to its most likely slot (the one-hot argmax of
// the softmax over the slots, the first of equals, passed straight
// through it: onehot − p + p), each slot's row divided by its count + ε,
// times the tokens' values v [B, L, C]. The scope's own values are tried
// as q, k and v; the scale C^−½ or 1, ε 1 or 0.
func (s *synth) hardAssigned(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	b, g, c := t.shape[0], t.shape[1], t.shape[2]
	var qs, kvs []*val
	for _, v := range sc.vals {
		if !sc.own[v] || v.opaque || v.param || len(v.shape) != 3 || v.shape[0] != b || v.shape[2] != c || v.integral() {
			continue
		}
		if v.shape[1] == g {
			qs = append(qs, v)
		}
		if v.shape[1] != g && v.shape[1] > 1 {
			kvs = append(kvs, v)
		}
	}
	var cands []*expr
	for _, q := range qs {
		for _, k := range kvs {
			for _, v := range kvs {
				if v == k || v.shape[1] != k.shape[1] {
					continue
				}
				for _, scale := range []float64{1 / math.Sqrt(float64(c)), 1} {
					for _, eps := range []float64{1, 0} {
						if e := s.hardAssignExpr(t, q, k, v, scale, eps); e != nil {
							cands = append(cands, e)
						}
					}
				}
			}
		}
	}
	return s.bestFit(t, cands, "glue")
}

// hardAssignExpr builds hardAssigned's reading from q, k and v.
func (s *synth) hardAssignExpr(t, q, k, v *val, scale, eps float64) *expr {
	b, g, l := q.shape[0], q.shape[1], k.shape[1]
	f := t.format
	kt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{k}, out: k.format})
	if kt == nil {
		return nil
	}
	raw := s.derive(&expr{op: program.OpMatMul, args: []*val{q, kt}, out: f, label: "q·kᵀ"})
	raw = s.derive(&expr{op: program.OpMul, args: []*val{raw, s.constant(scale)}, out: f, label: fmt.Sprintf("scores × %.6g", scale)})
	if raw == nil {
		return nil
	}
	// [B, L, G]: each token's scores over the slots last
	tok := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{raw}, out: f})
	p := s.derive(&expr{op: program.OpSoftmax, args: []*val{tok}, out: f, label: "softmax over the slots"})
	hard := s.firstMaxOneHot(p)
	if hard == nil {
		return nil
	}
	st := s.derive(&expr{op: program.OpSub, args: []*val{hard, p}, out: f, label: "one-hot − p"})
	st = s.derive(&expr{op: program.OpAdd, args: []*val{st, p}, out: f, label: "straight through: + p"})
	if st == nil {
		return nil
	}
	a := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{st}, out: f})
	ones := s.relConst(fmt.Sprintf("ones[%d,1]", l), []int{l, 1}, slices.Repeat([]float32{1}, l), fmt.Sprintf("a column of %d ones (a row's sum)", l))
	count := s.reshape(s.derive(&expr{op: program.OpMatMul, args: []*val{s.reshape(a, []int{b * g, l}), ones}, out: f, label: "each slot's count"}), []int{b, g, 1})
	if count == nil {
		return nil
	}
	den := count
	if eps != 0 {
		den = s.derive(&expr{op: program.OpAdd, args: []*val{count, s.constant(eps)}, out: f, label: fmt.Sprintf("count + %g", eps)})
	}
	w := s.derive(&expr{op: program.OpDiv, args: []*val{a, den}, out: f, label: "each slot's share"})
	if w == nil {
		return nil
	}
	return &expr{op: program.OpMatMul, args: []*val{w, v}, out: f,
		label: fmt.Sprintf("hard assignment to %d slots, scale %.6g, ε %g", g, scale, eps)}
}

// firstMaxOneHot is 1 at the first largest entry of each row of p [..,
// n] (torch's max index: the first of equals) and 0 elsewhere: the row's
// maximum by halving, the entries equal to it, and of those the one with
// no equal entry before it (a count of the earlier ones by a product
// with a strictly upper triangle of ones).
func (s *synth) firstMaxOneHot(p *val) *val {
	r := len(p.shape)
	n := p.shape[r-1]
	m := s.maxByHalving(p)
	if m == nil {
		return nil
	}
	zero, one := s.constant(0), s.constant(1)
	gap := s.derive(&expr{op: program.OpSub, args: []*val{m, p}, out: precision.F32, label: "the row's maximum − p"})
	eq := s.derive(&expr{op: program.OpWhere, args: []*val{gap, zero, one}, out: precision.F32, label: "1 where p is the row's maximum"})
	if eq == nil {
		return nil
	}
	upper := make([]float32, n*n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			upper[i*n+j] = 1
		}
	}
	tri := s.relConst(fmt.Sprintf("upper[%d]", n), []int{n, n}, upper, fmt.Sprintf("ones above the diagonal of %d×%d (how many entries come before each)", n, n))
	rows := p.numel() / n
	earlier := s.reshape(s.derive(&expr{op: program.OpMatMul, args: []*val{s.reshape(eq, []int{rows, n}), tri}, out: precision.F32, label: "the maxima before each entry"}), slices.Clone(p.shape))
	if earlier == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpWhere, args: []*val{earlier, zero, eq}, out: p.format, label: "the first maximum"})
}

// maxByHalving is the maximum of v along its last axis (kept, length 1):
// the two halves' larger entries, again, an odd last entry joined back.
func (s *synth) maxByHalving(v *val) *val {
	r := len(v.shape)
	cur := v
	for cur != nil && cur.shape[r-1] > 1 {
		n := cur.shape[r-1]
		h := n / 2
		slice := func(a, b int) *val {
			return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: r - 1, Start: a, End: b}, args: []*val{cur}, out: cur.format})
		}
		lo, hi := slice(0, h), slice(h, 2*h)
		if lo == nil || hi == nil {
			return nil
		}
		m := s.derive(&expr{op: program.OpMaximum, args: []*val{lo, hi}, out: cur.format, label: "the larger half"})
		if n%2 == 1 && m != nil {
			m = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: r - 1}, args: []*val{m, slice(n-1, n)}, out: cur.format})
		}
		cur = m
	}
	return cur
}
