package synth

import (
	"fmt"
	"math"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestAveragedBranches: three parallel branches averaged as
// torch.stack(xs).mean(0) does, plain and then through F.leaky_relu(·,
// 0.1) called as a function (a vocoder's multi-receptive-field fusion
// before its next upsampler), are read as a mean of three (and the
// piecewise activation of it) and generate the run.
func TestAveragedBranches(t *testing.T) {
	for _, leaky := range []bool{false, true} {
		t.Run(fmt.Sprintf("leaky=%v", leaky), func(t *testing.T) {
			const n = 12
			sigmas := []float32{1, 0.75, 0.4, 0}
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(math.Sin(float64(5*i+2))) * 2
			}
			pt := newPlanted(t, "averaged")
			pt.f32("input/x", []int{1, n}, x)
			pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
			branches := []struct {
				module, typ string
				f           func(float64) float64
			}{
				{"m.a", "Tanh", math.Tanh},
				{"m.b", "Sigmoid", func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
				{"m.c", "ReLU", func(v float64) float64 { return math.Max(v, 0) }},
			}
			var calls []trace.Call
			for step := range len(sigmas) - 1 {
				pre := fmt.Sprintf("s%d/", step)
				root := 4 * step
				st := step
				calls = append(calls, trace.Call{ID: root, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}, {Name: "out", Key: pre + "m/out"}}})
				outs := make([][]float32, len(branches))
				for b, br := range branches {
					outs[b] = make([]float32, n)
					for i := range x {
						outs[b][i] = float32(br.f(float64(x[i])))
					}
					pt.f32(pre+br.module+"/arg0", []int{1, n}, x)
					pt.f32(pre+br.module+"/out", []int{1, n}, outs[b])
					calls = append(calls, trace.Call{ID: root + 1 + b, Step: &st, Parent: &root, Module: br.module, Type: br.typ, Tensors: trace.Ports{
						{Name: "arg0", Key: pre + br.module + "/arg0"}, {Name: "out", Key: pre + br.module + "/out"}}})
				}
				out := make([]float32, n)
				for i := range out {
					m := float32((float64(outs[0][i]) + float64(outs[1][i]) + float64(outs[2][i])) / 3)
					if leaky && m <= 0 {
						m = float32(0.1) * m
					}
					out[i] = m
				}
				pt.f32(pre+"m/arg0", []int{1, n}, x)
				pt.f32(pre+"m/out", []int{1, n}, out)
				next := make([]float32, n)
				for i := range x {
					next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
				}
				x = next
			}
			pt.f32("output/latents", []int{1, n}, x)
			discoverGenerates(t, pt, calls, map[string]string{"x": "input/x", "sigmas": "input/sigmas"})
		})
	}
}
