package synth

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestForwardInputNamedLatents: a forward run (no sampler) whose input is
// named "latents", as a VAE decoder's often is, is an input like any
// other: the document is complete and generates the trace's output (it
// was bound as a flow loop's step input, which a forward run never sets).
func TestForwardInputNamedLatents(t *testing.T) {
	const rows, width = 4, 8
	rng := rand.New(rand.NewPCG(9, 2))
	x, w := randVal(rng, 1, rows, width), randVal(rng, width, width)
	y := make([]float32, rows*width)
	for r := range rows {
		for o := range width {
			var acc float32
			for i := range width {
				acc += x.data[r*width+i] * w.data[o*width+i]
			}
			y[r*width+o] = acc
		}
	}
	p := newPlanted(t, "latents")
	p.f32("input/latents", x.shape, x.data)
	p.f32("output/sample", x.shape, y)
	p.f32("param/m.weight", w.shape, w.data)
	p.f32("s0/m/arg0", x.shape, x.data)
	p.f32("s0/m/out", x.shape, y)
	step := 0
	tr := p.open(&trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{"m.weight": "param/m.weight"},
		Inputs:   map[string]string{"latents": "input/latents"}, Outputs: map[string]string{"sample": "output/sample"},
		Calls: []trace.Call{{ID: 0, Step: &step, Module: "m", Type: "Linear", Params: []string{"m.weight"},
			Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}}}})
	res, err := Discover(context.Background(), tr, p.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("incomplete: %v", res.Doc.Undetermined)
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g", rel)
	}
}
