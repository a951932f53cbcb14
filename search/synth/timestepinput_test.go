package synth

import (
	"context"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// TestInputNamedTimestep: a one-forward trace whose request input is
// named "timestep" (a UNet captured as one call) gives a program that
// reads it as an input, and a runner rebuilt under another precision plan
// (what the rounding search does) still finds it. Before, the rebuild
// took any value so named for the sampler's per-step timestep and
// refused the program ("the request has no such input").
func TestInputNamedTimestep(t *testing.T) {
	x := []float32{0.5, -1.25, 2, 0.75}
	ts := []float32{0.3}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = v * ts[0]
	}
	pt := newPlanted(t, "timestepinput")
	pt.f32("input/x", []int{1, 4}, x)
	pt.f32("input/timestep", []int{1}, ts)
	pt.f32("pre/m/arg0", []int{1, 4}, x)
	pt.f32("pre/m/arg1", []int{1}, ts)
	pt.f32("pre/m/out", []int{1, 4}, out)
	pt.f32("output/y", []int{1, 4}, out)
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Inputs:   map[string]string{"x": "input/x", "timestep": "input/timestep"},
		Outputs:  map[string]string{"y": "output/y"},
		Calls: []trace.Call{{ID: 0, Module: "m", Type: "M", Tensors: trace.Ports{
			{Name: "arg0", Key: "pre/m/arg0"}, {Name: "arg1", Key: "pre/m/arg1"}, {Name: "out", Key: "pre/m/out"}}}}}
	tr := pt.open(m)
	res, err := Discover(context.Background(), tr, pt.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("not complete: %v", res.Doc.Undetermined)
	}
	r, err := program.NewRunner(cpu.New(1), res.Doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetPrecision(res.Doc.Precision); err != nil {
		t.Errorf("rebuilt under its own plan: %v", err)
	}
}
