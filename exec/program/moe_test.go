package program

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestRoute: top-k weights and indices per row, for each score function,
// renormalised and scaled, ties either way.
func TestRoute(t *testing.T) {
	b := cpu.New(1)
	logits := []float32{1, 3, 3, 0, 2, -1, 0.5, 4}
	x, err := b.Upload(logits, []int{2, 4}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	softmax := func(r []float32) []float32 { return softmax32(r) }
	for _, c := range []struct {
		name string
		p    RouteParams
		idx  []float32
		w    func() []float32
	}{
		{"logits, ties low", RouteParams{K: 2}, []float32{1, 2, 3, 0}, func() []float32 { return []float32{3, 3, 4, 2} }},
		{"logits, ties high", RouteParams{K: 2, TiesHigh: true}, []float32{2, 1, 3, 0}, func() []float32 { return []float32{3, 3, 4, 2} }},
		{"softmax", RouteParams{K: 2, Score: "softmax"}, []float32{1, 2, 3, 0}, func() []float32 {
			a, c := softmax(logits[:4]), softmax(logits[4:])
			return []float32{a[1], a[2], c[3], c[0]}
		}},
		{"softmax renormalised, scaled", RouteParams{K: 2, Score: "softmax", Normalize: true, Scale: 2.5}, []float32{1, 2, 3, 0}, func() []float32 {
			a, c := softmax(logits[:4]), softmax(logits[4:])
			return []float32{a[1] / (a[1] + a[2]) * 2.5, a[2] / (a[1] + a[2]) * 2.5, c[3] / (c[3] + c[0]) * 2.5, c[0] / (c[3] + c[0]) * 2.5}
		}},
		{"sigmoid", RouteParams{K: 1, Score: "sigmoid"}, []float32{1, 3}, func() []float32 {
			return []float32{exec.Activate(exec.ActSigmoid, 3, 0), exec.Activate(exec.ActSigmoid, 4, 0)}
		}},
	} {
		outs, err := routeHost(b, x, nil, c.p, exec.Out(precision.F32))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w, _ := b.Download(outs[0])
		idx, _ := b.Download(outs[1])
		if !slices.Equal(idx, c.idx) {
			t.Errorf("%s: indices %v, want %v", c.name, idx, c.idx)
		}
		if want := c.w(); !slices.Equal(w, want) {
			t.Errorf("%s: weights %v, want %v", c.name, w, want)
		}
	}
	// a bias moves the choice, not the weights: row 0 picks 0 and 1 (1 + 3
	// beats 3 + 0), weighted by the logits themselves
	bias, err := b.Upload([]float32{3, 0, 0, 0}, []int{4}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := routeHost(b, x, bias, RouteParams{K: 2}, exec.Out(precision.F32))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := b.Download(outs[0])
	idx, _ := b.Download(outs[1])
	if !slices.Equal(idx, []float32{0, 1, 0, 3}) || !slices.Equal(w, []float32{1, 3, 2, 4}) {
		t.Errorf("biased choice: indices %v weights %v, want [0 1 0 3] [1 3 2 4]", idx, w)
	}
	// picked on the logits, then a softmax over the two chosen, laid
	// densely at their experts' places
	outs, err = routeHost(b, x, nil, RouteParams{K: 2, Score: "softmax", Chosen: true, Dense: true}, exec.Out(precision.F32))
	if err != nil {
		t.Fatal(err)
	}
	w, _ = b.Download(outs[0])
	idx, _ = b.Download(outs[1])
	a, c := softmax32([]float32{3, 3}), softmax32([]float32{4, 2})
	if want := []float32{0, a[0], a[1], 0, c[1], 0, 0, c[0]}; !slices.Equal(w, want) || !slices.Equal(idx, []float32{1, 2, 3, 0}) {
		t.Errorf("chosen, dense: weights %v indices %v, want %v [1 2 3 0]", w, idx, want)
	}
	if s := outs[0].Shape(); !slices.Equal(s, []int{2, 4}) {
		t.Errorf("dense weights %v, want [2 4]", s)
	}
	if _, err := routeHost(b, x, nil, RouteParams{K: 5}, exec.Out(precision.F32)); err == nil {
		t.Error("top 5 of 4 accepted")
	}
	if _, err := routeHost(b, x, nil, RouteParams{K: 1, Score: "tanh"}, exec.Out(precision.F32)); err == nil {
		t.Error("an unknown score function accepted")
	}
}

// TestStepwiseRoute: each pick the largest logit left, weighted by the
// softmax over the logits left within a relative margin of it. Row
// [2, 1.9, −1, 0.5]: below 2 the distances are 0.05, 1.5 and 0.75; below
// 1.9 (2 gone) 1.526 and 0.737.
func TestStepwiseRoute(t *testing.T) {
	b := cpu.New(1)
	x, err := b.Upload([]float32{2, 1.9, -1, 0.5}, []int{1, 4}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	e := func(d float64) float64 { return math.Exp(-d) }
	for _, c := range []struct {
		name   string
		margin float32
		want   []float64
	}{
		{"no margin: weights of one", 0, []float64{1, 1}},
		{"the near logit shares the first pick", 0.1, []float64{1 / (1 + e(0.1)), 1}},
		{"wider: three, then two", 0.8, []float64{1 / (1 + e(0.1) + e(1.5)), 1 / (1 + e(1.4))}},
		{"every logit left", 2, []float64{1 / (1 + e(0.1) + e(1.5) + e(3)), 1 / (1 + e(1.4) + e(2.9))}},
	} {
		outs, err := routeHost(b, x, nil, RouteParams{K: 2, Stepwise: true, Margin: c.margin}, exec.Out(precision.F32))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w, _ := b.Download(outs[0])
		idx, _ := b.Download(outs[1])
		if !slices.Equal(idx, []float32{0, 1}) {
			t.Errorf("%s: indices %v, want [0 1]", c.name, idx)
		}
		for i, want := range c.want {
			if math.Abs(float64(w[i])-want) > 1e-6 {
				t.Errorf("%s: weights %v, want %v", c.name, w, c.want)
				break
			}
		}
	}
}

// TestExperts: each token is the weighted sum of its chosen experts'
// gated MLPs, computed here by hand.
func TestExperts(t *testing.T) {
	b := cpu.New(1)
	const T, D, I, E = 3, 2, 2, 3
	xs := []float32{1, -1, 0.5, 2, -1.5, 0.25}
	w1 := make([]float32, E*2*I*D) // [E, 2I, D]: gate rows, then up rows
	w2 := make([]float32, E*D*I)   // [E, D, I]
	for i := range w1 {
		w1[i] = float32(math.Sin(float64(i) + 1))
	}
	for i := range w2 {
		w2[i] = float32(math.Cos(float64(i) + 1))
	}
	idx := []float32{0, 2, 1, 0, 2, 1}
	wts := []float32{0.75, 0.25, 0.5, 0.5, 0.9, 0.1}
	up := func(d []float32, s []int) exec.Tensor {
		x, err := b.Upload(d, s, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	got, err := expertsRun(b, up(xs, []int{T, D}), up(idx, []int{T, 2}), up(wts, []int{T, 2}), up(w1, []int{E, 2 * I, D}), up(w2, []int{E, D, I}), nil, nil, exec.ActSiLU, false, ExpertsParams{}, exec.Out(precision.F32))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := b.Download(got)
	expert := func(e int, x []float32) []float64 {
		h := make([]float64, 2*I)
		for r := range 2 * I {
			for c := range D {
				h[r] += float64(w1[(e*2*I+r)*D+c]) * float64(x[c])
			}
		}
		g := make([]float64, I)
		for i := range I {
			g[i] = h[i] / (1 + math.Exp(-h[i])) * h[I+i]
		}
		out := make([]float64, D)
		for r := range D {
			for c := range I {
				out[r] += float64(w2[(e*D+r)*I+c]) * g[c]
			}
		}
		return out
	}
	// unrouted: the rows as E blocks of one token each, block e through expert e alone
	blocks, err := expertsRun(b, up(xs, []int{T, D}), nil, nil, up(w1, []int{E, 2 * I, D}), up(w2, []int{E, D, I}), nil, nil, exec.ActSiLU, false, ExpertsParams{}, exec.Out(precision.F32))
	if err != nil {
		t.Fatal(err)
	}
	yb, _ := b.Download(blocks)
	for e := range E {
		want := expert(e, xs[e*D:(e+1)*D])
		for r := range D {
			if math.Abs(float64(yb[e*D+r])-want[r]) > 1e-5*math.Max(1, math.Abs(want[r])) {
				t.Errorf("block %d channel %d = %v, want %v", e, r, yb[e*D+r], want[r])
			}
		}
	}
	for tok := range T {
		want := make([]float64, D)
		for j := range 2 {
			o := expert(int(idx[tok*2+j]), xs[tok*D:(tok+1)*D])
			for r := range D {
				want[r] += float64(wts[tok*2+j]) * o[r]
			}
		}
		for r := range D {
			if math.Abs(float64(y[tok*D+r])-want[r]) > 1e-5*math.Max(1, math.Abs(want[r])) {
				t.Errorf("token %d channel %d = %v, want %v", tok, r, y[tok*D+r], want[r])
			}
		}
	}
}

// TestOutputThatOutlivesTheForward: a program whose output is a constant
// hands out a copy, so a caller that frees what it gets (a sampler loop)
// does not free the constant under the next forward.
func TestOutputThatOutlivesTheForward(t *testing.T) {
	b := cpu.New(1)
	p := &Program{Values: map[string]*Value{"c": {Name: "c", Kind: Const, Shape: []int{2}, Data: []float32{1, 2}, Format: precision.F32}}, Order: []string{"c"}, Outputs: []string{"c"}}
	if err := p.finalize(); err != nil {
		t.Fatal(err)
	}
	c, err := b.Upload([]float32{1, 2}, []int{2}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	it := &Interpreter{B: b, P: p}
	for step := range 3 {
		outs, err := it.Forward(step, map[string]exec.Tensor{"c": c})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if outs[0] == c {
			t.Fatalf("step %d: the constant itself handed out", step)
		}
		if v, err := b.Download(outs[0]); err != nil || !slices.Equal(v, []float32{1, 2}) {
			t.Fatalf("step %d: %v %v", step, v, err)
		}
		b.Free(outs[0])
	}
}

// TestSoftmaxHost: each row's softmax, rounded once to the output format.
func TestSoftmaxHost(t *testing.T) {
	b := cpu.New(1)
	x, err := b.Upload([]float32{0, 1, 2, 3, 3, 3}, []int{2, 3}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		y, err := softmaxHost(b, x, exec.Out(f))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := b.Download(y)
		want := append(softmax32([]float32{0, 1, 2}), softmax32([]float32{3, 3, 3})...)
		for i := range want {
			want[i] = f.Round(want[i])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: %v, want %v", f, got, want)
		}
	}
}

// TestExpertsUnit: dense routing weights, biases on both projections,
// the clamp, Swish-β and the offset of up, against a hand computation in
// f64 (gate = min(h_g, L), up = clamp(h_u, ±L), unit =
// gate·σ(β·gate)·(up + c)); and the parameters the unit does not define
// refused.
func TestExpertsUnit(t *testing.T) {
	b := cpu.New(1)
	const T, D, I, E = 3, 2, 2, 3
	xs := []float32{1, -1, 0.5, 2, -1.5, 0.25}
	w1, w2 := make([]float32, E*2*I*D), make([]float32, E*D*I)
	b1, b2 := make([]float32, E*2*I), make([]float32, E*D)
	for i := range w1 {
		w1[i] = 3 * float32(math.Sin(float64(i)+1))
	}
	for i := range w2 {
		w2[i] = float32(math.Cos(float64(i) + 1))
	}
	for i := range b1 {
		b1[i] = 0.5 * float32(math.Cos(float64(3*i)))
	}
	for i := range b2 {
		b2[i] = 0.25 * float32(math.Sin(float64(5*i)))
	}
	dense := []float32{0.75, 0, 0.25, 0, 1, 0, 0.5, 0.5, 0} // [T, E]
	up := func(d []float32, s []int) exec.Tensor {
		x, err := b.Upload(d, s, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, p := range []ExpertsParams{{}, {Limit: 2}, {Beta: 1.702}, {UpOffset: 1}, {Beta: 1.702, Limit: 2, UpOffset: 1}} {
		got, err := expertsRun(b, up(xs, []int{T, D}), nil, up(dense, []int{T, E}), up(w1, []int{E, 2 * I, D}), up(w2, []int{E, D, I}),
			up(b1, []int{E, 2 * I}), up(b2, []int{E, D}), exec.ActSiLU, false, p, exec.Out(precision.F32))
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		y, _ := b.Download(got)
		beta := float64(p.Beta)
		if beta == 0 {
			beta = 1
		}
		for tok := range T {
			for r := range D {
				var want float64
				for e := range E {
					wt := float64(dense[tok*E+e])
					h := make([]float64, 2*I)
					for j := range 2 * I {
						h[j] = float64(b1[e*2*I+j])
						for c := range D {
							h[j] += float64(w1[(e*2*I+j)*D+c]) * float64(xs[tok*D+c])
						}
					}
					out := float64(b2[e*D+r])
					for c := range I {
						g, u := h[c], h[I+c]
						if l := float64(p.Limit); l > 0 {
							g, u = math.Min(g, l), math.Max(math.Min(u, l), -l)
						}
						out += float64(w2[(e*D+r)*I+c]) * g / (1 + math.Exp(-beta*g)) * (u + float64(p.UpOffset))
					}
					want += wt * out
				}
				if math.Abs(float64(y[tok*D+r])-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Errorf("%+v: token %d channel %d = %v, want %v", p, tok, r, y[tok*D+r], want)
				}
			}
		}
	}
	for _, c := range []struct {
		act exec.ActKind
		p   ExpertsParams
	}{{exec.ActGELUTanh, ExpertsParams{Beta: 1.702}}, {exec.ActSiLU, ExpertsParams{Limit: -1}}, {exec.ActSiLU, ExpertsParams{UpOffset: float32(math.Inf(1))}}} {
		if _, err := expertsRun(b, up(xs, []int{T, D}), nil, up(dense, []int{T, E}), up(w1, []int{E, 2 * I, D}), up(w2, []int{E, D, I}), nil, nil, c.act, false, c.p, exec.Out(precision.F32)); err == nil {
			t.Errorf("%v %+v accepted", c.act, c.p)
		}
	}
}

// TestExpertsUngated: each expert act(x·w1ᵀ + b1)·w2ᵀ + b2 (no up), or
// with Squared act(·)² (relu², Nemotron-H's experts), weighted by dense
// routing; the params an ungated unit lacks refused, and a squared unit
// that is not ungated.
func TestExpertsUngated(t *testing.T) {
	b := cpu.New(1)
	const T, D, I, E = 3, 2, 3, 2
	xs := []float32{1, -1, 0.5, 2, -1.5, 0.25}
	w1, w2, b1 := make([]float32, E*I*D), make([]float32, E*D*I), make([]float32, E*I)
	for i := range w1 {
		w1[i] = float32(math.Sin(float64(i) + 1))
	}
	for i := range w2 {
		w2[i] = float32(math.Cos(float64(i) + 1))
	}
	for i := range b1 {
		b1[i] = 0.5 * float32(math.Cos(float64(3*i)))
	}
	dense := []float32{0.75, 0, 0, 0.5, 1, 0} // [T, E]: one expert a row, as a top-1 router leaves it
	up := func(d []float32, s []int) exec.Tensor {
		x, err := b.Upload(d, s, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct {
		act     exec.ActKind
		squared bool
		f       func(float64) float64
	}{
		{exec.ActReLU, false, func(h float64) float64 { return math.Max(h, 0) }},
		{exec.ActSiLU, false, func(h float64) float64 { return h / (1 + math.Exp(-h)) }},
		{exec.ActReLU, true, func(h float64) float64 { return math.Max(h, 0) * math.Max(h, 0) }},
	} {
		got, err := expertsRun(b, up(xs, []int{T, D}), nil, up(dense, []int{T, E}), up(w1, []int{E, I, D}), up(w2, []int{E, D, I}), up(b1, []int{E, I}), nil, c.act, false, ExpertsParams{Ungated: true, Squared: c.squared}, exec.Out(precision.F32))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := b.Download(got)
		for tok := range T {
			for r := range D {
				want := 0.0
				for e := range E {
					w := float64(dense[tok*E+e])
					for i := range I {
						h := float64(b1[e*I+i])
						for k := range D {
							h += float64(w1[(e*I+i)*D+k]) * float64(xs[tok*D+k])
						}
						want += w * float64(w2[(e*D+r)*I+i]) * c.f(h)
					}
				}
				if math.Abs(float64(y[tok*D+r])-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Errorf("%v squared=%v: token %d channel %d = %v, want %v", c.act, c.squared, tok, r, y[tok*D+r], want)
				}
			}
		}
	}
	if _, err := expertsRun(b, up(xs, []int{T, D}), nil, up(dense, []int{T, E}), up(w1, []int{E, I, D}), up(w2, []int{E, D, I}), nil, nil, exec.ActReLU, false, ExpertsParams{Ungated: true, UpOffset: 1}, exec.Out(precision.F32)); err == nil {
		t.Error("an ungated unit with an up offset was run, want it refused")
	}
	w1g := append(slices.Clone(w1), w1...) // [E, 2I, D]: a gated unit's
	if _, err := expertsRun(b, up(xs, []int{T, D}), nil, up(dense, []int{T, E}), up(w1g, []int{E, 2 * I, D}), up(w2, []int{E, D, I}), nil, nil, exec.ActReLU, false, ExpertsParams{Squared: true}, exec.Out(precision.F32)); err == nil {
		t.Error("a gated unit squared was run, want it refused")
	}
}

// TestExpertsRepeatedPick: a token that picks one expert more than once
// (routes looked up by token id) is weighted by the picks' sum, as
// torch's index_add of each pick's product sums them: the same result as
// dense weights holding the sums.
func TestExpertsRepeatedPick(t *testing.T) {
	b := cpu.New(1)
	const T, D, I, E = 2, 2, 2, 2
	xs := []float32{1, -1, 0.5, 2}
	w1 := make([]float32, E*2*I*D)
	w2 := make([]float32, E*D*I)
	for i := range w1 {
		w1[i] = float32(math.Sin(float64(i) + 1))
	}
	for i := range w2 {
		w2[i] = float32(math.Cos(float64(i) + 1))
	}
	up := func(d []float32, s []int) exec.Tensor {
		x, err := b.Upload(d, s, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	// token 0 picks expert 0 three times, token 1 expert 1 twice and 0 once
	idx := []float32{0, 0, 0, 1, 0, 1}
	wts := []float32{0.25, 0.5, 0.125, 0.375, 0.25, 0.125}
	dense := []float32{0.25 + 0.5 + 0.125, 0, 0.25, 0.375 + 0.125}
	run := func(idx, w exec.Tensor) []float32 {
		got, err := expertsRun(b, up(xs, []int{T, D}), idx, w, up(w1, []int{E, 2 * I, D}), up(w2, []int{E, D, I}), nil, nil, exec.ActSiLU, false, ExpertsParams{}, exec.Out(precision.F32))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := b.Download(got)
		return y
	}
	routed := run(up(idx, []int{T, 3}), up(wts, []int{T, 3}))
	want := run(nil, up(dense, []int{T, E}))
	if !slices.Equal(routed, want) {
		t.Errorf("repeated picks: %v, want the picks' sums' %v", routed, want)
	}
	if slices.Equal(want, make([]float32, len(want))) {
		t.Error("the dense run is all zeros: the comparison asserts nothing")
	}
}

// TestExpertsAccumulation: a token routed to three experts gets their
// rounded outputs summed in f32 and rounded once by default (transformers'
// f32 buffer), and under RoundAccum each partial sum rounded to the
// storage format (index_add_ into a bf16 buffer), in expert order.
func TestExpertsAccumulation(t *testing.T) {
	b := cpu.New(1)
	const D, I, E = 64, 8, 3
	rng := rand.New(rand.NewPCG(11, 12))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = precision.BF16.Round(float32(rng.NormFloat64()))
		}
		return v
	}
	up := func(d []float32, s []int) exec.Tensor {
		x, err := b.Upload(d, s, precision.BF16)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	xs, w1, w2 := rnd(D), rnd(E*2*I*D), rnd(E*D*I)
	ones := []float32{1}
	run := func(s exec.Spec, idx, wts []float32) []float32 {
		out, err := expertsRun(b, up(xs, []int{1, D}), up(idx, []int{1, len(idx)}), up(wts, []int{1, len(wts)}), up(w1, []int{E, 2 * I, D}), up(w2, []int{E, D, I}), nil, nil, exec.ActSiLU, false, ExpertsParams{}, s)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := b.Download(out)
		return v
	}
	bf := exec.Out(precision.BF16)
	var ys [E][]float32
	for e := range E {
		ys[e] = run(bf, []float32{float32(e)}, ones) // one expert: its rounded output
	}
	once, each := run(bf, []float32{0, 1, 2}, []float32{1, 1, 1}), run(exec.Spec{Out: precision.BF16, Round: exec.RoundAccum}, []float32{0, 1, 2}, []float32{1, 1, 1})
	differ := 0
	for c := range D {
		wantOnce := precision.BF16.Round(ys[0][c] + ys[1][c] + ys[2][c]) // f32 partial sums
		wantEach := precision.BF16.Round(precision.BF16.Round(ys[0][c]+ys[1][c]) + ys[2][c])
		if once[c] != wantOnce {
			t.Errorf("channel %d: f32 sum %g, want %g", c, once[c], wantOnce)
		}
		if each[c] != wantEach {
			t.Errorf("channel %d: rounded sums %g, want %g", c, each[c], wantEach)
		}
		if wantOnce != wantEach {
			differ++
		}
	}
	if differ == 0 {
		t.Error("the two accumulations agree on every channel: the test shows nothing")
	}
}

// TestMeanWritten: a masked mean under RoundWeights|RoundProduct is
// written out in the storage format (weights m/Σm and each product
// rounded to bf16, then summed, rounded once), and differs from the exact
// mean the default computes.
func TestMeanWritten(t *testing.T) {
	b := cpu.New(1)
	const n, d = 4, 16
	rng := rand.New(rand.NewPCG(13, 14))
	xs := make([]float32, n*d)
	for i := range xs {
		xs[i] = precision.BF16.Round(float32(rng.NormFloat64()))
	}
	mask := []float32{1, 1, 1, 0} // three rows: weights of 1/3
	up := func(v []float32, s []int) exec.Tensor {
		x, err := b.Upload(v, s, precision.BF16)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	run := func(s exec.Spec) []float32 {
		out, err := meanHost(b, up(xs, []int{1, n, d}), up(mask, []int{1, n}), 1, s)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := b.Download(out)
		return v
	}
	written := run(exec.Spec{Out: precision.BF16, Round: exec.RoundWeights | exec.RoundProduct})
	exact := run(exec.Out(precision.BF16))
	w := precision.BF16.Round(1.0 / 3)
	differ := 0
	for i := range d {
		var sum, plain float64
		for k := range 3 {
			sum += float64(precision.BF16.Round(xs[k*d+i] * w))
			plain += float64(xs[k*d+i])
		}
		if want := precision.BF16.Round(float32(sum)); written[i] != want {
			t.Errorf("channel %d: written-out mean %g, want %g", i, written[i], want)
		}
		if want := precision.BF16.Round(float32(plain / 3)); exact[i] != want {
			t.Errorf("channel %d: exact mean %g, want %g", i, exact[i], want)
		}
		if written[i] != exact[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("the written-out mean equals the exact one on every channel: the test shows nothing")
	}
}
