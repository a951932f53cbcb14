package synth

import (
	"context"
	"fmt"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestLaterCallReadsAnotherInput: two model calls a step (a ControlNet,
// then the transformer), the second reading a request input the first
// never took (SD3's ControlNet is given zeros for the pooled text the
// transformer reads): the input is bound as a document input of its own,
// the document is complete and generates the run's output. Before, the
// search refused the trace (the argument was "neither an input of the
// request nor a result of the calls before it").
func TestLaterCallReadsAnotherInput(t *testing.T) {
	const n = 6
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 2}
	cond := []float32{0.1, 0.2, -0.3, 0.4, -0.5, 0.6}
	pt := newPlanted(t, "laterinput")
	pt.f32("input/x", []int{1, n}, x)
	pt.f32("input/cond", []int{1, n}, cond)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		first := make([]float32, n)
		out := make([]float32, n)
		for i := range x {
			first[i] = x[i] * 2
			out[i] = first[i] + cond[i]
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"a/arg0", []int{1, n}, x)
		pt.f32(pre+"a/out", []int{1, n}, first)
		pt.f32(pre+"b/arg0", []int{1, n}, first)
		pt.f32(pre+"b/arg1", []int{1, n}, cond)
		pt.f32(pre+"b/out", []int{1, n}, out)
		st := step
		calls = append(calls,
			trace.Call{ID: 2 * step, Step: &st, Module: "a", Type: "A", Tensors: trace.Ports{{Name: "arg0", Key: pre + "a/arg0"}, {Name: "out", Key: pre + "a/out"}}},
			trace.Call{ID: 2*step + 1, Step: &st, Module: "b", Type: "B", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "b/arg0"}, {Name: "arg1", Key: pre + "b/arg1"}, {Name: "out", Key: pre + "b/out"}}})
		next := make([]float32, n)
		for i := range x {
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n}, x)
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Inputs:   map[string]string{"x": "input/x", "cond": "input/cond", "sigmas": "input/sigmas"},
		Outputs:  map[string]string{"latents": "output/latents"},
		Calls:    calls}
	tr := pt.open(m)
	res, err := Discover(context.Background(), tr, pt.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("not complete: %v", res.Doc.Undetermined)
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g > 1e-6", rel)
	}
}
