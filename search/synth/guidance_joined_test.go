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

// TestThreeCopiesGuided: a batch of three copies of the latents, each
// with its own condition, combined as perturbed-attention guidance does
// (u + 5·(c − u) + 3·(c − t)) or as an image edit does (u + 7·(a − b) +
// 1.5·(b − u)): the argument is read as the latents repeated three times,
// the velocity as the combination, and the document generates the run.
func TestThreeCopiesGuided(t *testing.T) {
	for _, tc := range []struct {
		name    string
		combine func(p [3]float32) float32
	}{
		{"perturbed", func(p [3]float32) float32 { return p[0] + 5*(p[1]-p[0]) + 3*(p[1]-p[2]) }},
		{"edit", func(p [3]float32) float32 { return p[2] + 7*(p[0]-p[1]) + 1.5*(p[1]-p[2]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4
			sigmas := []float32{1, 0.75, 0.4, 0}
			x := []float32{0.5, -1, 1.5, 0.25}
			cond := []float32{0.1, -0.2, 0.3, 0.05, -0.4, 0.2, 0.1, -0.1, -0.3, 0.4, -0.1, 0.2}
			pt := newPlanted(t, "three"+tc.name)
			pt.f32("input/x", []int{1, n}, x)
			pt.f32("input/cond", []int{3, n}, cond)
			pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
			var calls []trace.Call
			for step := range len(sigmas) - 1 {
				arg := make([]float32, 0, 3*n)
				for range 3 {
					arg = append(arg, x...)
				}
				sum, out := make([]float32, 3*n), make([]float32, 3*n)
				for i := range sum {
					sum[i] = arg[i] + cond[i]
					out[i] = float32(math.Tanh(float64(sum[i])))
				}
				pre := fmt.Sprintf("s%d/", step)
				pt.f32(pre+"m/arg0", []int{3, n}, arg)
				pt.f32(pre+"m/arg1", []int{3, n}, cond)
				pt.f32(pre+"m/out", []int{3, n}, out)
				pt.f32(pre+"m.act/arg0", []int{3, n}, sum)
				pt.f32(pre+"m.act/out", []int{3, n}, out)
				st, id := step, 2*step
				calls = append(calls,
					trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{
						{Name: "arg0", Key: pre + "m/arg0"}, {Name: "arg1", Key: pre + "m/arg1"}, {Name: "out", Key: pre + "m/out"}}},
					trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.act", Type: "Tanh", Tensors: trace.Ports{
						{Name: "arg0", Key: pre + "m.act/arg0"}, {Name: "out", Key: pre + "m.act/out"}}})
				next := make([]float32, n)
				for i := range x {
					v := tc.combine([3]float32{out[i], out[n+i], out[2*n+i]})
					next[i] = x[i] + (sigmas[step+1]-sigmas[step])*v
				}
				x = next
			}
			pt.f32("output/latents", []int{1, n}, x)
			discoverGenerates(t, pt, calls, map[string]string{"x": "input/x", "cond": "input/cond", "sigmas": "input/sigmas"})
		})
	}
}

// TestCopiesJoinedApart: an image edit's batch of three joins the
// latents with the image's latents in the first two copies and with zeros
// in the third (InstructPix2Pix's [text, image, unconditional]), and
// combines the three predictions with two scales: the argument is read as
// the latents joined with each copy's own condition, and the run
// generates.
func TestCopiesJoinedApart(t *testing.T) {
	const c, w = 2, 3
	n := c * w
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 1}
	img := []float32{0.1, -0.2, 0.3, 0.05, -0.4, 0.2}
	pt := newPlanted(t, "copiesapart")
	pt.f32("input/x", []int{1, c, w}, x)
	pt.f32("input/image", []int{1, c, w}, img)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		var arg []float32
		for copy := range 3 {
			cond := img
			if copy == 2 {
				cond = make([]float32, n)
			}
			arg = append(append(arg, x...), cond...)
		}
		act := make([]float32, len(arg))
		for i := range act {
			act[i] = float32(math.Tanh(float64(arg[i])))
		}
		var out []float32
		for copy := range 3 {
			out = append(out, act[copy*2*n:copy*2*n+n]...)
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"m/arg0", []int{3, 2 * c, w}, arg)
		pt.f32(pre+"m/out", []int{3, c, w}, out)
		pt.f32(pre+"m.act/arg0", []int{3, 2 * c, w}, arg)
		pt.f32(pre+"m.act/out", []int{3, 2 * c, w}, act)
		st, id := step, 2*step
		calls = append(calls,
			trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}, {Name: "out", Key: pre + "m/out"}}},
			trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.act", Type: "Tanh", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m.act/arg0"}, {Name: "out", Key: pre + "m.act/out"}}})
		next := make([]float32, n)
		for i := range x {
			v := out[2*n+i] + 7.5*(out[i]-out[n+i]) + 1.5*(out[n+i]-out[2*n+i])
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*v
		}
		x = next
	}
	pt.f32("output/latents", []int{1, c, w}, x)
	discoverGenerates(t, pt, calls, map[string]string{"x": "input/x", "image": "input/image", "sigmas": "input/sigmas"})
}

// TestGuidedVarianceSplit: a model whose result holds a learned variance
// beside each prediction (twice the latents' channels), run on a doubled
// batch, guided on the first half of channels (Kandinsky 2.1's and
// unCLIP's split before their guidance), is read and generates.
func TestGuidedVarianceSplit(t *testing.T) {
	const c, w = 2, 3
	n := c * w
	sigmas := []float32{1, 0.75, 0.4, 0}
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 1}
	cond := []float32{0.1, -0.2, 0.3, 0.05, -0.4, 0.2, 0.1, -0.1, -0.3, 0.4, -0.1, 0.2}
	pt := newPlanted(t, "variancesplit")
	pt.f32("input/x", []int{1, c, w}, x)
	pt.f32("input/cond", []int{2, c, w}, cond)
	pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
	var calls []trace.Call
	for step := range len(sigmas) - 1 {
		arg := append(append([]float32(nil), x...), x...)
		sum, a, b := make([]float32, 2*n), make([]float32, 2*n), make([]float32, 2*n)
		for i := range arg {
			sum[i] = arg[i] + cond[i]
			a[i] = float32(math.Tanh(float64(sum[i])))
			b[i] = float32(1 / (1 + math.Exp(-float64(sum[i]))))
		}
		var out []float32
		for cp := range 2 {
			out = append(append(out, a[cp*n:(cp+1)*n]...), b[cp*n:(cp+1)*n]...)
		}
		pre := fmt.Sprintf("s%d/", step)
		pt.f32(pre+"m/arg0", []int{2, c, w}, arg)
		pt.f32(pre+"m/arg1", []int{2, c, w}, cond)
		pt.f32(pre+"m/out", []int{2, 2 * c, w}, out)
		pt.f32(pre+"m.a/arg0", []int{2, c, w}, sum)
		pt.f32(pre+"m.a/out", []int{2, c, w}, a)
		pt.f32(pre+"m.b/arg0", []int{2, c, w}, sum)
		pt.f32(pre+"m.b/out", []int{2, c, w}, b)
		st, id := step, 3*step
		calls = append(calls,
			trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}, {Name: "arg1", Key: pre + "m/arg1"}, {Name: "out", Key: pre + "m/out"}}},
			trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.a", Type: "Tanh", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m.a/arg0"}, {Name: "out", Key: pre + "m.a/out"}}},
			trace.Call{ID: id + 2, Step: &st, Parent: &id, Module: "m.b", Type: "Sigmoid", Tensors: trace.Ports{
				{Name: "arg0", Key: pre + "m.b/arg0"}, {Name: "out", Key: pre + "m.b/out"}}})
		next := make([]float32, n)
		for i := range x {
			u, cnd := a[i], a[n+i]
			next[i] = x[i] + (sigmas[step+1]-sigmas[step])*(u+4*(cnd-u))
		}
		x = next
	}
	pt.f32("output/latents", []int{1, c, w}, x)
	discoverGenerates(t, pt, calls, map[string]string{"x": "input/x", "cond": "input/cond", "sigmas": "input/sigmas"})
}
