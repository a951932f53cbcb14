package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// weightNormRef is g · v / ‖v‖ with the norm over every axis of v [o, c,
// k] but d (0 or 2), in f64.
func weightNormRef(v, g []float32, o, c, k, d int) []float32 {
	sums := make([]float64, max(o, k))
	at := func(i, j, q int) int {
		if d == 0 {
			return i
		}
		return q
	}
	for i := range o {
		for j := range c {
			for q := range k {
				x := float64(v[(i*c+j)*k+q])
				sums[at(i, j, q)] += x * x
			}
		}
	}
	out := make([]float32, len(v))
	for i := range o {
		for j := range c {
			for q := range k {
				a := at(i, j, q)
				out[(i*c+j)*k+q] = float32(float64(g[a]) * float64(v[(i*c+j)*k+q]) / math.Sqrt(sums[a]))
			}
		}
	}
	return out
}

// TestFitWeightNorm: a call of a direction v and a gain g whose result is
// g · v / ‖v‖, the norm over every axis but the gain's (torch's
// weight_norm at dim 0 and at dim 2), is explained from its two
// arguments in either order.
func TestFitWeightNorm(t *testing.T) {
	const o, c, k = 6, 3, 5
	for _, d := range []int{0, 2} {
		rng := rand.New(rand.NewPCG(9, uint64(d)))
		v := randomVal(rng, "v", o, c, k)
		gs := []int{o, 1, 1}
		if d == 2 {
			gs = []int{1, 1, k}
		}
		g := randomVal(rng, "g", gs...)
		v.param, g.param = true, true
		want := weightNormRef(v.data, g.data, o, c, k, d)
		s, _, target := planted(t, precision.F32, []int{o, c, k}, want)
		for _, xs := range [][]*val{{g, v}, {v, g}} {
			got := s.fitWeightNorm(xs, target)
			if got == nil {
				t.Fatalf("dim %d: not explained", d)
			}
			if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
				t.Errorf("dim %d: rel-RMS %.3g (%s)", d, e, got.from.label)
			}
		}
	}
}

// TestParametrizedGroupedConv: a convolution whose weight no parameter of
// its own holds but a child call makes from a gain and a direction
// (weight_norm's parametrization, dim 2), in 4 groups with an even
// kernel padded k/2, its last position dropped by its caller: discovery
// explains the child as a weight norm, fits the convolution with that
// made weight as its operand, and the document is complete and generates
// the output from the parameters.
func TestParametrizedGroupedConv(t *testing.T) {
	const ch, groups, k, T = 8, 4, 4, 9
	const cg, pad, L = ch / groups, k / 2, T + 1
	rng := rand.New(rand.NewPCG(4, 4))
	x, v, g, b := randomVal(rng, "x", 1, ch, T), randomVal(rng, "v", ch, cg, k), randomVal(rng, "g", 1, 1, k), randomVal(rng, "b", ch)
	w := &val{shape: []int{ch, cg, k}, data: weightNormRef(v.data, g.data, ch, cg, k, 2)}
	conv, lt := conv1dRef(x, w, b, groups, 1, pad)
	if lt != L {
		t.Fatalf("conv length %d, want %d", lt, L)
	}
	y := make([]float32, ch*T) // the last position dropped
	for o := range ch {
		copy(y[o*T:(o+1)*T], conv[o*L:o*L+T])
	}
	pt := newPlanted(t, "weightnorm")
	put := pt.f32
	put("input/x", []int{1, ch, T}, x.data)
	put("output/y", []int{1, ch, T}, y)
	put("param/m.conv.bias", []int{ch}, b.data)
	put("param/m.conv.p.original0", g.shape, g.data)
	put("param/m.conv.p.original1", v.shape, v.data)
	put("s0/m/kw.x", []int{1, ch, T}, x.data)
	put("s0/m/out", []int{1, ch, T}, y)
	put("s0/m.conv/arg0", []int{1, ch, T}, x.data)
	put("s0/m.conv/out", []int{1, ch, L}, conv)
	put("s0/m.conv.p/out", w.shape, w.data)
	put("s0/m.conv.p.0/arg0", g.shape, g.data)
	put("s0/m.conv.p.0/arg1", v.shape, v.data)
	put("s0/m.conv.p.0/out", w.shape, w.data)
	step, root, cv, pl := 0, 0, 1, 2
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params: map[string]string{"m.conv.bias": "param/m.conv.bias",
			"m.conv.p.original0": "param/m.conv.p.original0", "m.conv.p.original1": "param/m.conv.p.original1"},
		Inputs:  map[string]string{"x": "input/x"},
		Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "kw.x", Key: "s0/m/kw.x"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: "m.conv", Parent: &root, Type: "C", Params: []string{"m.conv.bias"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.conv/arg0"}, {Name: "out", Key: "s0/m.conv/out"}}},
			{ID: 2, Step: &step, Module: "m.conv.p", Parent: &cv, Type: "P", Params: []string{"m.conv.p.original0", "m.conv.p.original1"},
				Tensors: trace.Ports{{Name: "out", Key: "s0/m.conv.p/out"}}},
			{ID: 3, Step: &step, Module: "m.conv.p.0", Parent: &pl, Type: "N",
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.conv.p.0/arg0"}, {Name: "arg1", Key: "s0/m.conv.p.0/arg1"}, {Name: "out", Key: "s0/m.conv.p.0/out"}}},
		}}
	completeReading(t, pt, m, 1e-6, "param:m.conv.p.original0", "param:m.conv.p.original1", "param:m.conv.bias")
}
