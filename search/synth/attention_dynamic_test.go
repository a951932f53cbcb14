package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestSoftplus: the softplus written in the backend's ops is log(1 + e^x)
// to within one f32 step of the larger of the value and 1 (the composed
// log(1 + e^−|x|) loses what lies under 1's last bit), and exactly x far
// right of 0, where torch's threshold returns x.
func TestSoftplus(t *testing.T) {
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	xs := []float32{-100, -20, -3, -0.5, 0, 1e-3, 0.5, 3, 19.5, 30, 100}
	got := s.softplus(&val{shape: []int{len(xs)}, data: xs, format: precision.F32})
	if got == nil {
		t.Fatal("softplus did not derive")
	}
	for i, x := range xs {
		want := math.Log1p(math.Exp(float64(x)))
		if d := math.Abs(float64(got.data[i]) - want); d > 0x1p-23*math.Max(math.Abs(want), 1) {
			t.Errorf("softplus(%g) = %g, want %g", x, got.data[i], want)
		}
		if x >= 20 && got.data[i] != x {
			t.Errorf("softplus(%g) = %g, want %g itself", x, got.data[i], x)
		}
	}
}

// TestPerHead: a bias of one column per key head [B, Sk, KV] laid out for
// H query heads: query head h reads key head h·KV/H's column, every key
// in order.
func TestPerHead(t *testing.T) {
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	// B = 1, Sk = 3, KV = 2: key j's columns are (10 + j, 20 + j)
	b := &val{shape: []int{1, 3, 2}, data: []float32{10, 20, 11, 21, 12, 22}, format: precision.F32}
	got := s.perHead(b, 4)
	if got == nil {
		t.Fatal("perHead did not derive")
	}
	want := []float32{10, 11, 12, 10, 11, 12, 20, 21, 22, 20, 21, 22}
	if len(got.shape) != 4 || got.shape[0] != 1 || got.shape[1] != 4 || got.shape[2] != 1 || got.shape[3] != 3 {
		t.Fatalf("shape %v, want [1 4 1 3]", got.shape)
	}
	for i := range want {
		if got.data[i] != want[i] {
			t.Fatalf("data %v, want %v", got.data, want)
		}
	}
}

// TestRefineTriesEveryBias: refine keeps the bias that explains the target
// best, not the first within the format's tolerance. The decoy (the true
// bias with an error of a fiftieth, listed first) passes a bf16 run's
// tolerance; the true bias reproduces the target exactly and must win.
func TestRefineTriesEveryBias(t *testing.T) {
	bf := precision.BF16
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(bf)}
	r := rand.New(rand.NewPCG(7, 11))
	rnd := func(scale float64, shape ...int) *val {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := &val{shape: shape, data: make([]float32, n), format: bf}
		for i := range v.data {
			v.data[i] = bf.Round(float32(scale * r.NormFloat64()))
		}
		return v
	}
	const sq, heads, d = 12, 2, 16
	q, k, v := rnd(1, 1, sq, heads*d), rnd(1, 1, sq, heads*d), rnd(1, 1, sq, heads*d)
	truth := rnd(2, 1, heads, 1, sq)
	decoy := &val{shape: truth.shape, data: make([]float32, len(truth.data)), format: bf}
	for i, x := range truth.data {
		decoy.data[i] = bf.Round(x + float32(0.02*r.NormFloat64()))
	}
	params := exec.AttentionParams{Heads: heads}
	run := func(bias *val) *val {
		out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: params}, args: []*val{q, k, v, nil, bias, nil}, out: bf})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	target := run(truth)
	plain := run(nil)
	if sc := relRMS(bf, run(decoy).data, target.data); sc > tolerance(bf) || sc == 0 {
		t.Fatalf("the decoy's error %.3g: the case does not test what it says (want within %.3g, not 0)", sc, tolerance(bf))
	}
	ch := attnChoice{q: q, k: k, v: v, headDim: d, params: params, score: relRMS(bf, plain.data, target.data), result: plain}
	s.refine(&ch, target, []*val{decoy, truth}, nil)
	if ch.bias != truth || ch.score != 0 {
		t.Errorf("refine kept bias %p with error %.3g (label %q), want the true bias %p, exact", ch.bias, ch.score, ch.label, truth)
	}
}
