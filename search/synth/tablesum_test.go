package synth

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestTablePlusSummedEmbeddings: a final modulation whose (shift, scale)
// are the rows of a learned [1, 2, C] table plus a timestep embedding that
// is itself two embedders' outputs summed (t and a second time), the sum
// made in the forward and never captured: x·(1 + (row 1 + (a + b))) +
// (row 0 + (a + b)), read by a projection. Discovery explains the
// projection's input from the rows and the two vectors, the document is
// complete and generates the output.
func TestTablePlusSummedEmbeddings(t *testing.T) {
	const S, C, O = 6, 8, 4
	rng := rand.New(rand.NewPCG(9, 2))
	draw := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		return v
	}
	x, a, b := draw(S*C, 1), draw(C, 0.5), draw(C, 0.5)
	table, w := draw(2*C, 0.3), draw(O*C, 0.4)
	mod := make([]float32, S*C)
	for r := range S {
		for ch := range C {
			e := a[ch] + b[ch]
			shift, scale := table[ch]+e, table[C+ch]+e
			mod[r*C+ch] = x[r*C+ch]*(1+scale) + shift
		}
	}
	y := make([]float32, S*O)
	for r := range S {
		for o := range O {
			var s float32
			for ch := range C {
				s += mod[r*C+ch] * w[o*C+ch]
			}
			y[r*O+o] = s
		}
	}
	pt := newPlanted(t, "tablesum")
	put := pt.f32
	put("input/x", []int{1, S, C}, x)
	put("input/a", []int{1, C}, a)
	put("input/b", []int{1, C}, b)
	put("output/y", []int{1, S, O}, y)
	put("param/m.table", []int{1, 2, C}, table)
	put("param/m.proj.weight", []int{O, C}, w)
	put("s0/m/kw.x", []int{1, S, C}, x)
	put("s0/m/kw.a", []int{1, C}, a)
	put("s0/m/kw.b", []int{1, C}, b)
	put("s0/m/out", []int{1, S, O}, y)
	put("s0/m.proj/arg0", []int{1, S, C}, mod)
	put("s0/m.proj/out", []int{1, S, O}, y)
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{"m.table": "param/m.table", "m.proj.weight": "param/m.proj.weight"},
		Inputs:   map[string]string{"x": "input/x", "a": "input/a", "b": "input/b"},
		Outputs:  map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Params: []string{"m.table"},
				Tensors: trace.Ports{{Name: "kw.x", Key: "s0/m/kw.x"}, {Name: "kw.a", Key: "s0/m/kw.a"}, {Name: "kw.b", Key: "s0/m/kw.b"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: "m.proj", Parent: &root, Type: "Linear", Params: []string{"m.proj.weight"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.proj/arg0"}, {Name: "out", Key: "s0/m.proj/out"}}},
		}}
	tr, path := pt.open(m), pt.path
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("not complete: %v", res.Doc.Undetermined)
	}
	if !outputReads(res, "param:m.table") {
		t.Error("the program's output does not read the table")
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g", rel)
	}
}
