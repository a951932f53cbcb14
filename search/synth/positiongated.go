package synth

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// Bounds of positionGatedSum: the terms it regresses on and the cells it
// solves at.
const (
	maxPositionTerms     = 8
	positionGatedSamples = 256
)

// positionGatedSum explains a map t [B, C, H, W] as Σ_k v_k · g_k: values
// v_k of t's shape (or [B, C, 1, 1], broadcast over the cells) each
// weighted per cell by a gate g_k [B, 1, H, W], one channel of a value of
// the scope (channels first, or a column of one laid channels last), the
// products added in the order the terms were made (FocalNet's focal
// modulation: each level's context times its gate, then the global
// context times the last gate). The gates are solved per cell by least
// squares over the channels on sampled cells, each then matched to a
// channel of the scope; a term whose solved gate is zero everywhere takes
// no part.
func (s *synth) positionGatedSum(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() || t.reshapedFrom {
		return nil
	}
	b, c, h, w := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	cells := b * h * w
	var terms []*val
	for _, v := range recentFirst(vals) {
		if v.opaque || v.param || v.integral() || len(terms) == maxPositionTerms {
			continue
		}
		if !slices.Equal(v.shape, t.shape) && !slices.Equal(v.shape, []int{b, c, 1, 1}) {
			continue
		}
		if slices.ContainsFunc(terms, func(u *val) bool { return slices.Equal(u.shape, v.shape) && slices.Equal(u.data, v.data) }) {
			continue // one tensor under two names (a module's result and its parent's)
		}
		terms = append(terms, v)
	}
	if len(terms) < 2 || c <= len(terms) {
		return nil
	}
	slices.SortStableFunc(terms, func(x, y *val) int { return x.seq - y.seq })
	at := func(v *val, ch, cell int) float64 { // v's entry at (batch, channel, cell) of t's grid
		bb, p := cell/(h*w), cell%(h*w)
		if v.shape[2] == 1 {
			return float64(v.data[bb*c+ch])
		}
		return float64(v.data[(bb*c+ch)*h*w+p])
	}
	step := max(1, cells/positionGatedSamples)
	var sampled []int
	for p := 0; p < cells; p += step {
		sampled = append(sampled, p)
	}
	// solve per cell over the channels; then again over the terms whose
	// gates are not small beside the largest (a term the others make to
	// rounding, as a mean and its activation are, pollutes the solve)
	drop, match := 1e-4, 1e-2
	if t.format != precision.F32 {
		drop, match = 3e-2, 5e-2
	}
	gates := s.cellGates(t, terms, sampled, at)
	if gates == nil {
		return nil
	}
	var kept []*val
	var top float64
	for k := range terms {
		top = max(top, gateScale(gates[k]))
	}
	for k, v := range terms {
		if gateScale(gates[k]) > drop*top {
			kept = append(kept, v)
		}
	}
	if len(kept) < 2 {
		return nil
	}
	if len(kept) < len(terms) {
		terms = kept
		if gates = s.cellGates(t, terms, sampled, at); gates == nil {
			return nil
		}
	}
	// each term's gate matched to a channel of the scope; a term whose
	// gate matches none is dropped (the smallest such) and the rest
	// solved again, until every term's gate has its channel
	var prods []*val
	for len(terms) >= 2 {
		var miss []int
		gs := make([]*val, len(terms))
		for k := range terms {
			if gs[k] = s.gateSource(gates[k], sampled, b, h, w, vals, match); gs[k] == nil {
				miss = append(miss, k)
			}
		}
		if len(miss) == 0 {
			for k, v := range terms {
				p := s.derive(&expr{op: program.OpMul, args: []*val{v, gs[k]}, out: t.format, label: "a value gated per cell"})
				if p == nil {
					return nil
				}
				prods = append(prods, p)
			}
			break
		}
		worst := slices.MinFunc(miss, func(i, j int) int { return cmp.Compare(gateScale(gates[i]), gateScale(gates[j])) })
		terms = slices.Delete(slices.Clone(terms), worst, worst+1)
		if gates = s.cellGates(t, terms, sampled, at); gates == nil {
			return nil
		}
	}
	if len(prods) < 2 {
		return nil
	}
	acc := prods[0]
	for _, p := range prods[1 : len(prods)-1] {
		if acc = s.derive(&expr{op: program.OpAdd, args: []*val{acc, p}, out: t.format, label: "gated terms summed"}); acc == nil {
			return nil
		}
	}
	v, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{acc, prods[len(prods)-1]}, out: t.format,
		label: fmt.Sprintf("a sum of %d values gated per cell", len(prods))}})
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) || !s.everyStep(v, t, tolerance(t.format)) {
		return nil
	}
	return v
}

// gateSource finds the channel of a value of the scope on t's grid
// [B, ·, H, W] whose cells agree with the solved gate at the sampled cells
// to within match of its RMS (the solve is of rounded data; the
// product's fit decides): a channel of a map [B, K, H, W], or a column of rows laid
// channels last [B, H, W, K]. The match is read off the data; only it is
// derived, as [B, 1, H, W]. nil where none agrees.
func (s *synth) gateSource(gate []float64, sampled []int, b, h, w int, vals []*val, match float64) *val {
	var norm float64
	for _, g := range gate {
		norm += g * g
	}
	limit := match * math.Sqrt(norm/float64(len(gate)))
	agrees := func(at func(cell int) float32) bool {
		var d float64
		for i, p := range sampled {
			e := float64(at(p)) - gate[i]
			d += e * e
		}
		return math.Sqrt(d/float64(len(gate))) <= limit
	}
	for _, v := range vals {
		if v.opaque || v.integral() || len(v.shape) != 4 || v.shape[0] != b {
			continue
		}
		switch {
		case v.shape[2] == h && v.shape[3] == w:
			k := v.shape[1]
			for ch := range k {
				if agrees(func(cell int) float32 { return v.data[(cell/(h*w)*k+ch)*h*w+cell%(h*w)] }) {
					return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: ch, End: ch + 1}, args: []*val{v}, out: v.format, label: "a channel as a gate"})
				}
			}
		case v.shape[1] == h && v.shape[2] == w:
			k := v.shape[3]
			for ch := range k {
				if agrees(func(cell int) float32 { return v.data[cell*k+ch] }) {
					col := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: ch, End: ch + 1}, args: []*val{v}, out: v.format, label: "a column as a gate"})
					return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2}}, args: []*val{col}, out: v.format, label: "channels first"})
				}
			}
		}
	}
	return nil
}

// cellGates solves, at each sampled cell, t's channels as a weighted sum
// of the terms' (least squares): per term, its weight at each cell; nil
// where a solve fails.
func (s *synth) cellGates(t *val, terms []*val, sampled []int, at func(v *val, ch, cell int) float64) [][]float64 {
	c, hw := t.shape[1], t.shape[2]*t.shape[3]
	gates := make([][]float64, len(terms))
	for k := range gates {
		gates[k] = make([]float64, len(sampled))
	}
	a := mat.NewDense(c, len(terms), nil)
	y := mat.NewVecDense(c, nil)
	var x mat.VecDense
	for i, p := range sampled {
		for ch := range c {
			for k, v := range terms {
				a.Set(ch, k, at(v, ch, p))
			}
			y.SetVec(ch, float64(t.data[(p/hw*c+ch)*hw+p%hw]))
		}
		if err := x.SolveVec(a, y); err != nil {
			return nil
		}
		for k := range terms {
			gates[k][i] = x.AtVec(k)
		}
	}
	return gates
}

// gateScale is a solved gate's largest magnitude.
func gateScale(g []float64) float64 {
	var m float64
	for _, x := range g {
		m = max(m, math.Abs(x))
	}
	return m
}
