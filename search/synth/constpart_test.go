package synth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestLatentsBesideConstantPart: the pipeline joins, before every call,
// the latents [1, n, d] with k channels it builds itself on the last axis
// (zeros, then a channel of ones: an anchor and its mask), a part no
// request input holds; the model's linear maps the d+k channels to the
// velocity, x ← x + Δσ·v over σ = 1, 0.75, 0.4, 0. Discovery binds the
// argument as the latents joined with a constant part, and the document is
// complete and generates the run's output. (Before, no model argument held
// the latents and the document named no output.)
func TestLatentsBesideConstantPart(t *testing.T) {
	const n, d, k = 6, 4, 3
	sigmas := []float32{1, 0.75, 0.4, 0}
	rng := rand.New(rand.NewPCG(3, 5))
	randn := func(m int) []float32 {
		v := make([]float32, m)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	w, b, x := randn(d*(d+k)), randn(d), randn(n*d)
	for i := range w {
		w[i] /= 3
	}
	pt := newPlanted(t, "constpart")
	pt.f32("param/m.proj.weight", []int{d, d + k}, w)
	pt.f32("param/m.proj.bias", []int{d}, b)
	pt.f32("input/x", []int{1, n, d}, x)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		joined := make([]float32, 0, n*(d+k))
		for r := range n {
			joined = append(joined, x[r*d:(r+1)*d]...)
			for c := range k {
				joined = append(joined, map[bool]float32{true: 1, false: 0}[c == k-1])
			}
		}
		out := make([]float32, n*d)
		for r := range n {
			for o := range d {
				acc := b[o]
				for i := range d + k {
					acc += joined[r*(d+k)+i] * w[o*(d+k)+i]
				}
				out[r*d+o] = acc
			}
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"m/arg0", []int{1, n, d + k}, joined)
		pt.f32(pre+"m.proj/arg0", []int{1, n, d + k}, joined)
		pt.f32(pre+"m.proj/out", []int{1, n, d}, out)
		pt.f32(pre+"m/out", []int{1, n, d}, out)
		st, root := step, 2*step
		calls = append(calls,
			trace.Call{ID: root, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m/arg0"}, {Name: "out", Key: pre + "m/out"}}},
			trace.Call{ID: root + 1, Step: &st, Module: "m.proj", Parent: &root, Type: "Linear",
				Params:  []string{"m.proj.weight", "m.proj.bias"},
				Tensors: trace.Ports{{Name: "arg0", Key: pre + "m.proj/arg0"}, {Name: "out", Key: pre + "m.proj/out"}}})
		next := make([]float32, len(x))
		for i := range x {
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n, d}, x)
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{"m.proj.weight": "param/m.proj.weight", "m.proj.bias": "param/m.proj.bias"},
		Inputs:   map[string]string{"x": "input/x", "sigmas": "input/sigmas"},
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
