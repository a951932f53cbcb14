package synth

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// plantedChain writes an f32 trace whose step makes two model calls, as a
// ControlNet pipeline does: c(x) = Wc·x, then u(x, r) = Wa·x + r with r
// c's result (unrelated: r is random values no call made instead).
func plantedChain(t *testing.T, unrelated bool) (*trace.Trace, string) {
	t.Helper()
	const rows, width = 4, 8
	rng := rand.New(rand.NewPCG(3, 5))
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	linear := func(x, w []float32) []float32 {
		out := make([]float32, rows*width)
		for r := range rows {
			for o := range width {
				var acc float32
				for i := range width {
					acc += x[r*width+i] * w[o*width+i]
				}
				out[r*width+o] = acc
			}
		}
		return out
	}
	x, wc, wa := rnd(rows*width), rnd(width*width), rnd(width*width)
	r := linear(x, wc)
	if unrelated {
		r = rnd(rows * width)
	}
	ya := linear(x, wa)
	y := make([]float32, len(ya))
	for i := range y {
		y[i] = ya[i] + r[i]
	}
	p := newPlanted(t, "chain")
	act, sq := []int{1, rows, width}, []int{width, width}
	for key, v := range map[string][]float32{"input/x": x, "output/y": y, "param/c.weight": wc, "param/u.a.weight": wa,
		"s0/c/arg0": x, "s0/c/out": linear(x, wc), "s0/u/arg0": x, "s0/u/arg1": r, "s0/u/out": y, "s0/u.a/arg0": x, "s0/u.a/out": ya} {
		shape := act
		if len(v) == width*width {
			shape = sq
		}
		p.f32(key, shape, v)
	}
	step, u := 0, 1
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{"c.weight": "param/c.weight", "u.a.weight": "param/u.a.weight"},
		Inputs:   map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "c", Type: "Linear", Params: []string{"c.weight"}, Tensors: trace.Ports{{Name: "arg0", Key: "s0/c/arg0"}, {Name: "out", Key: "s0/c/out"}}},
			{ID: 1, Step: &step, Module: "u", Type: "U", Tensors: trace.Ports{{Name: "arg0", Key: "s0/u/arg0"}, {Name: "arg1", Key: "s0/u/arg1"}, {Name: "out", Key: "s0/u/out"}}},
			{ID: 2, Step: &step, Module: "u.a", Parent: &u, Type: "Linear", Params: []string{"u.a.weight"}, Tensors: trace.Ports{{Name: "arg0", Key: "s0/u.a/arg0"}, {Name: "out", Key: "s0/u.a/out"}}},
		}}
	return p.open(m), p.path
}

// TestChainedModelCalls: a step of two model calls, the second reading
// the first's result, is one program: complete, its output reading both
// calls' weights, the generated output the trace's. A second call whose
// argument no input or earlier result holds is refused, naming it.
func TestChainedModelCalls(t *testing.T) {
	tr, path := plantedChain(t, false)
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() || !outputReads(res, "param:c.weight") || !outputReads(res, "param:u.a.weight") {
		t.Errorf("complete %v, reads c %v, reads u.a %v", res.Complete(), outputReads(res, "param:c.weight"), outputReads(res, "param:u.a.weight"))
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g", rel)
	}
	tr, path = plantedChain(t, true)
	if _, err := Discover(context.Background(), tr, path, Options{}); err == nil {
		t.Error("a second call's argument no value holds: no error")
	}
}
