package cpu

import (
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestRMSNormL2: MathL2 is an RMS norm as F.normalize times √G, every step
// in bf16. The wants are PyTorch 1.13's on the CPU
// (F.normalize(x, dim=-1) * G**0.5 on bf16, √G rounded to bf16 first),
// and with √G kept in f32 (scalar_f32, PyTorch 2's opmath scalar) the
// same steps with that product in f32. For [1, 3, 2, 3]: ‖x‖ = √23 →
// bf16 4.78125, 1/4.78125 → 0.208984375, times 2 → 0.41796875; the
// statistics of an RMS norm in f32 with x̂ rounded give 0.416015625
// (TestRMSNormStepwise). With MathNormalizeF32 the wants are PyTorch
// 1.13's F.normalize(x.float()).to(bf16) * √G: ‖x‖ kept in f32.
func TestRMSNormL2(t *testing.T) {
	bk := New(1)
	bf := precision.BF16
	p := exec.NormParams{Kind: exec.NormRMS, Eps: 0x1p-7} // TestRMSNormStepwise's; a clamp far below these norms
	for _, c := range []struct {
		x    []float32
		s    exec.Spec
		want []float32
	}{
		{[]float32{1, 3, 2, 3}, exec.Spec{Out: bf, Math: exec.MathL2}, []float32{0.41796875, 1.2578125, 0.8359375, 1.2578125}},
		{[]float32{1, 3, 2, 3}, exec.Spec{Out: bf, Round: exec.RoundNormalized}, []float32{0.416015625, 1.25, 0.83203125, 1.25}},
		{[]float32{1, 3, 2}, exec.Spec{Out: bf, Round: exec.RoundStats, Math: exec.MathL2}, []float32{0.46484375, 1.3984375, 0.9296875}},
		{[]float32{1, 3, 2}, exec.Spec{Out: bf, Math: exec.MathL2 | exec.MathScalarF32}, []float32{0.462890625, 1.390625, 0.92578125}},
		{[]float32{0.30078125, -7, 2.5, 11, 0.010009765625}, exec.Spec{Out: bf, Round: exec.RoundStats, Math: exec.MathL2},
			[]float32{0.05078125, -1.1796875, 0.421875, 1.859375, 0.00168609619140625}},
		// F.normalize(x.float()).to(bf16) * √G on torch 1.13's CPU (√G
		// in bf16), and with the product in f32 ((n.float() * √G).to(bf16))
		{[]float32{1, 3, 2}, exec.Spec{Out: bf, Math: exec.MathL2 | exec.MathNormalizeF32}, []float32{0.46484375, 1.390625, 0.9296875}},
		{[]float32{1, 3, 2}, exec.Spec{Out: bf, Math: exec.MathL2 | exec.MathNormalizeF32 | exec.MathScalarF32}, []float32{0.462890625, 1.390625, 0.92578125}},
		{[]float32{0.30078125, -7, 2.5, 11, 0.010009765625}, exec.Spec{Out: bf, Math: exec.MathL2 | exec.MathNormalizeF32},
			[]float32{0.05078125, -1.1796875, 0.421875, 1.8515625, 0.00168609619140625}},
	} {
		x := up(t, bk, bf, []int{1, len(c.x)}, c.x...)
		y, err := bk.Norm(x, nil, nil, p, c.s)
		if err != nil {
			t.Fatal(err)
		}
		if got := y.(*Tensor).data; !slices.Equal(got, c.want) {
			t.Errorf("%v %v: %v, want %v", c.x, c.s, got, c.want)
		}
	}
	x := up(t, bk, bf, []int{1, 4}, 1, 2, 3, 4)
	if _, err := bk.Norm(x, nil, nil, exec.NormParams{Kind: exec.NormLayer}, exec.Spec{Out: bf, Math: exec.MathL2}); err == nil {
		t.Error("MathL2 on a layer norm: no error")
	}
}
