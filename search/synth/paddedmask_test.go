package synth

import (
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestPaddedCausalMask: (1 − m)·c over a padding mask of 4 keys, padded
// to 6, plus c above the diagonal, repeated for 2 heads, is made from m;
// without the causal part too; values no such mask makes are not.
func TestPaddedCausalMask(t *testing.T) {
	const l, sq, heads = 4, 6, 2
	const c = -10000
	m := &val{shape: []int{1, l}, data: []float32{1, 1, 0, 1}, format: precision.F32}
	build := func(causal bool) *val {
		data := make([]float32, 0, heads*sq*sq)
		for range heads {
			for i := range sq {
				for j := range sq {
					var x float32
					if j < l && m.data[j] == 0 {
						x += c
					}
					if causal && j > i {
						x += c
					}
					data = append(data, x)
				}
			}
		}
		return &val{shape: []int{heads, sq, sq}, data: data, format: precision.F32}
	}
	for _, causal := range []bool{true, false} {
		target := build(causal)
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.paddedCausalMask(target, []*val{m})
		if v == nil {
			t.Fatalf("causal %v: not explained", causal)
		}
		if e := relRMS(precision.F32, v.data, target.data); e != 0 {
			t.Errorf("causal %v: rel-RMS %g", causal, e)
		}
	}
	other := build(true)
	other.data[7] = 3
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if v := s.paddedCausalMask(other, []*val{m}); v != nil {
		t.Errorf("a mask with a stray entry explained as %s", v.from.label)
	}
}
