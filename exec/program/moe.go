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
}

// RouteScores are the score functions a router may apply.
var RouteScores = []string{"softmax", "sigmoid", ""}

// routeHost picks each row's K largest entries of x [.., E] (after a
// softmax in f32 when p.Softmax): their weights, rounded to s.Out, and
// their indices (as f32), largest first, ties to the lower index (the
// higher with p.TiesHigh). A host step: router logits are tokens × experts.
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
	w, idx := make([]float32, rows*p.K), make([]float32, rows*p.K)
	order := make([]int, e)
	for r := range rows {
		row := v[r*e : (r+1)*e]
		switch p.Score {
		case "softmax":
			row = softmax32(row)
		case "sigmoid":
			row = sigmoid32(row)
		case "":
		default:
			return nil, fmt.Errorf("route: unknown score function %q", p.Score)
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
		var sum float32
		for j := range p.K {
			sum += row[order[j]]
		}
		for j := range p.K {
			x := row[order[j]]
			if p.Normalize {
				x /= sum
			}
			if p.Scale != 0 {
				x *= p.Scale
			}
			w[r*p.K+j], idx[r*p.K+j] = s.Out.Round(x), float32(order[j])
		}
	}
	out := append(slices.Clone(shape[:len(shape)-1]), p.K)
	wt, err := b.Upload(w, out, s.Out)
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

// expertsRun is a mixture of experts over tokens x [T, D]: each token's
// output is Σ_j w[t, j] · expert_{idx[t, j]}(x[t]), where expert e is
// down_e(act(gate_e(x)) · up_e(x)) with w1 [E, 2I, D] holding gate then
// up (or up then gate when upFirst), w2 [E, D, I]; added expert by
// expert in increasing order, as index_add_ over the experts a batch hits.
// Every expert runs on every token, its weight zero where not chosen
// (the same sums: a token's unchosen experts add exact zeros).
func expertsRun(b exec.Backend, x, idx, w, w1, w2 exec.Tensor, act exec.ActKind, upFirst bool, s exec.Spec) (exec.Tensor, error) {
	xs, ws1, ws2 := x.Shape(), w1.Shape(), w2.Shape()
	if len(xs) != 2 || len(ws1) != 3 || len(ws2) != 3 || ws1[0] != ws2[0] || ws1[2] != xs[1] || ws2[1] != xs[1] || ws1[1] != 2*ws2[2] {
		return nil, fmt.Errorf("experts: tokens %v, w1 %v, w2 %v", xs, ws1, ws2)
	}
	iv, err := b.Download(idx)
	if err != nil {
		return nil, err
	}
	wv, err := b.Download(w)
	if err != nil {
		return nil, err
	}
	t, k, inner := xs[0], idx.Shape()[len(idx.Shape())-1], ws2[2]
	if len(iv) != t*k || len(wv) != t*k {
		return nil, fmt.Errorf("experts: %d tokens, routes %v and %v", t, idx.Shape(), w.Shape())
	}
	var acc exec.Tensor
	for e := range ws1[0] {
		coef := make([]float32, t)
		hit := false
		for i := range t * k {
			if int(iv[i]) == e {
				coef[i/k], hit = wv[i], true
			}
		}
		if !hit {
			continue
		}
		y, err := expertOnce(b, x, w1, w2, e, inner, coef, act, upFirst, s)
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
		sum, err := b.Add(acc, y, s)
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
	return acc, nil
}

// expertOnce is coef ⊙ expert_e(x), coef [T] the tokens' weights for e.
func expertOnce(b exec.Backend, x, w1, w2 exec.Tensor, e, inner int, coef []float32, act exec.ActKind, upFirst bool, s exec.Spec) (exec.Tensor, error) {
	sc := &scratch{b: b}
	defer sc.free()
	keep := sc.keep
	row := func(w exec.Tensor) (exec.Tensor, error) {
		r, err := keep(b.Slice(w, 0, e, e+1))
		if err != nil {
			return nil, err
		}
		return keep(b.Reshape(r, w.Shape()[1:]))
	}
	we1, err := row(w1)
	if err != nil {
		return nil, err
	}
	h, err := keep(b.Linear(x, we1, nil, s))
	if err != nil {
		return nil, err
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
	g, err := keep(b.GLU(gate, up, act, s))
	if err != nil {
		return nil, err
	}
	we2, err := row(w2)
	if err != nil {
		return nil, err
	}
	y, err := keep(b.Linear(g, we2, nil, s))
	if err != nil {
		return nil, err
	}
	c, err := keep(b.Upload(coef, []int{len(coef), 1}, s.Out))
	if err != nil {
		return nil, err
	}
	return b.Mul(y, c, s)
}
