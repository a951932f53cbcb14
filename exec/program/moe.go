package program

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// RouteParams configure a top-k router: over the last axis, a score
// function first (Score: "softmax", "sigmoid", or "" for the logits as
// they are), then the K largest, renormalised to sum to one (Normalize),
// then multiplied by Scale (0: 1).
type RouteParams struct {
	K         int
	Score     string
	Normalize bool
	Scale     float32
	// TiesHigh: of equal scores the higher index comes first (what
	// torch.topk on CUDA was seen to do; on the CPU the lower one).
	TiesHigh bool
	// Chosen: the K largest logits picked first, the score function then
	// applied to those K only (top-k, then a softmax over the chosen).
	Chosen bool
	// Dense: the weights scattered into [.., E], zero at every expert a
	// row did not choose (torch.zeros_like(logits).scatter_(1, idx, w)).
	Dense bool
	// Stepwise: the K picks made one at a time, each the largest logit
	// left; its weight the softmax, at the pick, over the logits left
	// within Margin of it relatively: (m − s)/max(|s|, m) ≤ Margin, in
	// s.Out's arithmetic (a sparse mixer's eval path; Score, Normalize
	// and Chosen unused). Margin 0 keeps only exact ties: weights of one.
	Stepwise bool
	Margin   float32
}

// ExpertsParams configure the experts' gated unit beyond its activation:
// h = x·w1ᵀ + b1 split into gate and up; with Limit > 0, gate =
// min(gate, Limit) and up = clamp(up, −Limit, Limit); with Beta > 0 (silu
// only) the gate function is gate·σ(Beta·gate) (Swish-β: silu at 1, the
// "quick GELU" at 1.702); the unit is f(gate)·(up + UpOffset). With
// Ungated there is no up: w1 is [E, I, D] and the unit is f(x·w1ᵀ + b1)
// (T5's DenseActDense as each expert); with Squared too it is f(·)·f(·),
// the product rounded as torch.square of the activation is (a squared
// ReLU, as Nemotron-H's experts).
type ExpertsParams struct {
	Beta     float32
	Limit    float32
	UpOffset float32
	Ungated  bool
	Squared  bool
}

// unitRows is w1's rows per expert for a unit of inner width: gate and
// up, or the one projection of an ungated unit.
func (p ExpertsParams) unitRows(inner int) int {
	if p.Ungated {
		return inner
	}
	return 2 * inner
}

// check refuses parameters the unit does not define.
func (p ExpertsParams) check(act exec.ActKind) error {
	for _, x := range []float32{p.Beta, p.Limit, p.UpOffset} {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("experts: parameters %+v are not finite", p)
		}
	}
	if p.Beta < 0 || p.Limit < 0 {
		return fmt.Errorf("experts: beta %g and limit %g must not be negative", p.Beta, p.Limit)
	}
	if p.Beta > 0 && act != exec.ActSiLU {
		return fmt.Errorf("experts: beta %g is a parameter of silu, not of %v", p.Beta, act)
	}
	if p.Ungated && (p.Beta != 0 || p.Limit != 0 || p.UpOffset != 0) {
		return fmt.Errorf("experts: an ungated unit has no up to clamp or offset and no Swish-β (%+v)", p)
	}
	if p.Squared && !p.Ungated {
		return fmt.Errorf("experts: a squared activation is a form of the ungated unit only (%+v)", p)
	}
	return nil
}

// RouteScores are the score functions a router may apply.
var RouteScores = []string{"softmax", "sigmoid", ""}

// routeHost picks each row's K largest entries of x [.., E] (after the
// score function, or before it with p.Chosen): their weights, rounded to
// s.Out, and their indices (as f32), largest first, ties to the lower
// index (the higher with p.TiesHigh); with p.Dense the weights are laid
// at their experts' places in a row of E. A host step: router logits are
// tokens × experts.
func routeHost(b exec.Backend, x, bias exec.Tensor, p RouteParams, s exec.Spec) ([]exec.Tensor, error) {
	shape := x.Shape()
	if len(shape) == 0 || p.K < 1 || p.K > shape[len(shape)-1] {
		return nil, fmt.Errorf("route: top %d of %v", p.K, shape)
	}
	v, err := b.Download(x)
	if err != nil {
		return nil, err
	}
	e := shape[len(shape)-1]
	var bv []float32
	if bias != nil {
		if exec.Numel(bias.Shape()) != e {
			return nil, fmt.Errorf("route: bias %v for %d experts", bias.Shape(), e)
		}
		if bv, err = b.Download(bias); err != nil {
			return nil, err
		}
	}
	rows := len(v) / e
	width := p.K
	if p.Dense {
		width = e
	}
	w, idx := make([]float32, rows*width), make([]float32, rows*p.K)
	order := make([]int, e)
	score := func(x []float32) []float32 { return x }
	switch p.Score {
	case "softmax":
		score = softmax32
	case "sigmoid":
		score = sigmoid32
	case "":
	default:
		return nil, fmt.Errorf("route: unknown score function %q", p.Score)
	}
	for r := range rows {
		row := v[r*e : (r+1)*e]
		if !p.Chosen {
			row = score(row)
		}
		for i := range order {
			order[i] = i
		}
		// the choice reads score + bias (a load-balancing correction);
		// the weights are the scores themselves
		choice := row
		if bv != nil {
			choice = make([]float32, e)
			for i := range choice {
				choice[i] = row[i] + bv[i]
			}
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case choice[a] > choice[b]:
				return -1
			case choice[a] < choice[b]:
				return 1
			case p.TiesHigh:
				return b - a
			}
			return 0
		})
		picked := make([]float32, p.K)
		for j := range p.K {
			picked[j] = row[order[j]]
		}
		if p.Chosen {
			picked = score(picked)
		}
		if p.Stepwise {
			picked = stepwiseWeights(row, order[:p.K], p.Margin, s.Out)
		}
		var sum float32
		for _, x := range picked {
			sum += x
		}
		for j, x := range picked {
			if p.Normalize {
				x /= sum
			}
			if p.Scale != 0 {
				x *= p.Scale
			}
			at := r*p.K + j
			if p.Dense {
				at = r*e + order[j]
			}
			w[at], idx[r*p.K+j] = s.Out.Round(x), float32(order[j])
		}
	}
	out := append(slices.Clone(shape[:len(shape)-1]), p.K)
	wt, err := b.Upload(w, append(slices.Clone(shape[:len(shape)-1]), width), s.Out)
	if err != nil {
		return nil, err
	}
	it, err := b.Upload(idx, out, precision.F32)
	if err != nil {
		b.Free(wt)
		return nil, err
	}
	return []exec.Tensor{wt, it}, nil
}

// stepwiseWeights gives each pick's weight: the softmax over the logits
// not picked before it whose relative distance below it, (m − s)/max(|s|,
// m), each step rounded to f, is at most margin (rounded to f too), read
// at the pick.
func stepwiseWeights(row []float32, picks []int, margin float32, f precision.Format) []float32 {
	margin = f.Round(margin)
	out := make([]float32, len(picks))
	gone := make([]bool, len(row))
	for j, at := range picks {
		m := row[at]
		var kept []float32
		for i, v := range row {
			if gone[i] {
				continue
			}
			if i == at || f.Round(f.Round(m-v)/max(float32(math.Abs(float64(v))), m)) <= margin {
				kept = append(kept, v)
			}
		}
		// the pick is the largest left, so its exp(0) sits in the sum
		var sum float32
		for _, v := range kept {
			sum += float32(math.Exp(float64(v - m)))
		}
		out[j] = 1 / sum
		gone[at] = true
	}
	return out
}

// softmax32 is softmax(x) as torch computes it in f32: exp(x − max),
// summed, divided.
func softmax32(x []float32) []float32 {
	m := slices.Max(x)
	out := make([]float32, len(x))
	var sum float32
	for i, v := range x {
		out[i] = float32(math.Exp(float64(v - m)))
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// softmaxHost is softmax over x's last axis (softmax32 per row), rounded
// to s.Out. A host step: the rows are a router's scores.
func softmaxHost(b exec.Backend, x exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	shape := x.Shape()
	if len(shape) == 0 {
		return nil, fmt.Errorf("softmax of a scalar")
	}
	v, err := b.Download(x)
	if err != nil {
		return nil, err
	}
	e := shape[len(shape)-1]
	for r := 0; r+e <= len(v); r += e {
		for i, p := range softmax32(v[r : r+e]) {
			v[r+i] = s.Out.Round(p)
		}
	}
	return b.Upload(v, shape, s.Out)
}

// sigmoid32 is 1/(1 + exp(−x)) per element, in f32.
func sigmoid32(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = exec.Activate(exec.ActSigmoid, v, 0)
	}
	return out
}

// expertBlocks runs the experts unrouted, as one batched GEMM over E
// blocks of rows (x [E·T, D], the tokens repeated per expert, maybe
// already weighted): block e through expert e alone, the blocks joined
// in order, nothing summed.
func expertBlocks(b exec.Backend, x exec.Tensor, ws expertWeights, inner int, act exec.ActKind, upFirst bool, p ExpertsParams, s exec.Spec) (exec.Tensor, error) {
	experts, rows := ws.w1.Shape()[0], x.Shape()[0]
	if rows%experts != 0 {
		return nil, fmt.Errorf("experts: %d rows are not %d experts' blocks", rows, experts)
	}
	t := rows / experts
	ones := make([]float32, t)
	for i := range ones {
		ones[i] = 1
	}
	sc := &scratch{b: b}
	defer sc.free()
	parts := make([]exec.Tensor, experts)
	for e := range experts {
		xe, err := sc.keep(b.Slice(x, 0, e*t, (e+1)*t))
		if err != nil {
			return nil, err
		}
		// a weight of one: the product is exact
		if parts[e], err = sc.keep(expertOnce(b, xe, ws, e, inner, ones, act, upFirst, p, s)); err != nil {
			return nil, err
		}
	}
	return b.Concat(parts, 0)
}

// expertsRun is a mixture of experts over tokens x [T, D]: each token's
// output is Σ_j w[t, j] · expert_{idx[t, j]}(x[t]), where expert e is
// down_e(unit(gate_e(x), up_e(x))) + b2_e with w1 [E, 2I, D] holding gate
// then up (or up then gate when upFirst) and b1 [E, 2I] its bias, w2
// [E, D, I], b2 [E, D] (biases optional), the unit as p says; added
// expert by expert in increasing order, as index_add_ over the experts a
// batch hits: each expert's weighted output rounded to s.Out, their sum
// kept in f32 and rounded once (a buffer of f32 accumulated, as
// transformers' experts do), or under exec.RoundAccum every partial sum
// rounded to s.Out (index_add_ into a buffer of the activations' format:
// the two differ from three experts a token on). Without indices the weights are dense, [T, E]: every
// expert's weight for every token, zero where not chosen. Every expert
// runs on every token, its weight zero where not chosen (the same sums:
// a token's unchosen experts add exact zeros).
func expertsRun(b exec.Backend, x, idx, w, w1, w2, b1, b2 exec.Tensor, act exec.ActKind, upFirst bool, p ExpertsParams, s exec.Spec) (exec.Tensor, error) {
	xs, ws1, ws2 := x.Shape(), w1.Shape(), w2.Shape()
	if len(xs) != 2 || len(ws1) != 3 || len(ws2) != 3 || ws1[0] != ws2[0] || ws1[2] != xs[1] || ws2[1] != xs[1] || ws1[1] != p.unitRows(ws2[2]) {
		return nil, fmt.Errorf("experts: tokens %v, w1 %v, w2 %v", xs, ws1, ws2)
	}
	if err := p.check(act); err != nil {
		return nil, err
	}
	experts, inner := ws1[0], ws2[2]
	if b1 != nil && !slices.Equal(b1.Shape(), []int{experts, p.unitRows(inner)}) || b2 != nil && !slices.Equal(b2.Shape(), []int{experts, xs[1]}) {
		return nil, fmt.Errorf("experts: biases %v, %v for w1 %v, w2 %v", shapeOf(b1), shapeOf(b2), ws1, ws2)
	}
	if idx == nil && w == nil {
		return expertBlocks(b, x, expertWeights{w1, w2, b1, b2}, inner, act, upFirst, p, s)
	}
	wv, err := b.Download(w)
	if err != nil {
		return nil, err
	}
	t := xs[0]
	// coefOf is each token's weight for expert e (nil: no token chose it)
	var coefOf func(e int) []float32
	if idx == nil {
		if !slices.Equal(w.Shape(), []int{t, experts}) {
			return nil, fmt.Errorf("experts: dense weights %v for %d tokens and %d experts", w.Shape(), t, experts)
		}
		coefOf = func(e int) []float32 {
			coef, hit := make([]float32, t), false
			for i := range t {
				coef[i] = wv[i*experts+e]
				hit = hit || coef[i] != 0
			}
			if !hit {
				return nil
			}
			return coef
		}
	} else {
		iv, err := b.Download(idx)
		if err != nil {
			return nil, err
		}
		k := idx.Shape()[len(idx.Shape())-1]
		if len(iv) != t*k || len(wv) != t*k {
			return nil, fmt.Errorf("experts: %d tokens, routes %v and %v", t, idx.Shape(), w.Shape())
		}
		coefOf = func(e int) []float32 {
			coef, hit := make([]float32, t), false
			for i := range t * k {
				if int(iv[i]) == e {
					// an expert a token picks more than once (routes
					// looked up by token id, not a top-k) weighs it
					// by the picks' sum, as torch's index_add of each
					// pick's product does (one pick: w itself, exactly)
					coef[i/k], hit = coef[i/k]+wv[i], true
				}
			}
			if !hit {
				return nil
			}
			return coef
		}
	}
	accSpec := s // every partial sum rounded
	if !s.Has(exec.RoundAccum) {
		accSpec = exec.Out(precision.F32)
	}
	var acc exec.Tensor
	for e := range experts {
		coef := coefOf(e)
		if coef == nil {
			continue
		}
		y, err := expertOnce(b, x, expertWeights{w1, w2, b1, b2}, e, inner, coef, act, upFirst, p, s)
		if err != nil {
			if acc != nil {
				b.Free(acc)
			}
			return nil, err
		}
		if acc == nil {
			acc = y
			continue
		}
		sum, err := b.Add(acc, y, accSpec)
		b.Free(acc)
		b.Free(y)
		if err != nil {
			return nil, err
		}
		acc = sum
	}
	if acc == nil {
		return b.Upload(make([]float32, xs[0]*xs[1]), xs, s.Out)
	}
	if acc.Format() == s.Out {
		return acc, nil
	}
	defer b.Free(acc)
	return b.Cast(acc, s.Out)
}

func shapeOf(t exec.Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape()
}

// expertWeights are the experts' stacked weights and optional biases.
type expertWeights struct{ w1, w2, b1, b2 exec.Tensor }

// expertOnce is coef ⊙ expert_e(x), coef [T] the tokens' weights for e:
// composed of the backend's own ops, each rounding to s.Out as the
// reference's tensor ops do.
func expertOnce(b exec.Backend, x exec.Tensor, ws expertWeights, e, inner int, coef []float32, act exec.ActKind, upFirst bool, p ExpertsParams, s exec.Spec) (exec.Tensor, error) {
	sc := &scratch{b: b}
	defer sc.free()
	keep := sc.keep
	row := func(w exec.Tensor) (exec.Tensor, error) {
		if w == nil {
			return nil, nil
		}
		r, err := keep(b.Slice(w, 0, e, e+1))
		if err != nil {
			return nil, err
		}
		return keep(b.Reshape(r, w.Shape()[1:]))
	}
	scalar := func(v float32) (exec.Tensor, error) { return keep(b.Upload([]float32{v}, []int{1}, precision.F32)) }
	we1, err := row(ws.w1)
	if err != nil {
		return nil, err
	}
	be1, err := row(ws.b1)
	if err != nil {
		return nil, err
	}
	h, err := keep(b.Linear(x, we1, be1, expertLinear(s)))
	if err != nil {
		return nil, err
	}
	if p.Ungated {
		g, err := keep(b.Act(h, act, s))
		if err != nil {
			return nil, err
		}
		if p.Squared {
			if g, err = keep(b.Mul(g, g, s)); err != nil {
				return nil, err
			}
		}
		return expertDown(b, sc, g, ws, row, coef, s)
	}
	gate, err := keep(b.Slice(h, 1, 0, inner))
	if err != nil {
		return nil, err
	}
	up, err := keep(b.Slice(h, 1, inner, 2*inner))
	if err != nil {
		return nil, err
	}
	if upFirst {
		gate, up = up, gate
	}
	if p.Limit > 0 {
		hi, err := scalar(p.Limit)
		if err != nil {
			return nil, err
		}
		lo, err := scalar(-p.Limit)
		if err != nil {
			return nil, err
		}
		if gate, err = keep(b.Minimum(gate, hi, s)); err != nil {
			return nil, err
		}
		if up, err = keep(b.Minimum(up, hi, s)); err != nil {
			return nil, err
		}
		if up, err = keep(b.Maximum(up, lo, s)); err != nil {
			return nil, err
		}
	}
	if p.UpOffset != 0 {
		c, err := scalar(p.UpOffset)
		if err != nil {
			return nil, err
		}
		if up, err = keep(b.Add(up, c, s)); err != nil {
			return nil, err
		}
	}
	var g exec.Tensor
	if p.Beta > 0 {
		// gate·σ(β·gate), as written: three ops, each rounded
		beta, err := scalar(p.Beta)
		if err != nil {
			return nil, err
		}
		z, err := keep(b.Mul(gate, beta, s))
		if err != nil {
			return nil, err
		}
		if z, err = keep(b.Act(z, exec.ActSigmoid, s)); err != nil {
			return nil, err
		}
		if z, err = keep(b.Mul(gate, z, s)); err != nil {
			return nil, err
		}
		g, err = keep(b.Mul(up, z, s))
		if err != nil {
			return nil, err
		}
	} else if g, err = keep(b.GLU(gate, up, act, s)); err != nil {
		return nil, err
	}
	return expertDown(b, sc, g, ws, row, coef, s)
}

// expertDown is coef ⊙ (g·w2ᵀ + b2) for one expert's unit output g.
func expertDown(b exec.Backend, sc *scratch, g exec.Tensor, ws expertWeights, row func(exec.Tensor) (exec.Tensor, error), coef []float32, s exec.Spec) (exec.Tensor, error) {
	keep := sc.keep
	we2, err := row(ws.w2)
	if err != nil {
		return nil, err
	}
	be2, err := row(ws.b2)
	if err != nil {
		return nil, err
	}
	y, err := keep(b.Linear(g, we2, be2, expertLinear(s)))
	if err != nil {
		return nil, err
	}
	c, err := keep(b.Upload(coef, []int{len(coef), 1}, s.Out))
	if err != nil {
		return nil, err
	}
	return b.Mul(y, c, s)
}

// expertLinear is an expert's projections' spec: the experts' own, less
// RoundAccum, which stores the sum over the experts (a Linear would read
// it as its products' sums stored one at a time).
func expertLinear(s exec.Spec) exec.Spec {
	s.Round &^= exec.RoundAccum
	return s
}
