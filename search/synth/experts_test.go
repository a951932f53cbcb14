package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// writeExpertsTrace writes a one-step f32 trace of one call m.experts
// handed the tokens x [T, D], each token's expert indices [T, K] (int64)
// and weights [T, K] (all three the request's inputs), holding two stacked weights w1 [E, I, D] and w2
// [E, D, I] (an ungated experts module, as a fused MoE stores them), its
// result y [T, D]; x is the request's input and y its output.
func writeExpertsTrace(t *testing.T, x, wts, w1, w2, y []float32, idx []int64, tok, d, k, e, inner int) string {
	t.Helper()
	pt := newPlanted(t, "experts")
	f32, i64 := pt.f32, pt.i64
	const leaf = "m.experts"
	f32("input/x", []int{tok, d}, x)
	f32("s0/m/arg0", []int{tok, d}, x)
	f32("s0/"+leaf+"/arg0", []int{tok, d}, x)
	for _, keys := range [][2]string{{"input/idx", "input/wts"}, {"s0/m/arg1", "s0/m/arg2"}, {"s0/" + leaf + "/arg1", "s0/" + leaf + "/arg2"}} {
		i64(keys[0], []int{tok, k}, idx)
		f32(keys[1], []int{tok, k}, wts)
	}
	for _, key := range []string{"output/y", "s0/m/out", "s0/" + leaf + "/out"} {
		f32(key, []int{tok, d}, y)
	}
	f32("param/"+leaf+".up_proj", []int{e, inner, d}, w1)
	f32("param/"+leaf+".down_proj", []int{e, d, inner}, w2)
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{leaf + ".up_proj": "param/" + leaf + ".up_proj", leaf + ".down_proj": "param/" + leaf + ".down_proj"},
		Inputs:   map[string]string{"x": "input/x", "idx": "input/idx", "wts": "input/wts"}, Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "arg1", Key: "s0/m/arg1"},
				{Name: "arg2", Key: "s0/m/arg2"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: leaf, Parent: &root, Type: "Experts", Params: []string{leaf + ".up_proj", leaf + ".down_proj"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/" + leaf + "/arg0"}, {Name: "arg1", Key: "s0/" + leaf + "/arg1"},
					{Name: "arg2", Key: "s0/" + leaf + "/arg2"}, {Name: "out", Key: "s0/" + leaf + "/out"}}},
		}}
	pt.open(m)
	return pt.path
}

// TestFusedUngatedExperts: a fused experts module with one projection
// per expert and no up (w1 [E, I, D]) is found as the experts op,
// ungated, with its activation squared where the reference squares it
// (Nemotron-H's relu² experts) and not where it does not; the factors
// say so (mlp_glu false, mlp_squared).
func TestFusedUngatedExperts(t *testing.T) {
	const tok, d, k, e, inner = 12, 16, 2, 4, 8
	rng := rand.New(rand.NewPCG(5, 13))
	gauss := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * s)
		}
		return v
	}
	x, w1, w2 := gauss(tok*d, 1), gauss(e*inner*d, 0.3), gauss(e*d*inner, 0.3)
	idx, wts := make([]int64, tok*k), make([]float32, tok*k)
	for i := range tok {
		a := rng.IntN(e)
		idx[i*k], idx[i*k+1] = int64(a), int64((a+1+rng.IntN(e-1))%e)
		p := float32(0.3 + 0.4*rng.Float64())
		wts[i*k], wts[i*k+1] = p, 1-p
	}
	for _, squared := range []bool{true, false} {
		y := make([]float32, tok*d)
		for i := range tok {
			for j := range k {
				ex, wt := int(idx[i*k+j]), float64(wts[i*k+j])
				for r := range d {
					var acc float64
					for q := range inner {
						var h float32
						for c := range d {
							h += w1[(ex*inner+q)*d+c] * x[i*d+c]
						}
						g := max(h, 0)
						if squared {
							g *= g
						}
						acc += float64(w2[(ex*d+r)*inner+q]) * float64(g)
					}
					y[i*d+r] += float32(wt * acc)
				}
			}
		}
		path := writeExpertsTrace(t, x, wts, w1, w2, y, idx, tok, d, k, e, inner)
		res, _ := discoverComplete(t, path)
		var node *semantics.ProgramNode
		for i, n := range res.Doc.Program.Nodes {
			if n.Op == program.OpExperts.String() {
				node = &res.Doc.Program.Nodes[i]
			}
		}
		if node == nil {
			t.Fatalf("squared=%v: no experts node in %v", squared, res.Doc.Program.Nodes)
		}
		if node.Attrs.Experts == nil || !node.Attrs.Experts.Ungated || node.Attrs.Experts.Squared != squared || node.Attrs.Act != "relu" {
			t.Errorf("squared=%v: experts node %+v, want relu, ungated, squared %v", squared, node.Attrs, squared)
		}
		found := map[string]any{}
		for _, f := range res.Doc.Factors {
			found[f.Name] = f.Value
		}
		if found["mlp_glu"] != false || (found["mlp_squared"] == true) != squared {
			t.Errorf("squared=%v: factors mlp_glu %v, mlp_squared %v", squared, found["mlp_glu"], found["mlp_squared"])
		}
	}
}

// TestNaturalCompare: a module list's addresses in list order, their
// digit runs read as numbers.
func TestNaturalCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"m.experts.expert_2", "m.experts.expert_10", -1},
		{"m.experts.expert_10", "m.experts.expert_2", 1},
		{"m.experts.expert_3", "m.experts.expert_3", 0},
		{"m.experts.3.w", "m.experts.3", 1},
		{"a.1.b", "a.1.c", -1},
		{"a.01", "a.1", 0},
	} {
		if got := naturalCompare(c.a, c.b); got != c.want {
			t.Errorf("naturalCompare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
