package synth

import (
	"math"
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

// TestScalarGated: t = a + tanh(α)·b[:, :4], α a 0-dim parameter and b
// the attention output over the rows joined with extra tokens (GLIGEN's
// gated self-attention), and the same with α itself and σ(α) as the gate;
// a gate no parameter makes is not read.
func TestScalarGated(t *testing.T) {
	a := []float32{0.5, -1, 1.5, 0.25, -0.75, 2, 0.1, -0.3}             // [1, 4, 2]
	b := []float32{0.2, 0.4, -0.6, 0.8, 1.0, -1.2, 0.3, 0.9, -0.5, 0.7} // [1, 5, 2]
	for _, tc := range []struct {
		name  string
		alpha float32
		gate  func(float64) float64
		want  bool
	}{
		{"tanh", 0.7, math.Tanh, true},
		{"sigmoid", -0.4, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, true},
		{"none", 0.3, func(x float64) float64 { return x * x * 5 }, false},
	} {
		g := float32(tc.gate(float64(tc.alpha)))
		td := make([]float32, len(a))
		for i := range td {
			td[i] = a[i] + g*b[i]
		}
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		av := &val{shape: []int{1, 4, 2}, data: a, format: precision.F32, origin: "x"}
		bv := &val{shape: []int{1, 5, 2}, data: b, format: precision.F32, origin: "attn/out"}
		alpha := &val{shape: []int{}, data: []float32{tc.alpha}, format: precision.F32, param: true, origin: "alpha"}
		tv := &val{shape: []int{1, 4, 2}, data: td, format: precision.F32, origin: "t"}
		got := s.scalarGated(tv, []*val{av, bv, alpha})
		if (got != nil) != tc.want {
			t.Errorf("%s: read %v, want %v", tc.name, got != nil, tc.want)
			continue
		}
		if got != nil && relRMS(precision.F32, got.data, td) > 1e-6 {
			t.Errorf("%s: off by %.3g", tc.name, relRMS(precision.F32, got.data, td))
		}
	}
}
