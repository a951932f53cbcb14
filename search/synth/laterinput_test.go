package synth

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	discoverGenerates(t, pt, calls, map[string]string{"x": "input/x", "cond": "input/cond", "sigmas": "input/sigmas"})
}

// beforeLoopTrace plants a T2I-adapter-shaped run: a call "enc" before
// the sampling loop makes features from the request's img (a linear of
// weight w where linear, else the fixed table feat, which nothing explains),
// and every step's model call reads them scaled by the pipeline (×0.5).
// Where split, img is two request inputs, its halves, that the pipeline
// joins before the call (cat([negative, prompt]) before unCLIP's text
// projection).
func beforeLoopTrace(t *testing.T, name string, img []float32, linear, split bool) *plantedTrace {
	const n = 6
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 2}
	w := make([]float32, n*n)
	for i := range w {
		w[i] = float32((i*7)%11-5) / 8
	}
	feat := []float32{0.7, -0.1, 0.35, 1.2, -0.9, 0.05}
	if linear {
		for o := range n {
			feat[o] = 0
			for i, v := range img {
				feat[o] += w[o*n+i] * v
			}
		}
	}
	half := make([]float32, n)
	for i := range feat {
		half[i] = feat[i] * 0.5
	}
	pt := newPlanted(t, name)
	pt.f32("input/x", []int{1, n}, x)
	inputs := map[string]string{"x": "input/x", "img": "input/img", "sigmas": "input/sigmas"}
	if split {
		pt.f32("input/imga", []int{1, n / 2}, img[:n/2])
		pt.f32("input/imgb", []int{1, n / 2}, img[n/2:])
		delete(inputs, "img")
		inputs["imga"], inputs["imgb"] = "input/imga", "input/imgb"
	} else {
		pt.f32("input/img", []int{1, n}, img)
	}
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	pt.f32("pre/enc/arg0", []int{1, n}, img)
	pt.f32("pre/enc/out", []int{1, n}, feat)
	enc := trace.Call{ID: 0, Module: "enc", Type: "Adapter", Tensors: trace.Ports{{Name: "arg0", Key: "pre/enc/arg0"}, {Name: "out", Key: "pre/enc/out"}}}
	params := map[string]string{}
	if linear {
		pt.f32("param/enc.weight", []int{n, n}, w)
		enc.Params = []string{"enc.weight"}
		params["enc.weight"] = "param/enc.weight"
	}
	calls := []trace.Call{enc}
	for step := range len(sigmas) - 1 {
		out := make([]float32, n)
		for i := range x {
			out[i] = x[i] + half[i]
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"m/arg0", []int{1, n}, x)
		pt.f32(pre+"m/arg1", []int{1, n}, half)
		pt.f32(pre+"m/out", []int{1, n}, out)
		st := step
		calls = append(calls, trace.Call{ID: 1 + step, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{
			{Name: "arg0", Key: pre + "m/arg0"}, {Name: "arg1", Key: pre + "m/arg1"}, {Name: "out", Key: pre + "m/out"}}})
		next := make([]float32, n)
		for i := range x {
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n}, x)
	pt.m = &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   params,
		Inputs:   inputs,
		Outputs:  map[string]string{"latents": "output/latents"},
		Calls:    calls}
	return pt
}

// TestCallBeforeLoop: a call before the sampling loop (a T2I adapter)
// makes features that every step's model call reads, scaled by the
// pipeline (×0.5). Where the call reads as a program (a linear of the
// request's img), the program runs it: complete, and the document
// generates a run with another img too. Before, the argument was taken
// from the trace. Where it does not read (a fixed table nothing explains),
// the argument is taken from the trace and the document says so
// (incomplete, naming the call) instead of reading it as a constant table
// of the model, which would generate the captured run and nothing else.
func TestCallBeforeLoop(t *testing.T) {
	img := []float32{0.3, -0.2, 0.9, 0.4, -0.6, 0.1}
	other := []float32{-0.5, 0.8, 0.1, -0.3, 0.6, 1.1}
	for _, tc := range []struct {
		name          string
		linear, split bool
	}{{"read", true, false}, {"unreadable", false, false}, {"joined inputs", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			pt := beforeLoopTrace(t, tc.name, img, tc.linear, tc.split)
			tr := pt.open(pt.m)
			res, err := Discover(context.Background(), tr, pt.path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.linear {
				if res.Complete() {
					t.Fatal("complete: the features made before the loop were read as part of the model")
				}
				found := false
				for _, v := range res.Doc.Program.Values {
					found = found || v.FromTrace && strings.Contains(v.Note, "called before the sampling loop")
				}
				if !found {
					t.Errorf("no value taken from the trace names the call before the loop: %v", res.Doc.Undetermined)
				}
				return
			}
			if !res.Complete() {
				t.Fatalf("not complete: %v", res.Doc.Undetermined)
			}
			if rel := generate(t, res.Doc, tr); rel > 1e-6 {
				t.Errorf("generated output rel-RMS %.3g > 1e-6", rel)
			}
			// the same document, another control image: the run follows it
			pt2 := beforeLoopTrace(t, "other", other, true, tc.split)
			if rel := generate(t, res.Doc, pt2.open(pt2.m)); rel > 1e-6 {
				t.Errorf("another img: generated output rel-RMS %.3g > 1e-6", rel)
			}
		})
	}
}

// TestClassifierFreeGuidance: the pipeline doubles the batch (the latents
// twice, a prompt's and a negative prompt's embedding, the timestep once
// per sample), then steps by uncond + g·(cond − uncond) of the result's
// halves, g = 2.5, the velocity negated. Before, the search refused the
// trace ("no model argument holds the latents of the flow loop").
func TestClassifierFreeGuidance(t *testing.T) {
	const n = 6
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 2}
	emb := []float32{0.1, 0.2, -0.3, 0.4, -0.5, 0.6, -0.2, 0.05, 0.3, -0.1, 0.7, -0.4} // [2, n]: prompt, negative
	pt := newPlanted(t, "cfg")
	pt.f32("input/x", []int{1, n}, x)
	pt.f32("input/emb", []int{2, n}, emb)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		in := append(slices.Clone(x), x...)
		ts := []float32{1 - sigmas[step], 1 - sigmas[step]}
		out := make([]float32, 2*n)
		for i := range out {
			out[i] = in[i] + emb[i]
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"m/arg0", []int{2, n}, in)
		pt.f32(pre+"m/arg1", []int{2}, ts)
		pt.f32(pre+"m/arg2", []int{2, n}, emb)
		pt.f32(pre+"m/out", []int{2, n}, out)
		st := step
		calls = append(calls, trace.Call{ID: step, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{
			{Name: "arg0", Key: pre + "m/arg0"}, {Name: "arg1", Key: pre + "m/arg1"}, {Name: "arg2", Key: pre + "m/arg2"}, {Name: "out", Key: pre + "m/out"}}})
		next := make([]float32, n)
		for i := range x {
			cond, uncond := out[i], out[n+i]
			v := -(uncond + 2.5*(cond-uncond))
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*v
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n}, x)
	guidanceRead(t, pt, calls, map[string]string{"x": "input/x", "emb": "input/emb", "sigmas": "input/sigmas"}, 2.5)
}

// TestGuidanceOverTwoCalls: the pipeline calls the model twice a step,
// once with the prompt's embedding and once with the negative prompt's
// (a "true CFG" pipeline), and steps by uncond + 3·(cond − uncond) of the
// two results. Before, the step was read off the last call alone and the
// search refused the trace.
func TestGuidanceOverTwoCalls(t *testing.T) {
	const n = 6
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 2}
	pos := []float32{0.1, 0.2, -0.3, 0.4, -0.5, 0.6}
	neg := []float32{-0.2, 0.05, 0.3, -0.1, 0.7, -0.4}
	pt := newPlanted(t, "cfg2")
	pt.f32("input/x", []int{1, n}, x)
	pt.f32("input/pos", []int{1, n}, pos)
	pt.f32("input/neg", []int{1, n}, neg)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		pre := fmt.Sprintf("s%d/", step)
		st := step
		outs := map[string][]float32{}
		for c, e := range map[string][]float32{"m": pos, "m#1": neg} {
			out := make([]float32, n)
			for i := range out {
				out[i] = 2*x[i] + e[i]
			}
			outs[c] = out
			pt.f32(pre+c+"/arg0", []int{1, n}, x)
			pt.f32(pre+c+"/arg1", []int{1, n}, e)
			pt.f32(pre+c+"/out", []int{1, n}, out)
		}
		for k, c := range []string{"m", "m#1"} {
			calls = append(calls, trace.Call{ID: 2*step + k, Step: &st, Module: "m", Ordinal: k, Type: "M", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + c + "/arg0"}, {Name: "arg1", Key: pre + c + "/arg1"}, {Name: "out", Key: pre + c + "/out"}}})
		}
		next := make([]float32, n)
		for i := range x {
			cond, uncond := outs["m"][i], outs["m#1"][i]
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*(uncond+3*(cond-uncond))
		}
		x = next
	}
	pt.f32("output/latents", []int{1, n}, x)
	guidanceRead(t, pt, calls, map[string]string{"x": "input/x", "pos": "input/pos", "neg": "input/neg", "sigmas": "input/sigmas"}, 3)
}

// discoverGenerates discovers a planted flow run (its calls, its inputs
// by name, output/latents) and requires a complete document that
// generates its output.
func discoverGenerates(t *testing.T, pt *plantedTrace, calls []trace.Call, inputs map[string]string) *Result {
	t.Helper()
	return discoverGeneratesWith(t, pt, calls, inputs, nil)
}

// discoverGeneratesWith is discoverGenerates with the run's parameters
// (name → key).
func discoverGeneratesWith(t *testing.T, pt *plantedTrace, calls []trace.Call, inputs, params map[string]string) *Result {
	t.Helper()
	tr := pt.open(&trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   params,
		Inputs:   inputs,
		Outputs:  map[string]string{"latents": "output/latents"},
		Calls:    calls})
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
	return res
}

// guidanceRead is discoverGenerates on a guided run, which must also hold
// the guidance scale as a constant.
func guidanceRead(t *testing.T, pt *plantedTrace, calls []trace.Call, inputs map[string]string, scale float32) {
	t.Helper()
	res := discoverGenerates(t, pt, calls, inputs)
	found := false
	for _, v := range res.Doc.Program.Values {
		found = found || v.Kind == "const" && len(v.Data) == 1 && v.Data[0] == scale
	}
	if !found {
		t.Errorf("no constant %g: the guidance scale was not read", scale)
	}
}
