package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestSimplifyDropsFlatCap: a logit cap the coordinate descent fitted far
// above the scores (it bends them less than the format's rounding) is
// dropped where no cap reproduces the target as well; a cap that shapes
// the scores (made with one, scores well past it) is kept.
func TestSimplifyDropsFlatCap(t *testing.T) {
	f := precision.F32
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(f)}
	rng := rand.New(rand.NewPCG(4, 9))
	rnd := func(scale float64, shape ...int) *val { return normalVal(rng, f, scale, shape...) }
	const sq, heads, d = 8, 2, 8
	for _, tc := range []struct {
		name      string
		made, fit float32 // the target's cap, the fitted one
		scale     float64 // of q and k: how far the scores reach
		keep      bool
	}{
		{"flat", 0, 200, 1, false},
		{"shaping", 2, 2, 3, true},
	} {
		q, k, v := rnd(tc.scale, 1, sq, heads*d), rnd(tc.scale, 1, sq, heads*d), rnd(1, 1, sq, heads*d)
		run := func(cap float32) *val {
			out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: heads, Softcap: cap}}, args: []*val{q, k, v, nil, nil, nil}, out: f})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		target := run(tc.made)
		fitted := run(tc.fit)
		ch := attnChoice{q: q, k: k, v: v, headDim: d, params: exec.AttentionParams{Heads: heads, Softcap: tc.fit}, score: relRMS(f, fitted.data, target.data), result: fitted}
		if tc.keep {
			if e := relRMS(f, run(0).data, target.data); e <= tolerance(f) {
				t.Fatalf("%s: no cap reproduces the target (%.3g): the case does not test what it says", tc.name, e)
			}
		}
		eval := func(p exec.AttentionParams, r exec.Round) (float64, *val) {
			out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, nil, nil, nil}, out: f, round: r})
			if err != nil {
				return 1, nil
			}
			return relRMS(f, out.data, target.data), out
		}
		s.simplify(&ch, eval, tolerance(f))
		if kept := ch.params.Softcap != 0; kept != tc.keep {
			t.Errorf("%s: cap %g after simplify, want kept=%v", tc.name, ch.params.Softcap, tc.keep)
		}
	}
}

// normalVal is a value of shape, each entry scale·N(0, 1) in format f.
func normalVal(rng *rand.Rand, f precision.Format, scale float64, shape ...int) *val {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := &val{shape: shape, data: make([]float32, n), format: f}
	for i := range v.data {
		v.data[i] = f.Round(float32(scale * rng.NormFloat64()))
	}
	return v
}
