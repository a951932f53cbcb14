package synth

import (
	"fmt"
	"math"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestJoinedLatentsRepeated: a pipeline that joins the latents with
// zeros along the width, then doubles the batch for classifier-free
// guidance (DreamLite's: cat([cat([x, 0], -1)] * 2)); the model adds each
// sample's own condition and takes tanh; the velocity is the guided
// combination of the two predictions' latents' part (scale 3). The
// argument is read as that join repeated, the loop's velocity as the
// guided part, and the document generates the run.
func TestJoinedLatentsRepeated(t *testing.T) {
	const n, g = 4, 3
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25}
	cond := []float32{0.1, -0.2, 0.3, 0.05, -0.4, 0.2, 0.1, -0.1, -0.3, 0.4, -0.1, 0.2, 0.3, -0.2, 0.15, 0.05}
	pt := newPlanted(t, "joinedrepeated")
	pt.f32("input/x", []int{1, 1, n}, x)
	pt.f32("input/cond", []int{2, 1, 2 * n}, cond)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		arg := make([]float32, 0, 4*n)
		for range 2 {
			arg = append(arg, x...)
			arg = append(arg, make([]float32, n)...)
		}
		sum, out := make([]float32, 4*n), make([]float32, 4*n)
		for i := range sum {
			sum[i] = arg[i] + cond[i]
			out[i] = float32(math.Tanh(float64(sum[i])))
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"m/arg0", []int{2, 1, 2 * n}, arg)
		pt.f32(pre+"m/arg1", []int{2, 1, 2 * n}, cond)
		pt.f32(pre+"m/out", []int{2, 1, 2 * n}, out)
		pt.f32(pre+"m.act/arg0", []int{2, 1, 2 * n}, sum)
		pt.f32(pre+"m.act/out", []int{2, 1, 2 * n}, out)
		st, id := step, 2*step
		calls = append(calls,
			trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m/arg0"}, {Name: "arg1", Key: pre + "m/arg1"}, {Name: "out", Key: pre + "m/out"}}},
			trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.act", Type: "Tanh", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m.act/arg0"}, {Name: "out", Key: pre + "m.act/out"}}})
		next := make([]float32, n)
		for i := range x {
			uncond, c := out[i], out[2*n+i] // the latents' part of each prediction
			v := uncond + g*(c-uncond)
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*v
		}
		x = next
	}
	pt.f32("output/latents", []int{1, 1, n}, x)
	discoverGenerates(t, pt, calls, map[string]string{"x": "input/x", "cond": "input/cond", "sigmas": "input/sigmas"})
}
