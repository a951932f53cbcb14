package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// narrowFill is n standard normal values rounded to f.
func narrowFill(r *rand.Rand, n int, f precision.Format) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = f.Round(float32(r.NormFloat64()))
	}
	return out
}

// TestHeldScoresAttention plants GCViT's step-by-step attention in bf16:
// the scope made the scores itself (q·kᵀ plus a position bias, a module's
// output [B, H, Sq, Sk]), the output is their softmax, stored in bf16,
// times v's heads. heldScoresAttention reproduces it bit for bit with a
// softmax and a product, not with the attention op; scores of another
// value explain nothing.
func TestHeldScoresAttention(t *testing.T) {
	const b, n, h, d = 1, 8, 2, 4
	bf := precision.BF16
	r := rand.New(rand.NewPCG(8, 1))
	scores := &val{shape: []int{b, h, n, n}, data: narrowFill(r, b*h*n*n, bf), format: bf, origin: "scores plus a bias", seq: 1}
	v := &val{shape: []int{b, n, h * d}, data: narrowFill(r, b*n*h*d, bf), format: bf, origin: "v", seq: 2}
	sx, _, _ := planted(t, bf, []int{b, n, h * d}, make([]float32, b*n*h*d))
	p := sx.derive(&expr{op: program.OpSoftmax, args: []*val{scores}, out: bf})
	vh := sx.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{sx.reshape(v, []int{b, n, h, d})}, out: bf})
	o := sx.derive(&expr{op: program.OpMatMul, args: []*val{p, vh}, out: bf})
	o = sx.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{o}, out: bf})
	want := sx.reshape(o, []int{b, n, h * d})

	s, sc, target := planted(t, bf, []int{b, n, h * d}, want.data, scores, v)
	sc.own[scores], sc.own[v] = true, true
	got := s.heldScoresAttention(target, sc)
	if got == nil {
		t.Fatal("the softmax of the scope's scores times v not found")
	}
	if e := relRMS(bf, got.data, want.data); e != 0 {
		t.Errorf("rel-RMS %.3g, want bit for bit", e)
	}
	for x := got; x != nil && x.from != nil; x = x.from.args[0] {
		if x.from.op == program.OpAttention {
			t.Fatal("explained with the attention op")
		}
	}
	other := &val{shape: scores.shape, data: narrowFill(r, len(scores.data), bf), format: bf, origin: "other scores", seq: 3}
	s2, sc2, target2 := planted(t, bf, []int{b, n, h * d}, want.data, other, v)
	sc2.own[other], sc2.own[v] = true, true
	if got := s2.heldScoresAttention(target2, sc2); got != nil {
		t.Errorf("explained by the softmax of other scores (rel-RMS %.3g)", relRMS(bf, got.data, want.data))
	}
}

// TestStrideBeyondKernel: a depthwise 3×3 convolution at stride 4, padded
// 1, pools a 16×16 map to 4×4 (MViTv2's keys and values): strides beyond
// the kernel are read off the sizes.
func TestStrideBeyondKernel(t *testing.T) {
	const c = 4
	f := precision.F32
	r := rand.New(rand.NewPCG(3, 9))
	x := &val{shape: []int{1, c, 16, 16}, data: narrowFill(r, c*256, f), format: f, origin: "x", seq: 1}
	w := &val{shape: []int{c, 1, 3, 3}, data: narrowFill(r, c*9, f), format: f, origin: "w", seq: 2, param: true}
	sx, _, _ := planted(t, f, []int{1, c, 4, 4}, make([]float32, c*16))
	want, err := sx.ev.run(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: 1, Groups: c, Stride: 4}}, args: []*val{x, w, nil}, out: f})
	if err != nil {
		t.Fatal(err)
	}
	s, _, target := planted(t, f, []int{1, c, 4, 4}, want.data)
	got := s.fitConv2D(x, []*val{w}, target)
	if got == nil {
		t.Fatal("not explained")
	}
	if st := got.from.attrs.Conv.Stride; st != 4 || relRMS(f, got.data, want.data) > 1e-6 {
		t.Errorf("stride %d, rel-RMS %.3g: want stride 4 exactly", st, relRMS(f, got.data, want.data))
	}
}

// TestSimplifyNarrow: in bf16 a fitted scale (0.338) and a causal mask
// over a few rows buy a little error that is only rounding; simplify
// returns to the default scale, no mask and no ALiBi where those stay
// within twice the fit's error. In f32, an attention that really runs at
// 0.338, causal, with ALiBi keeps all three.
func TestSimplifyNarrow(t *testing.T) {
	const b, n, h, d = 1, 4, 2, 8
	r := rand.New(rand.NewPCG(2, 2))
	for _, c := range []struct {
		f         precision.Format
		trueScale float32
		wantScale float32
		wantMask  exec.MaskKind
		wantALiBi bool
	}{
		{precision.BF16, 0, 0, exec.MaskNone, false},
		{precision.F32, 0.338, 0.338, exec.MaskCausal, true},
	} {
		mk := func(origin string, seq int) *val {
			return &val{shape: []int{b, n, h * d}, data: narrowFill(r, b*n*h*d, c.f), format: c.f, origin: origin, seq: seq}
		}
		q, k, v := mk("q", 1), mk("k", 2), mk("v", 3)
		sx, _, _ := planted(t, c.f, []int{b, n, h * d}, make([]float32, b*n*h*d))
		truth := exec.AttentionParams{Heads: h, KVHeads: h, Scale: c.trueScale}
		if c.f == precision.F32 {
			truth.Mask, truth.ALiBi = exec.MaskCausal, true
		}
		want, err := sx.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: truth}, args: []*val{q, k, v, nil, nil, nil}, out: c.f})
		if err != nil {
			t.Fatal(err)
		}
		s, _, target := planted(t, c.f, []int{b, n, h * d}, want.data)
		eval := func(p exec.AttentionParams, r exec.Round) (float64, *val) {
			v, e := s.ev.score(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, nil, nil, nil}, out: c.f, round: r}, target)
			return e, v
		}
		fitted := exec.AttentionParams{Heads: h, KVHeads: h, Scale: 0.338, Mask: exec.MaskCausal, ALiBi: true}
		score, res := eval(fitted, 0)
		ch := attnChoice{q: q, k: k, v: v, headDim: d, params: fitted, score: score, result: res}
		s.simplify(&ch, eval, tolerance(c.f))
		if ch.params.Scale != c.wantScale || ch.params.Mask != c.wantMask || ch.params.ALiBi != c.wantALiBi {
			t.Errorf("%v: simplified to scale %g mask %v alibi %v (score %.3g), want scale %g mask %v alibi %v",
				c.f, ch.params.Scale, ch.params.Mask, ch.params.ALiBi, ch.score, c.wantScale, c.wantMask, c.wantALiBi)
		}
	}
}

// TestSimplifyQueryFirst: an attention at the default scale whose q was
// scaled first and stored in bf16 (q = q * scale; q @ kᵀ, every step
// stored) over 4 keys: under the search's arithmetic (one rounding) a
// fitted scale beats the default by more than twice, which simplify's
// defaults alone would keep; tried written out, the default returns.
func TestSimplifyQueryFirst(t *testing.T) {
	const n, h, d = 4, 1, 8
	f := precision.BF16
	first := exec.RoundEach | exec.RoundQuery
	for seed := range uint64(64) {
		r := rand.New(rand.NewPCG(seed, 11))
		mk := func(origin string, seq int) *val {
			return &val{shape: []int{1, n, h * d}, data: narrowFill(r, n*h*d, f), format: f, origin: origin, seq: seq}
		}
		q, k, v := mk("q", 1), mk("k", 2), mk("v", 3)
		sx, _, _ := planted(t, f, []int{1, n, h * d}, make([]float32, n*h*d))
		canon := exec.AttentionParams{Heads: h, KVHeads: h}
		want, err := sx.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: canon}, args: []*val{q, k, v, nil, nil, nil}, out: f, round: first})
		if err != nil {
			t.Fatal(err)
		}
		s, _, target := planted(t, f, []int{1, n, h * d}, want.data)
		eval := func(p exec.AttentionParams, r exec.Round) (float64, *val) {
			v, e := s.ev.score(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, nil, nil, nil}, out: f, round: r}, target)
			return e, v
		}
		fit := float32(s.searchParam(func(x float64) float64 {
			e, _ := eval(exec.AttentionParams{Heads: h, KVHeads: h, Scale: float32(x)}, 0)
			return e
		}, 0.2, 0.5))
		fitted := exec.AttentionParams{Heads: h, KVHeads: h, Scale: fit}
		score, res := eval(fitted, 0)
		if e, _ := eval(canon, 0); e <= math.Max(1.05*score, math.Min(2*score, tolerance(f)/2)) {
			continue // the default is near enough without the written-out arithmetic: no case
		}
		ch := attnChoice{q: q, k: k, v: v, headDim: d, params: fitted, score: score, result: res}
		s.simplify(&ch, eval, tolerance(f))
		if ch.params.Scale != 0 {
			t.Errorf("seed %d: simplified to scale %g (fit %g, score %.3g), want the default", seed, ch.params.Scale, fit, ch.score)
		}
		if ch.score != 0 {
			t.Errorf("seed %d: the default written out scores %.3g, want 0 (the planted arithmetic)", seed, ch.score)
		}
		return
	}
	t.Fatal("no seed where a fitted scale beats the default by twice: the test shows nothing")
}

// TestAttentionHeld: an attention's output lies within its values'
// columns (widened to 0); the same output times 3 lies outside them, and
// the attention search is not run on it.
func TestAttentionHeld(t *testing.T) {
	const n, d = 8, 4
	f := precision.F32
	qd, kd, vd, out := attentionOfRandom(rand.New(rand.NewPCG(6, 6)), n, d)
	tripled := make([]float32, len(out))
	for i, x := range out {
		tripled[i] = 3 * x
	}
	mk := func(data []float32, origin string, seq int) *val {
		return &val{shape: []int{1, n, d}, data: data, format: f, origin: origin, seq: seq}
	}
	q, k, v := mk(qd, "q", 1), mk(kd, "k", 2), mk(vd, "v", 3)
	s, sc, target := planted(t, f, []int{1, n, d}, out, q, k, v)
	sc.own[q], sc.own[k], sc.own[v] = true, true, true
	if !s.attentionHeld(target, sc) {
		t.Error("an attention's output not held by its values")
	}
	if got := s.attention(target, sc); got == nil || relRMS(f, got.data, out) > 1e-5 {
		t.Fatal("the attention not found")
	}
	s3, sc3, t3 := planted(t, f, []int{1, n, d}, tripled, q, k, v)
	sc3.own[q], sc3.own[k], sc3.own[v] = true, true, true
	if s3.attentionHeld(t3, sc3) {
		t.Error("three times an attention's output held by its values")
	}
	if math.IsNaN(float64(t3.data[0])) {
		t.Fatal("bad plant")
	}
}

// TestAttentionPlusOneHead: MViTv2's first stage adds its pooled queries
// to the attention's output before the heads are joined, with one head:
// [B, 1, S, D] beside the target [B, S, D].
func TestAttentionPlusOneHead(t *testing.T) {
	const n, d = 8, 8
	f := precision.F32
	qd, kd, vd, out := attentionOfRandom(rand.New(rand.NewPCG(7, 3)), n, d)
	for i := range out {
		out[i] += qd[i]
	}
	q := &val{shape: []int{1, n, d}, data: qd, format: f, origin: "q", seq: 1}
	k := &val{shape: []int{1, n, d}, data: kd, format: f, origin: "k", seq: 2}
	v := &val{shape: []int{1, n, d}, data: vd, format: f, origin: "v", seq: 3}
	q4 := &val{shape: []int{1, 1, n, d}, data: qd, format: f, origin: "q per head", seq: 4}
	s, sc, target := planted(t, f, []int{1, n, d}, out, q, k, v, q4)
	for _, x := range []*val{q, k, v, q4} {
		sc.own[x] = true
	}
	got := s.attentionPlus(target, sc, sc.vals)
	if got == nil || relRMS(f, got.data, out) > 1e-5 {
		t.Fatalf("attention plus the one head's queries not found (%v)", got)
	}
}

// TestTighterThanACopy: in bf16, attention whose probabilities nearly
// pick each row's own value (queries a multiple of the keys: LeViT's
// position biases at random weights) is within tolerance of v itself,
// but not exact; a copy that is merely close is close by chance, and glue
// takes the attention, which reproduces the target bit for bit.
func TestTighterThanACopy(t *testing.T) {
	const n, d = 8, 8
	bf := precision.BF16
	r := rand.New(rand.NewPCG(11, 5))
	kd, vd := narrowFill(r, n*d, bf), narrowFill(r, n*d, bf)
	qd := make([]float32, len(kd))
	for i, x := range kd {
		qd[i] = bf.Round(4 * x)
	}
	mk := func(data []float32, origin string, seq int) *val {
		return &val{shape: []int{1, n, d}, data: data, format: bf, origin: origin, seq: seq}
	}
	q, k, v := mk(qd, "q", 1), mk(kd, "k", 2), mk(vd, "v", 3)
	sx, _, _ := planted(t, bf, []int{1, n, d}, make([]float32, n*d))
	want, err := sx.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: 1, KVHeads: 1}}, args: []*val{q, k, v, nil, nil, nil}, out: bf})
	if err != nil {
		t.Fatal(err)
	}
	e := relRMS(bf, vd, want.data)
	if e <= looseFloor(bf) || e > tolerance(bf) {
		t.Fatalf("bad plant: v is %.3g from the output, want a near miss", e)
	}
	s, sc, target := planted(t, bf, []int{1, n, d}, want.data, q, k, v)
	sc.own[q], sc.own[k], sc.own[v] = true, true, true
	got := s.glueIn(target, sc)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(bf, got.data, want.data); e != 0 {
		t.Errorf("explained to rel-RMS %.3g (v itself is %.3g): want the attention, bit for bit", e, relRMS(bf, vd, want.data))
	}
}

// attentionOfRandom is q, k and v [n, d] of standard normal f32 values
// and their one-head attention, computed in float64 (plantedAttention).
func attentionOfRandom(r *rand.Rand, n, d int) (q, k, v, out []float32) {
	f := precision.F32
	q, k, v = narrowFill(r, n*d, f), narrowFill(r, n*d, f), narrowFill(r, n*d, f)
	out = make([]float32, n*d)
	at := func(x []float32) func(i, c int) float64 { return func(i, c int) float64 { return float64(x[i*d+c]) } }
	plantedAttention(n, d, at(q), at(k), at(v), func(i, c int, y float64) { out[i*d+c] = float32(y) })
	return q, k, v, out
}

// TestLooksLikeScores: per-head queries [B, H, S, D] with D = S look like
// scores to heldScoresAttention; at small weights (a near-uniform
// attention, MobileViT's at random init) their softmax times v is within
// bf16's tolerance of the attention's output, not near exact. The
// attention op, closer, explains it instead.
func TestLooksLikeScores(t *testing.T) {
	const b, n, h, d = 1, 8, 2, 8
	bf := precision.BF16
	r := rand.New(rand.NewPCG(12, 4))
	small := func(origin string, seq int) *val {
		x := narrowFill(r, b*n*h*d, bf)
		for i := range x {
			x[i] = bf.Round(0.02 * x[i])
		}
		return &val{shape: []int{b, n, h * d}, data: x, format: bf, origin: origin, seq: seq}
	}
	q, k := small("q", 1), small("k", 2)
	vd := narrowFill(r, b*n*h*d, bf)
	for i := range vd {
		vd[i] = bf.Round(1 + 0.5*vd[i]) // values away from 0: the output is no cancellation
	}
	v := &val{shape: []int{b, n, h * d}, data: vd, format: bf, origin: "v", seq: 3}
	sx, _, _ := planted(t, bf, []int{b, n, h * d}, make([]float32, b*n*h*d))
	want, err := sx.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: h, KVHeads: h}}, args: []*val{q, k, v, nil, nil, nil}, out: bf})
	if err != nil {
		t.Fatal(err)
	}
	q4 := sx.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{sx.reshape(q, []int{b, n, h, d})}, out: bf})
	s, sc, target := planted(t, bf, []int{b, n, h * d}, want.data, q, k, v, q4)
	for _, x := range []*val{q, k, v, q4} {
		sc.own[x] = true
	}
	held := s.heldScoresAttention(target, sc)
	if held == nil {
		t.Fatal("bad plant: the queries' softmax times v is not within tolerance, nothing to choose between")
	}
	eh := relRMS(bf, held.data, want.data)
	got := s.heldOrAttention(held, target, sc)
	if e := relRMS(bf, got.data, want.data); e >= eh {
		t.Errorf("kept the queries' softmax times v (rel-RMS %.3g); the attention op reproduces it to %.3g", eh, e)
	}
}

// TestHeldOneCell: EfficientViT-M's last stage has one cell, so each
// head's attention is its v; the next head's input, bf16(v + x), minus x
// leaves v off by the sum's rounding, which for a column where x is far
// larger than v is more than 2% of v: a target of a few rows is always
// held (the search is cheap there), so the one-key attention is found.
func TestHeldOneCell(t *testing.T) {
	bf := precision.BF16
	v := &val{shape: []int{1, 1, 4}, data: []float32{0.01, 0.5, -0.25, 1}, format: bf, origin: "v", seq: 1}
	x := []float32{8, 0.5, 0.25, -1}
	rest := make([]float32, 4)
	for i := range rest {
		rest[i] = bf.Round(v.data[i]+x[i]) - x[i]
	}
	s, sc, target := planted(t, bf, []int{1, 1, 4}, rest, v)
	sc.own[v] = true
	if !s.heldByValues(target, sc) {
		t.Error("one cell's v, off by the sum's rounding, not held")
	}
}
