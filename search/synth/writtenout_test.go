package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// bf16Call is one leaf call of a planted one-step bf16 trace: a module m
// holding the call m.<name> of the given class, its input x, output y and
// parameters (name → values).
type bf16Call struct {
	name, class string
	shape       []int
	x, y        []float32
	params      map[string][]float32
}

// writeBF16Trace writes c as a one-step trace (x the request's input, y
// its output) and opens it.
func writeBF16Trace(t *testing.T, c bf16Call) (*trace.Trace, string) {
	t.Helper()
	pt := newPlanted(t, c.name)
	put := pt.bf16
	leaf := "m." + c.name
	for _, k := range []string{"input/x", "s0/m/arg0", "s0/" + leaf + "/arg0"} {
		put(k, c.shape, c.x)
	}
	for _, k := range []string{"output/y", "s0/m/out", "s0/" + leaf + "/out"} {
		put(k, c.shape, c.y)
	}
	params := map[string]string{}
	var names []string
	for n, v := range c.params {
		full := leaf + "." + n
		put("param/"+full, []int{len(v)}, v)
		params[full] = "param/" + full
		names = append(names, full)
	}
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "bfloat16"}, Params: params,
		Inputs: map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: leaf, Parent: &root, Type: c.class, Params: names,
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/" + leaf + "/arg0"}, {Name: "out", Key: "s0/" + leaf + "/out"}}},
		}}
	return pt.open(m), pt.path
}

// TestWrittenOutRMSNorm: an RMS norm written in bf16 primitives with ε
// the format's own machine epsilon (2⁻⁷), x·rsqrt(mean(x²) + ε)·γ, every
// step rounded: under the statistics in f32 every ε of the candidates
// scores alike (none reproduces the rounding), so ε is read together with
// the written-out form, which reproduces the output bit for bit.
func TestWrittenOutRMSNorm(t *testing.T) {
	const rows, width = 24, 16
	rng := rand.New(rand.NewPCG(12, 2))
	x := make([]float32, rows*width)
	for i := range x {
		x[i] = precision.BF16.Round(float32(rng.NormFloat64() * 0.3))
	}
	g := make([]float32, width)
	for i := range g {
		g[i] = precision.BF16.Round(float32(1 + 0.2*rng.NormFloat64()))
	}
	r := precision.BF16.Round
	y := make([]float32, len(x))
	for q := range rows {
		row := x[q*width : (q+1)*width]
		rs := exec.RMSStats(row, 0x1p-7, precision.BF16)
		for i, v := range row {
			y[q*width+i] = r(float32(r(float32(v*rs)) * g[i]))
		}
	}
	tr, path := writeBF16Trace(t, bf16Call{name: "norm", class: "RMSNorm", shape: []int{1, rows, width}, x: x, y: y,
		params: map[string][]float32{"weight": g}})
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var eps *semantics.Factor
	for i, f := range res.Doc.Factors {
		if f.Name == "norm_eps" {
			eps = &res.Doc.Factors[i]
		}
	}
	if eps == nil {
		t.Fatalf("no norm_eps factor: %v", res.Doc.Factors)
	}
	if v, ok := eps.Value.(float64); !ok || math.Abs(v-0x1p-7) > 1e-9 {
		t.Errorf("norm_eps = %v, want 2⁻⁷", eps.Value)
	}
	rule := false
	for _, r := range res.Doc.Precision.Rules {
		rule = rule || r.Op == "norm" && r.Round == "stats"
	}
	if !rule {
		t.Errorf("no written-out rule (norm round=stats): %+v", res.Doc.Precision.Rules)
	}
}
