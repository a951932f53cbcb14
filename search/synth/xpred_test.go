package synth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// TestCleanSamplePrediction: a model that joins a prompt's rows before the
// latents' and returns an estimate x̂ of the clean sample for every row; the
// pipeline keeps the latents' (last) rows and steps x ← x + Δσ·(x − x̂)/σ
// (x-prediction) over σ = 1, 0.75, 0.4, 0. Discovery explains the velocity
// as (x − x̂)/σ from the step's latents, the result's last rows and σ_i, says
// so in euler_sign's evidence, and the document is complete and generates
// the run's output. (Before, the velocity was the result's leading rows or
// its sign only: σ_0 = 1 hid the division, and the document missed.)
func TestCleanSamplePrediction(t *testing.T) {
	res, tr := plantedCleanSample(t, precision.F32, false)
	if !res.Complete() {
		t.Errorf("not complete: %v", res.Doc.Undetermined)
	}
	note := eulerNote(t, res)
	if !strings.Contains(note, "x-prediction") {
		t.Errorf("euler_sign's evidence does not say the result is the clean sample: %q", note)
	}
	if strings.Contains(note, "scalar of the latents' format") {
		t.Errorf("an f32 run divided by a narrowed σ: %q", note)
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g > 1e-6", rel)
	}
}

// TestCleanSamplePredictionScalars: the same pipeline in bf16, its σ and
// step size Python scalars that torch ≤ 1.13's CPU casts to bf16 (0.4 →
// 0.4004, −0.35 → −0.3496) or that torch 2 keeps f32: the divisor the
// document reads is σ in bf16 for the first and σ itself for the second,
// the one whose updates land on the next latents.
func TestCleanSamplePredictionScalars(t *testing.T) {
	for _, narrow := range []bool{true, false} {
		res, _ := plantedCleanSample(t, precision.BF16, narrow)
		if !res.Complete() {
			t.Errorf("narrow %v: not complete: %v", narrow, res.Doc.Undetermined)
		}
		note := eulerNote(t, res)
		if got := strings.Contains(note, "scalar of the latents' format"); got != narrow {
			t.Errorf("narrow %v: σ read narrowed %v: %q", narrow, got, note)
		}
	}
}

// eulerNote is the evidence note of the document's euler_sign, which must
// be 1 and decisive.
func eulerNote(t *testing.T, res *Result) string {
	t.Helper()
	for _, f := range res.Doc.Factors {
		if f.Name == "euler_sign" {
			if !sameValue(f.Value, 1) || !f.Decisive {
				t.Errorf("euler_sign %v (decisive %v), want 1, decisive", f.Value, f.Decisive)
			}
			return f.Evidence.Note
		}
	}
	t.Error("no euler_sign factor")
	return ""
}

// plantedCleanSample discovers a planted run of format f: a model joining
// a prompt's rows before the latents' and returning x̂ for every row, the
// pipeline stepping x ← x + Δσ·(x − x̂)/σ on the last rows, σ and Δσ
// rounded to f first where narrow (each op rounded to f, as tensors of f
// compute).
func plantedCleanSample(t *testing.T, f precision.Format, narrow bool) (*Result, *trace.Trace) {
	t.Helper()
	const p, n, d = 3, 4, 8
	sigmas := []float32{1, 0.75, 0.4, 0}
	rng := rand.New(rand.NewPCG(7, 11))
	randn := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = f.Round(float32(rng.NormFloat64()))
		}
		return v
	}
	w, b, c, x := randn(d*d), randn(d), randn(p*d), randn(n*d)
	for i := range w {
		w[i] = f.Round(w[i] / 3)
	}
	pt := newPlanted(t, "xpred")
	put := pt.f32
	if f == precision.BF16 {
		put = pt.bf16
	}
	put("param/m.proj.weight", []int{d, d}, w)
	put("param/m.proj.bias", []int{d}, b)
	put("input/c", []int{1, p, d}, c)
	put("input/x", []int{1, n, d}, x)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	scalar := func(v float32) float32 {
		if narrow {
			return f.Round(v)
		}
		return v
	}
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		joined := append(append([]float32{}, c...), x...)
		out := make([]float32, (p+n)*d)
		for r := range p + n {
			for o := range d {
				acc := b[o]
				for i := range d {
					acc += joined[r*d+i] * w[o*d+i]
				}
				out[r*d+o] = f.Round(acc)
			}
		}
		pre := fmt.Sprintf("s%d/", step)
		put(pre+"m/arg0", []int{1, n, d}, x)
		put(pre+"m/arg1", []int{1, p, d}, c)
		put(pre+"m.proj/arg0", []int{1, p + n, d}, joined)
		put(pre+"m.proj/out", []int{1, p + n, d}, out)
		put(pre+"m/out", []int{1, p + n, d}, out)
		st, root := step, 2*step
		calls = append(calls,
			trace.Call{ID: root, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m/arg0"}, {Name: "arg1", Key: pre + "m/arg1"}, {Name: "out", Key: pre + "m/out"}}},
			trace.Call{ID: root + 1, Step: &st, Module: "m.proj", Parent: &root, Type: "Linear",
				Params:  []string{"m.proj.weight", "m.proj.bias"},
				Tensors: trace.Ports{{Name: "arg0", Key: pre + "m.proj/arg0"}, {Name: "out", Key: pre + "m.proj/out"}}})
		// the pipeline: x̂ the last n rows, v = (x − x̂)/σ, x ← x + Δσ·v
		next := make([]float32, len(x))
		for i := range x {
			v := f.Round(f.Round(x[i]-out[p*d+i]) / scalar(sigmas[step]))
			next[i] = f.Round(x[i] + f.Round(scalar(sigmas[step+1]-sigmas[step])*v))
		}
		x = next
	}
	put("output/latents", []int{1, n, d}, x)
	dtype := "float32"
	if f == precision.BF16 {
		dtype = "bfloat16"
	}
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": dtype},
		Params:   map[string]string{"m.proj.weight": "param/m.proj.weight", "m.proj.bias": "param/m.proj.bias"},
		Inputs:   map[string]string{"c": "input/c", "x": "input/x", "sigmas": "input/sigmas"},
		Outputs:  map[string]string{"latents": "output/latents"},
		Calls:    calls}
	tr, path := pt.open(m), pt.path
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res, tr
}
