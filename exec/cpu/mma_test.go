package cpu

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/trace"
)

// TestLinearTensorCore runs every Linear of the bf16 conformance traces
// (captured through cuBLAS on an H200) teacher forced: summed as a tensor
// core does (MathTensorCore) every output is the reference's; summed in k
// order some are not, so the check can tell the two apart.
func TestLinearTensorCore(t *testing.T) {
	kOrderMisses, ran := 0, 0
	for _, name := range []string{"flux-bf16", "qwenimage-bf16", "hunyuanvideo-bf16", "wan-bf16", "pixart-bf16", "llama-bf16", "mistral-bf16"} {
		t.Run(name, func(t *testing.T) {
			c := openConf(t, name)
			mma := exec.Spec{Out: c.act, Math: exec.MathTensorCore}
			n := 0
			for _, call := range c.tr.Tree().Calls() {
				w := c.param(call, "weight")
				k, ok := call.Tensors.Key("arg0")
				if w == nil || len(w.Shape()) != 2 || !ok {
					continue
				}
				if info, err := c.tr.Info(k); err != nil || info.DType != trace.BFloat16 {
					continue
				}
				x, ref := c.port(call, "arg0"), c.port(call, "out")
				if got := c.compare("linear[tensor core]", call, c.must(c.bk.Linear(x, w, c.param(call, "bias"), mma)), ref); got.exact != 1 {
					t.Errorf("%s %s: tensor-core sums %.4f%% bit-exact, want all", name, call.Module, 100*got.exact)
				}
				y := c.must(c.bk.Linear(x, w, c.param(call, "bias"), exec.Out(c.act)))
				for i := range y.data {
					if y.data[i] != ref.data[i] {
						kOrderMisses++
					}
				}
				n++
			}
			if n == 0 {
				t.Fatalf("%s: no bf16 linear calls", name)
			}
			ran++
		})
	}
	if ran > 0 && kOrderMisses == 0 {
		t.Error("k-order sums also reproduced every output: the traces do not tell the two apart")
	}
	t.Logf("k-order sums miss %d outputs the tensor-core sums reproduce", kOrderMisses)
}

// TestDotMMA: a block's sum is truncated toward zero where the k-order
// f32 sum rounds to nearest, and terms below the block's 26 bits drop.
func TestDotMMA(t *testing.T) {
	cases := []struct {
		name        string
		x, w        []float32
		mma, kOrder float32
	}{
		// 1 + 1.5·2⁻²⁴: the nearest f32 is 1 + 2⁻²³, toward zero 1.
		{"truncated", []float32{1, 1.5}, []float32{1, 0x1p-24}, 1, 1 + 0x1p-23},
		// the same in the second block of 16: the running sum joins it.
		{"second block", append(append([]float32{1}, make([]float32, 15)...), 1.5), append(append([]float32{1}, make([]float32, 15)...), 0x1p-24), 1, 1 + 0x1p-23},
		// −(1 + 1.5·2⁻²⁴) truncates toward zero too.
		{"negative", []float32{-1, -1.5}, []float32{1, 0x1p-24}, -1, -1 - 0x1p-23},
		{"exact", []float32{2, 3}, []float32{0.5, 0.25}, 1.75, 1.75},
		{"empty", nil, nil, 0, 0},
	}
	for _, tc := range cases {
		if got := exec.DotMMA(tc.x, tc.w); got != tc.mma {
			t.Errorf("%s: DotMMA = %v, want %v", tc.name, got, tc.mma)
		}
		var k float32
		for i := range tc.x {
			k += tc.x[i] * tc.w[i]
		}
		if k != tc.kOrder {
			t.Errorf("%s: k-order sum %v, want %v (the case does not separate the two)", tc.name, k, tc.kOrder)
		}
	}
}
