package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// contextWeighted explains t as a global context times the values:
// ctx = Σ_n k[.., n]·w[.., n] over t's last axis, w weights the scope made
// (each row along that axis non-negative, summing to 1: a softmax of one
// channel, MobileViT v2's separable self-attention's context scores), then
// t = act(v)·ctx broadcast back over the axis, act the identity or ReLU
// (rows of one entry: weights of 1, a softmax over one).
// k and v are slices of one value along the axis where w has length 1
// (the channels of a fused q/k/v convolution), read off the values: each
// k offset's context is made on the host and the slice whose activation
// t/ctx is sought among the value's. The context's sum is a mean times
// the row length (the mean in f32, the product rounded to t's format: one
// rounding, as torch.sum's).
func (s *synth) contextWeighted(t *val, sc *scope, vals []*val) *val {
	r := len(t.shape)
	if r < 2 {
		return nil
	}
	n := t.shape[r-1]
	var bestW, bestX *val
	var bestAt [3]int
	bestErr := math.Inf(1)
	for _, w := range vals {
		ax := weightsAxis(w, t)
		if ax < 0 || !sc.own[w] || !(rowsSumToOne(w, 1e-2) || n == 1 && !slices.ContainsFunc(w.data, func(x float32) bool { return x != 1 })) {
			continue
		}
		c := t.shape[ax]
		for _, x := range vals {
			if x.opaque || len(x.shape) != r || x.shape[ax] < 2*c || x.format != t.format {
				continue
			}
			if !slices.Equal(slices.Delete(slices.Clone(x.shape), ax, ax+1), slices.Delete(slices.Clone(t.shape), ax, ax+1)) {
				continue
			}
			for a := 0; a+c <= x.shape[ax]; a++ {
				ctx := contextOf(x, w, ax, a, c)
				prev := bestErr
				for b := 0; b+c <= x.shape[ax]; b++ {
					if b == a {
						continue
					}
					for _, relu := range []bool{false, true} {
						if e := contextErr(t, x, ctx, ax, b, c, relu); e < bestErr {
							bestErr, bestAt = e, [3]int{a, b, boolInt(relu)}
						}
					}
				}
				if bestErr < prev {
					bestW, bestX = w, x
				}
			}
		}
	}
	if bestX == nil || bestErr > 10*tolerance(t.format) {
		return nil
	}
	e := s.contextExpr(t, bestX, bestW, weightsAxis(bestW, t), bestAt[0], bestAt[1], t.shape[weightsAxis(bestW, t)], n, bestAt[2] == 1)
	if e == nil {
		return nil
	}
	v, _ := s.best(t, []*expr{e})
	return v
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// weightsAxis is the axis along which w [.., 1, .., N] broadcasts to t
// (w's length 1 there, t's more; every other axis t's), or −1.
func weightsAxis(w, t *val) int {
	if w.opaque || len(w.shape) != len(t.shape) {
		return -1
	}
	ax := -1
	for i := range w.shape {
		switch {
		case w.shape[i] == t.shape[i]:
		case w.shape[i] == 1 && ax < 0 && i < len(w.shape)-1:
			ax = i
		default:
			return -1
		}
	}
	return ax
}

// contextOf is Σ_n x[.., a+i, .., n]·w[.., 0, .., n] for i < c: the
// context of the slice [a, a+c) of x along ax, shaped as t with its
// last axis 1 (row-major over x's shape with ax of length c).
func contextOf(x, w *val, ax, a, c int) []float64 {
	outer, inner := 1, 1
	for _, d := range x.shape[:ax] {
		outer *= d
	}
	for _, d := range x.shape[ax+1:] {
		inner *= d
	}
	n := x.shape[len(x.shape)-1]
	rows := inner / n
	out := make([]float64, outer*c*rows)
	for o := range outer {
		for i := range c {
			for p := range rows {
				var sum float64
				xo := ((o*x.shape[ax]+a+i)*rows + p) * n
				wo := (o*rows + p) * n
				for k := range n {
					sum += float64(x.data[xo+k]) * float64(w.data[wo+k])
				}
				out[(o*c+i)*rows+p] = sum
			}
		}
	}
	return out
}

// contextErr is the rel-RMS between t and act(x[b:b+c] along ax)·ctx,
// on up to 256 evenly spaced entries first (most offsets fail there),
// then on all.
func contextErr(t, x *val, ctx []float64, ax, b, c int, relu bool) float64 {
	inner := 1
	for _, d := range t.shape[ax+1:] {
		inner *= d
	}
	n := t.shape[len(t.shape)-1]
	rows := inner / n
	pred := func(j int) float64 {
		oi, rest := j/inner, j%inner // oi = o·c + i
		o, i := oi/c, oi%c
		v := float64(x.data[(o*x.shape[ax]+b+i)*inner+rest])
		if relu {
			v = max(v, 0)
		}
		return v * ctx[oi*rows+rest/n]
	}
	errOn := func(step int) float64 {
		var num, den float64
		for j := 0; j < len(t.data); j += step {
			d := pred(j) - float64(t.data[j])
			num += d * d
			den += float64(t.data[j]) * float64(t.data[j])
		}
		if den == 0 {
			return math.Inf(1)
		}
		return math.Sqrt(num / den)
	}
	if step := len(t.data) / 256; step > 1 {
		if e := errOn(step); e > 0.1 {
			return e
		}
	}
	return errOn(1)
}

// contextExpr builds act(v)·(mean(k·w)·n) for the slices of x at a (k)
// and b (v) along ax, c wide, n the summed axis's length.
func (s *synth) contextExpr(t, x, w *val, ax, a, b, c, n int, relu bool) *expr {
	k := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: a, End: a + c}, args: []*val{x}, out: x.format, label: "context keys"})
	v := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: b, End: b + c}, args: []*val{x}, out: x.format, label: "context values"})
	if k == nil || v == nil {
		return nil
	}
	kw := s.derive(&expr{op: program.OpMul, args: []*val{k, w}, out: t.format, label: "keys weighted"})
	mean := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: len(t.shape) - 1}, args: []*val{kw, nil}, out: f32, label: "the weighted keys' mean"})
	keep := slices.Clone(t.shape)
	keep[len(keep)-1] = 1
	mean = s.reshape(mean, keep)
	ctx := s.derive(&expr{op: program.OpMul, args: []*val{mean, s.constant(float64(n))}, out: t.format, label: "context (the weighted sum)"})
	if ctx == nil {
		return nil
	}
	label := "values times the context"
	if relu {
		v = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActReLU}, args: []*val{v}, out: t.format, label: "relu"})
		label = "relu(values) times the context"
		if v == nil {
			return nil
		}
	}
	return &expr{op: program.OpMul, args: []*val{v, ctx}, out: t.format, label: label}
}

// globalQueryKeys explains t [B, N, D] as SwiftFormer's additive
// attention's product before its projection: q̂ and k̂ two of the scope's
// values of t's shape L2-normalised over D (F.normalize), the global
// query G = Σ_n a_n·q̂_n over the rows, t = G·k̂ broadcast over the rows;
// the weights a are ones (a softmax over an axis of one) or, where the
// scope holds a parameter w [D, 1], q̂·w L2-normalised over the rows.
func (s *synth) globalQueryKeys(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	b, n, d := t.shape[0], t.shape[1], t.shape[2]
	var own []*val
	for _, v := range sameShape(t, vals) {
		if sc.own[v] {
			own = append(own, v)
		}
	}
	if len(own) < 2 || len(own) > 6 {
		return nil
	}
	var gates []*val // w [D, 1] read as a linear's weight [1, D]
	for _, w := range vals {
		if w.param && len(w.shape) == 2 && w.shape[0] == d && w.shape[1] == 1 {
			gates = append(gates, s.reshape(w, []int{1, d}))
		}
	}
	rowsSum := func(x *val, label string) *val {
		m := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{x, nil}, out: f32, label: label + " (mean)"})
		g := s.derive(&expr{op: program.OpMul, args: []*val{m, s.constant(float64(n))}, out: t.format, label: label})
		return s.reshape(g, []int{b, 1, d})
	}
	var cands []*expr
	for _, q := range own {
		qn := s.headsL2(q, 1, d, nil)
		if qn == nil {
			continue
		}
		gs := []*val{rowsSum(qn, "the global query")}
		for _, w := range gates {
			a := s.derive(&expr{op: program.OpLinear, args: []*val{qn, w, nil}, out: t.format, label: "each row's weight"})
			if a = s.reshape(a, []int{b, n}); a == nil {
				continue
			}
			an := s.headsL2(s.reshape(a, []int{b, 1, n}), 1, n, nil)
			if an = s.reshape(an, []int{b, n, 1}); an == nil {
				continue
			}
			aq := s.derive(&expr{op: program.OpMul, args: []*val{an, qn}, out: t.format, label: "rows weighted"})
			gs = append(gs, rowsSum(aq, "the weighted global query"))
		}
		for _, k := range own {
			if k == q {
				continue
			}
			kn := s.headsL2(k, 1, d, nil)
			for _, g := range gs {
				if g != nil && kn != nil {
					cands = append(cands, &expr{op: program.OpMul, args: []*val{g, kn}, out: t.format, label: "global query times the keys"})
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, _ := s.best(t, cands)
	return v
}

// plusUnitRows explains t [.., D] as a + b/‖b‖: a value of t's shape plus
// another's rows L2-normalised over D (F.normalize), found where t − a
// has rows of norm 1 (SwiftFormer's residual of the normalised query).
func (s *synth) plusUnitRows(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	d := t.shape[len(t.shape)-1]
	rows := min(t.numel()/d, 8)
	same := sameShape(t, vals)
	unit := func(r []float64) bool {
		var sq float64
		for _, x := range r {
			sq += x * x
		}
		return math.Abs(math.Sqrt(sq)-1) < 2e-2
	}
	var cands []*expr
	for _, a := range same {
		ok := true
		for i := range rows {
			r := make([]float64, d)
			for j := range d {
				r[j] = float64(t.data[i*d+j]) - float64(a.data[i*d+j])
			}
			if !unit(r) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for _, b := range same {
			if b == a {
				continue
			}
			if bn := s.headsL2(s.reshape(b, []int{1, b.numel() / d, d}), 1, d, nil); bn != nil {
				cands = append(cands, &expr{op: program.OpAdd, args: []*val{a, s.reshape(bn, t.shape)}, out: t.format, label: "plus unit rows"})
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, _ := s.best(t, cands)
	return v
}
