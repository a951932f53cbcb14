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

// TestRankUnderMasks: the target is a banded attention (an additive mask
// of finfo.min outside |i − j| ≤ 2, which the scope holds). Without the
// mask every choice is far off, and decoys (keys with noise) score better
// than the true operands; ranked under the mask the true operands come
// first, so they reach the refinement slots. A learned bias (no large
// negatives) is not a mask and leaves the order as it was.
func TestRankUnderMasks(t *testing.T) {
	bf := precision.BF16
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(bf)}
	r := rand.New(rand.NewPCG(3, 17))
	rnd := func(shape ...int) *val {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := &val{shape: shape, data: make([]float32, n), format: bf}
		for i := range v.data {
			v.data[i] = bf.Round(float32(r.NormFloat64()))
		}
		return v
	}
	const sq, heads, d = 8, 2, 16
	q, k, v := rnd(1, sq, heads*d), rnd(1, sq, heads*d), rnd(1, sq, heads*d)
	mask := &val{shape: []int{1, 1, sq, sq}, data: make([]float32, sq*sq), format: bf}
	for i := range sq {
		for j := range sq {
			if math.Abs(float64(i-j)) > 2 {
				mask.data[i*sq+j] = bf.Round(-math.MaxFloat32)
			}
		}
	}
	params := exec.AttentionParams{Heads: heads, KVHeads: heads}
	run := func(k *val, bias *val) *val {
		out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: params}, args: []*val{q, k, v, nil, bias, nil}, out: bf})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	target := run(k, mask)
	var all []attnChoice
	for i := range 8 { // decoys: the keys with noise, given better first-stage scores
		noisy := &val{shape: k.shape, data: make([]float32, len(k.data)), format: bf}
		for j, x := range k.data {
			noisy.data[j] = bf.Round(x + float32(0.8*r.NormFloat64()))
		}
		all = append(all, attnChoice{q: q, k: noisy, v: v, headDim: d, params: params, score: 0.1 + 0.01*float64(i), label: "decoy"})
	}
	truth := attnChoice{q: q, k: k, v: v, headDim: d, params: params, score: relRMS(bf, run(k, nil).data, target.data), label: "truth"}
	if truth.score < 0.2 {
		t.Fatalf("the true operands score %.3g unmasked: the case does not test what it says", truth.score)
	}
	all = append(all, truth)

	learned := &val{shape: mask.shape, data: make([]float32, len(mask.data)), format: bf}
	for i := range learned.data {
		learned.data[i] = bf.Round(float32(r.NormFloat64()))
	}
	sc := &scope{vals: []*val{learned}}
	s.rankUnderMasks(all, target, sc)
	if all[0].label != "decoy" || all[len(all)-1].label != "truth" {
		t.Errorf("a learned bias reordered the choices: first %q, last %q", all[0].label, all[len(all)-1].label)
	}
	sc = &scope{vals: []*val{learned, mask}}
	s.rankUnderMasks(all, target, sc)
	if all[0].label != "truth" {
		t.Errorf("ranked under the mask, first is %q, want the true operands", all[0].label)
	}
	if all[0].score != truth.score {
		t.Errorf("ranking changed a choice's score: %.3g, want %.3g", all[0].score, truth.score)
	}
}
