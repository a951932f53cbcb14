package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestPiecewiseJoin: channels joined from many equal runs, each a value
// or the sum of two (MarkupLM's xpath input), are read run by run; a run
// no value makes reads as nothing.
func TestPiecewiseJoin(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 1))
	const k, w = 9, 4
	var vals []*val
	var runs [][]float32
	for p := range k {
		a, b := randVal(rng, 1, 3, w), randVal(rng, 1, 3, w)
		vals = append(vals, a, b)
		run := slices.Clone(a.data)
		if p%2 == 1 { // odd runs the sum of the pair
			for i := range run {
				run[i] += b.data[i]
			}
		}
		runs = append(runs, run)
	}
	joined := func(runs [][]float32) *val {
		tv := &val{shape: []int{1, 3, k * w}, format: precision.F32}
		for r := range 3 {
			for _, run := range runs {
				tv.data = append(tv.data, run[r*w:(r+1)*w]...)
			}
		}
		return tv
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	tv := joined(runs)
	v := s.piecewiseJoin(tv, vals)
	if v == nil || relRMS(precision.F32, v.data, tv.data) > 0 {
		t.Fatalf("%d runs of %d channels not read: %v", k, w, v)
	}
	runs[4] = randVal(rng, 1, 3, w).data // a run nothing makes
	if v := s.piecewiseJoin(joined(runs), vals); v != nil {
		t.Errorf("a run no value makes was read: %v", v.shape)
	}
}

// TestFilled: one number everywhere is a scalar repeated; anything else
// is not.
func TestFilled(t *testing.T) {
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	tv := &val{shape: []int{1, 3, 2}, data: []float32{216, 216, 216, 216, 216, 216}, format: precision.F32}
	if v := s.filled(tv); v == nil || !slices.Equal(v.shape, tv.shape) || !slices.Equal(v.data, tv.data) {
		t.Fatalf("216 everywhere: %v", v)
	}
	tv.data[5] = 215
	if v := s.filled(tv); v != nil {
		t.Errorf("a value with two numbers was filled: %v", v.data)
	}
}
