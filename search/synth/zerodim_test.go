package synth

import (
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestZeroDimParamInScope: a 0-dim parameter (GLIGEN's gate alpha_attn, a
// scalar nn.Parameter) among a scope's values reaches forms that read a
// parameter's last axis; each must pass it by, not index it. Before,
// paramCrop panicked (index out of range [-1]) and the whole program
// search of GLIGEN's UNet failed.
func TestZeroDimParamInScope(t *testing.T) {
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	alpha := &val{shape: []int{}, data: []float32{0.25}, format: precision.F32, param: true, origin: "fuser.alpha_attn"}
	table := &val{shape: []int{9, 1}, data: []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, format: precision.F32, param: true, origin: "pos"}
	sc := &scope{vals: []*val{alpha, table}}
	c := &val{shape: []int{1, 4, 1}, data: []float32{1, 2, 4, 5}, format: precision.F32}
	tv := &val{shape: []int{1, 4, 1}, data: []float32{1, 2, 4, 5}, format: precision.F32}
	got := s.paramCrop(c, tv, sc)
	if got == nil {
		t.Fatal("the 2x2 window of the 3x3 table is not found")
	}
	if relRMS(precision.F32, got.data, c.data) != 0 {
		t.Errorf("window %v, want %v", got.data, c.data)
	}
}
