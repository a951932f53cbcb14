package synth

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// maxGatedSumOperands bounds the values gatedSum regresses t on, and
// gatedSumRows the rows of each channel it reads (a handful of
// coefficients is determined long before a long sequence ends).
const (
	maxGatedSumOperands = 8
	gatedSumRows        = 64
)

// gatedSum explains t [B, R, C] as x + Σ f(gᵢ)·yᵢ: a residual stream and
// several branches added to it, each gated per channel by a vector of the
// scope through f (identity, tanh or sigmoid), as a block that adds its
// attention, a second attention and its MLP to one residual does. t is
// regressed on the recent values of its shape, channel by channel over the
// rows (least squares); the value whose coefficient is 1 everywhere is the
// residual, every other with coefficients is a branch whose coefficients
// must be f of a vector of the scope. The branches are added in the order
// they were made. gated explains one branch; this takes two or more.
func (s *synth) gatedSum(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	r := t.shape[1]
	// the call's arguments of t's shape (the residual stream comes in as
	// one, made long before the branches), then the most recent values
	var ops []*val
	same := sameShape(t, vals)
	for _, first := range []bool{true, false} {
		for _, v := range same {
			if len(ops) == maxGatedSumOperands {
				break
			}
			if sc.arg[v] == first && !slices.ContainsFunc(ops, func(o *val) bool { return slices.Equal(o.data, v.data) }) {
				ops = append(ops, v)
			}
		}
	}
	if len(ops) < 3 {
		return nil
	}
	if r > len(ops) {
		if w := s.gatedSumOf(t, sc, ops); w != nil {
			return w
		}
	}
	// every subset of three to five values that the rows still determine
	// (as many rows as values at least: the residual's coefficient must
	// then still be 1 and each branch's a gate of the scope): fewer rows
	// than values (a short text stream), or values nearly proportional per
	// channel (a branch before and after its norm) whose coefficients a
	// narrow format's rounding splits between them
	for k := 3; k <= min(5, r, len(ops)-1); k++ {
		for _, sub := range subsets(len(ops), k) {
			part := make([]*val, k)
			for i, j := range sub {
				part[i] = ops[j]
			}
			if w := s.gatedSumOf(t, sc, part); w != nil {
				return w
			}
		}
	}
	return nil
}

// subsets are the k-element subsets of 0…n−1, in lexicographic order.
func subsets(n, k int) [][]int {
	var out [][]int
	cur := make([]int, 0, k)
	var rec func(start int)
	rec = func(start int) {
		if len(cur) == k {
			out = append(out, slices.Clone(cur))
			return
		}
		for i := start; i < n; i++ {
			cur = append(cur, i)
			rec(i + 1)
			cur = cur[:len(cur)-1]
		}
	}
	rec(0)
	return out
}

// gatedSumOf is gatedSum's fit of t over the values ops (no more than the
// rows it reads).
func (s *synth) gatedSumOf(t *val, sc *scope, ops []*val) *val {
	b, c := t.shape[0], t.shape[2]
	r := min(t.shape[1], gatedSumRows) // the rows the regression reads
	m := len(ops)
	// coef[i][bi·C + ch]: value i's coefficient in sample bi, channel ch
	coef := make([][]float64, m)
	for i := range coef {
		coef[i] = make([]float64, b*c)
	}
	a := mat.NewDense(r, m, nil)
	y := mat.NewVecDense(r, nil)
	var x mat.VecDense
	for bi := range b {
		for ch := range c {
			for row := range r {
				e := (bi*t.shape[1]+row)*c + ch
				for i, o := range ops {
					a.Set(row, i, float64(o.data[e]))
				}
				y.SetVec(row, float64(t.data[e]))
			}
			if err := x.SolveVec(a, y); err != nil {
				return nil // values that are not independent over the rows
			}
			for i := range m {
				coef[i][bi*c+ch] = x.AtVec(i)
			}
		}
	}
	tol := tolerance(t.format)
	var base *val
	type branch struct {
		y    *val
		gate vec
		f    exec.ActKind
	}
	var branches []branch
	for i, o := range ops {
		switch {
		case allNear(coef[i], 1, 10*tol) && base == nil:
			base = o
		case allNear(coef[i], 0, 10*tol):
		default:
			// the nearest gate over the functions, not the first within
			// reach: tanh(g) ≈ g for small gates, within a narrow
			// format's reach of the identity
			best, bestErr := branch{}, math.Inf(1)
			for _, f := range []exec.ActKind{exec.ActIdentity, exec.ActTanh, exec.ActSigmoid} {
				if g, e := s.nearestOf(sc, b, c, coef[i], f, tol); e <= 10*tol && e < bestErr {
					best, bestErr = branch{y: o, gate: g, f: f}, e
				}
			}
			if best.y == nil {
				return nil // a branch no vector of the scope gates
			}
			branches = append(branches, best)
		}
	}
	if base == nil || len(branches) < 2 {
		return nil
	}
	slices.SortStableFunc(branches, func(p, q branch) int { return p.y.seq - q.y.seq })
	acc := base
	for i, br := range branches {
		e := &expr{op: program.OpGatedResidual, attrs: program.Attrs{Act: br.f}, args: []*val{acc, br.y, br.gate.v}, out: t.format,
			label: fmt.Sprintf("branch %d of %d: %s(%s)", i+1, len(branches), br.f, br.gate.label)}
		if i == len(branches)-1 {
			w, _ := s.best(t, []*expr{e})
			return w
		}
		if acc = s.derive(e); acc == nil {
			return nil
		}
	}
	return nil
}
