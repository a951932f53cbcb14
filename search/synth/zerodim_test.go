package synth

import (
	"math"
	"math/rand/v2"
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

// TestScalarGated: t = a + tanh(α)·b[:, :32], α a 0-dim parameter and b
// the attention output over the rows joined with extra tokens (GLIGEN's
// gated self-attention), and the same with α itself and σ(α) as the gate;
// a gate no parameter makes is not read; in bf16 too, where the gate is
// stored rounded and the scale is read through t's roundings.
func TestScalarGated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     precision.Format
		alpha float32
		gate  func(float64) float64
		want  bool
	}{
		{"tanh", precision.F32, 0.7, math.Tanh, true},
		{"sigmoid", precision.F32, -0.4, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, true},
		{"none", precision.F32, 0.3, func(x float64) float64 { return x * x * 5 }, false},
		// bf16: the branch an eighth of the residual's size, so t's
		// roundings move the scale read by least squares ~2·10⁻³ off the
		// gate (a small gated branch on a large residual, as GLIGEN's)
		{"tanh bf16", precision.BF16, 0.7, math.Tanh, true},
	} {
		f := tc.f
		rng := rand.New(rand.NewPCG(0, 3))
		a := roundedVal(randVal(rng, 1, 32, 2), f)
		b := roundedVal(randVal(rng, 1, 40, 2), f)
		for i := range a.data {
			a.data[i] = f.Round(2 * a.data[i])
		}
		for i := range b.data {
			b.data[i] = f.Round(b.data[i] / 4)
		}
		alpha := roundedVal(&val{shape: []int{}, data: []float32{tc.alpha}, param: true, origin: "alpha"}, f)
		g := f.Round(float32(tc.gate(float64(alpha.data[0]))))
		td := make([]float32, a.numel())
		for i := range td {
			td[i] = f.Round(a.data[i] + f.Round(g*b.data[i])) // b's leading rows
		}
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(f)}
		tv := &val{shape: []int{1, 32, 2}, data: td, format: f, origin: "t"}
		got := s.scalarGated(tv, []*val{a, b, alpha})
		if (got != nil) != tc.want {
			t.Errorf("%s: read %v, want %v", tc.name, got != nil, tc.want)
			continue
		}
		if got != nil && relRMS(f, got.data, td) > 1e-6 {
			t.Errorf("%s: off by %.3g", tc.name, relRMS(f, got.data, td))
		}
	}
}
