package synth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestFewWholeConstants: a model that looks a table's row up by an id of
// 0 it makes from a Python number at every step (a second timestep of 0,
// a data type's id) reads it as a constant, though the latents' nearest
// row of the model's own table is row 0 at every step too, so the
// argmin of their distances reproduces the id: one entry is no evidence
// of that expression.
func TestFewWholeConstants(t *testing.T) {
	const n = 4
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25}
	table := []float32{0.1, 0.2, 0.3, 0.4, -0.5, 0.25, 0.125, -1, 2, 3, 4, 5}
	pt := newPlanted(t, "fewconstants")
	pt.f32("input/x", []int{1, n}, x)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	pt.f32("param/m.emb.weight", []int{3, n}, table)
	codes := append(append([]float32(nil), x...), 9, 9, 9, 9, -9, -9, -9, -9) // row 0 the latents' nearest
	pt.f32("param/m.codes", []int{3, n}, codes)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		pre := fmt.Sprintf("s%d/", step)
		row := table[:n]
		out := make([]float32, n)
		for i := range out {
			out[i] = x[i] * row[i]
		}
		pt.f32(pre+"m/arg0", []int{1, n}, x)
		pt.f32(pre+"m/out", []int{1, n}, out)
		pt.f32(pre+"m.emb/arg0", []int{1}, []float32{0})
		pt.f32(pre+"m.emb/out", []int{1, n}, row)
		st, id := step, 2*step
		calls = append(calls,
			trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Params: []string{"m.codes"}, Tensors: trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}, {Name: "out", Key: pre + "m/out"}}},
			trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.emb", Type: "Embedding", Params: []string{"m.emb.weight"}, Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m.emb/arg0"}, {Name: "out", Key: pre + "m.emb/out"}}})
		next := make([]float32, n)
		for i := range x {
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n}, x)
	res := discoverGeneratesWith(t, pt, calls, map[string]string{"x": "input/x", "sigmas": "input/sigmas"}, map[string]string{"m.emb.weight": "param/m.emb.weight", "m.codes": "param/m.codes"})
	constant := false
	for _, v := range res.Doc.Program.Values {
		constant = constant || v.Kind == "const" && strings.Contains(v.Name, "m.emb/arg0")
	}
	if !constant {
		var names []string
		for _, v := range res.Doc.Program.Values {
			names = append(names, v.Kind+" "+v.Name)
		}
		t.Errorf("the id is not a constant of the program: %v", names)
	}
}
