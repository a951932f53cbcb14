package synth

import (
	"fmt"
	"math"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestGatedOneRow: a gated residual x + g·y over a stream of one row per
// sample (a one-token caption), in a scope holding more vectors of that
// shape than the gated form's usual eight most recent values (the
// modulation's chunks): the residual and its branch are still found.
func TestGatedOneRow(t *testing.T) {
	const c, vecs, gateAt = 8, 10, 4
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := make([]float32, c)
	for i := range x {
		x[i] = float32(math.Sin(float64(3*i + 1)))
	}
	pt := newPlanted(t, "gatedonerow")
	inputs := map[string]string{"x": "input/x", "sigmas": "input/sigmas"}
	pt.f32("input/x", []int{1, 1, c}, x)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	mods := make([][]float32, vecs)
	for k := range mods {
		mods[k] = make([]float32, c)
		for i := range mods[k] {
			mods[k][i] = float32(math.Cos(float64(5*k+i))) * 0.5
		}
		name := fmt.Sprintf("mod%d", k)
		pt.f32("input/"+name, []int{1, 1, c}, mods[k])
		inputs[name] = "input/" + name
	}
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		pre := fmt.Sprintf("s%d/", step)
		y := make([]float32, c)
		out := make([]float32, c)
		for i := range y {
			y[i] = float32(math.Tanh(float64(x[i])))
			out[i] = x[i] + mods[gateAt][i]*y[i]
		}
		ports := trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}}
		pt.f32(pre+"m/arg0", []int{1, 1, c}, x)
		for k := range mods {
			key := fmt.Sprintf("%sm/arg%d", pre, k+1)
			pt.f32(key, []int{1, 1, c}, mods[k])
			ports = append(ports, trace.Port{Name: fmt.Sprintf("arg%d", k+1), Key: key})
		}
		ports = append(ports, trace.Port{Name: "out", Key: pre + "m/out"})
		pt.f32(pre+"m/out", []int{1, 1, c}, out)
		pt.f32(pre+"m.act/arg0", []int{1, 1, c}, x)
		pt.f32(pre+"m.act/out", []int{1, 1, c}, y)
		st, id := step, 2*step
		calls = append(calls,
			trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Tensors: ports},
			trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.act", Type: "Tanh", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m.act/arg0"}, {Name: "out", Key: pre + "m.act/out"}}})
		next := make([]float32, c)
		for i := range x {
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
		}
		x = next
	}
	pt.f32("output/latents", []int{1, 1, c}, x)
	discoverGenerates(t, pt, calls, inputs)
}
