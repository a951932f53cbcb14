package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxSumTerms bounds the values manySummed weighs at once.
const maxSumTerms = 16

// manySummed explains t as the sum of four or more values of its shape,
// each taken once or a whole number of times (LayoutLM's embeddings: the
// word, position and token-type rows plus six box tables' rows at ids
// that are all zero, two of them the same table's rows twice): the
// coefficients of t over the values fitted by least squares (values with
// equal data weighed as one), each snapped to a whole number (within 1e-3,
// 0.05 for a narrower format) and the sum checked;
// the terms added left to right in the order the values were made.
// summed takes three; tried once every other form has failed.
func (s *synth) manySummed(t *val, vals []*val) *val {
	if t.integral() {
		return nil
	}
	ops := sameShape(t, vals)
	// one column per distinct value, in the order the values were made
	slices.SortStableFunc(ops, func(a, b *val) int { return a.seq - b.seq })
	var groups [][]*val
	for _, v := range ops {
		i := slices.IndexFunc(groups, func(g []*val) bool { return slices.Equal(g[0].data, v.data) })
		if i >= 0 {
			groups[i] = append(groups[i], v)
			continue
		}
		groups = append(groups, []*val{v})
	}
	if len(groups) < 2 || len(groups) > maxSumTerms {
		return nil
	}
	c, ok := leastSquares(groups, t)
	if !ok {
		return nil
	}
	// a coefficient within this of a whole number snaps to it (a bf16
	// sum rounds after each add: its coefficients read ~2e-3 off)
	snap := 1e-3
	if t.format != precision.F32 {
		snap = 0.05
	}
	var terms []*val
	for i, g := range groups {
		k := math.Round(c[i])
		if math.Abs(c[i]-k) > snap || k < 0 || int(k) > len(g) {
			return nil
		}
		terms = append(terms, g[:int(k)]...)
	}
	if len(terms) < 4 {
		return nil
	}
	slices.SortStableFunc(terms, func(a, b *val) int { return a.seq - b.seq })
	acc := terms[0]
	for _, v := range terms[1 : len(terms)-1] {
		if acc = s.derive(&expr{op: program.OpAdd, args: []*val{acc, v}, out: t.format, label: "sum"}); acc == nil {
			return nil
		}
	}
	w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{acc, terms[len(terms)-1]}, out: t.format,
		label: fmt.Sprintf("sum of %d values", len(terms))}})
	return w
}

// leastSquares fits t ≈ Σ c_i·g_i[0] by the normal equations (Gaussian
// elimination with partial pivoting, in float64); false where they are
// singular.
func leastSquares(groups [][]*val, t *val) ([]float64, bool) {
	n := len(groups)
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n+1)
		x := groups[i][0].data
		for j := range n {
			y := groups[j][0].data
			var d float64
			for e := range x {
				d += float64(x[e]) * float64(y[e])
			}
			a[i][j] = d
		}
		var d float64
		for e := range x {
			d += float64(x[e]) * float64(t.data[e])
		}
		a[i][n] = d
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-9*math.Max(1, math.Abs(a[col][col])) || a[p][col] == 0 {
			return nil, false
		}
		a[col], a[p] = a[p], a[col]
		for r := range n {
			if r == col {
				continue
			}
			f := a[r][col] / a[col][col]
			for k := col; k <= n; k++ {
				a[r][k] -= f * a[col][k]
			}
		}
	}
	c := make([]float64, n)
	for i := range c {
		c[i] = a[i][n] / a[i][i]
	}
	return c, true
}
