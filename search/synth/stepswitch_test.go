package synth

import (
	"context"
	"fmt"
	"testing"

	"github.com/zflow/zflow/check"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/trace"
)

// stepSwitchTrace plants a model m whose child f (a residual linear, x +
// W·x, its linear a child call of its own) a pipeline switches by step:
// at the steps on(step) says f computes, elsewhere it returns off(x)
// without calling its child (GLIGEN's fusers return x once scheduled
// sampling ends). m's result is f's; the loop is Euler's.
func stepSwitchTrace(t *testing.T, name string, on func(step int) bool, off func(x []float32) []float32) (*plantedTrace, []trace.Call) {
	const n = 4
	sigmas := []float32{1, 0.8, 0.55, 0.3, 0}
	x := []float32{0.5, -1, 1.5, 0.25}
	w := make([]float32, n*n)
	for i := range w {
		w[i] = float32((i*5)%7-3) / 8
	}
	pt := newPlanted(t, name)
	pt.f32("input/x", []int{1, n}, x)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	pt.f32("param/m.f.lin.weight", []int{n, n}, w)
	var calls []trace.Call
	id := 0
	call := func(step int, parent *int, module string, ports trace.Ports, params ...string) *int {
		st, me := step, id
		calls = append(calls, trace.Call{ID: id, Step: &st, Parent: parent, Module: module, Type: module, Tensors: ports, Params: params})
		id++
		return &me
	}
	for step := range len(sigmas) - 1 {
		pre := fmt.Sprintf("s%d/", step)
		var out []float32
		m := call(step, nil, "m", trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}, {Name: "out", Key: pre + "m/out"}})
		f := call(step, m, "m.f", trace.Ports{{Name: "arg0", Key: pre + "m.f/arg0"}, {Name: "out", Key: pre + "m.f/out"}})
		if on(step) {
			lin := make([]float32, n)
			out = make([]float32, n)
			for o := range n {
				for i := range n {
					lin[o] += w[o*n+i] * x[i]
				}
				out[o] = x[o] + lin[o]
			}
			pt.f32(pre+"m.f.lin/arg0", []int{1, n}, x)
			pt.f32(pre+"m.f.lin/out", []int{1, n}, lin)
			call(step, f, "m.f.lin", trace.Ports{{Name: "arg0", Key: pre + "m.f.lin/arg0"}, {Name: "out", Key: pre + "m.f.lin/out"}}, "m.f.lin.weight")
		} else {
			out = off(x)
		}
		pt.f32(pre+"m/arg0", []int{1, n}, x)
		pt.f32(pre+"m.f/arg0", []int{1, n}, x)
		pt.f32(pre+"m.f/out", []int{1, n}, out)
		pt.f32(pre+"m/out", []int{1, n}, out)
		next := make([]float32, n)
		for i := range x {
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n}, x)
	return pt, calls
}

// TestStepSwitchedModule: a module that computes for the first two of
// four steps and returns its input as it is after (its child not called)
// is read as where(i < 2, …, x) on the step index, and the document
// generates the run. A module returning something else once its child
// is not called (1.5·x), or switched off at a middle step only, is not
// read as switched: those documents say they are incomplete.
func TestStepSwitchedModule(t *testing.T) {
	same := func(x []float32) []float32 { return x }
	pt, calls := stepSwitchTrace(t, "switched", func(step int) bool { return step < 2 }, same)
	res := discoverGeneratesWith(t, pt, calls, map[string]string{"x": "input/x", "sigmas": "input/sigmas"},
		map[string]string{"m.f.lin.weight": "param/m.f.lin.weight"})
	tr, err := trace.Open(pt.path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	selfChecked(t, res.Doc, tr)
	index, where := false, false
	for _, v := range res.Doc.Program.Values {
		index = index || v.Kind == "step_input" && v.Source == "index"
	}
	for _, nd := range res.Doc.Program.Nodes {
		where = where || nd.Op == "where"
	}
	if !index || !where {
		t.Errorf("the program reads the step index: %v, selects by it: %v", index, where)
	}
	for _, tc := range []struct {
		name string
		on   func(int) bool
		off  func([]float32) []float32
	}{
		{"scaled when off", func(step int) bool { return step < 2 }, func(x []float32) []float32 {
			out := make([]float32, len(x))
			for i, v := range x {
				out[i] = 1.5 * v
			}
			return out
		}},
		{"off at a middle step", func(step int) bool { return step != 2 }, same},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt, calls := stepSwitchTrace(t, tc.name, tc.on, tc.off)
			tr := pt.open(&trace.Manifest{Format: "zflow-trace", Version: 1,
				Producer: map[string]any{"framework": "test", "dtype": "float32"},
				Params:   map[string]string{"m.f.lin.weight": "param/m.f.lin.weight"},
				Inputs:   map[string]string{"x": "input/x", "sigmas": "input/sigmas"},
				Outputs:  map[string]string{"latents": "output/latents"},
				Calls:    calls})
			res, err := Discover(context.Background(), tr, pt.path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			sc, err := check.Self(cpu.New(0), res.Doc, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.Failures) == 0 {
				t.Error("the self-check reproduces every step of a module the document does not switch")
			}
		})
	}
}
