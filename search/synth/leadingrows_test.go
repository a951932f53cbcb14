package synth

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestLeadingRowsOfATable: a module handed only the request's shape (no
// tensor argument) returns rows c…c+n−1 of its table (a position table
// read by arange, with c reserved rows), added to the input: discovery
// explains the rows as the table gathered at positions made from the
// request's shape, the document is complete, generates the output, and
// reads the table.
func TestLeadingRowsOfATable(t *testing.T) {
	for _, offset := range []int{0, 2} {
		const rows, width, tableRows = 6, 8, 16
		rng := rand.New(rand.NewPCG(3, uint64(offset)))
		table := make([]float32, tableRows*width)
		for i := range table {
			table[i] = float32(rng.NormFloat64())
		}
		x := make([]float32, rows*width)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		pos := table[offset*width : (offset+rows)*width]
		y := make([]float32, len(x))
		for i := range y {
			y[i] = x[i] + pos[i]
		}
		pt := newPlanted(t, "rows")
		put := pt.f32
		act := []int{1, rows, width}
		put("input/x", act, x)
		put("output/y", act, y)
		put("param/m.pos.weight", []int{tableRows, width}, table)
		put("s0/m/arg0", act, x)
		put("s0/m/out", act, y)
		put("s0/m.pos/out", act, pos)
		step, root := 0, 0
		m := &trace.Manifest{Format: "zflow-trace", Version: 1,
			Producer: map[string]any{"framework": "test", "dtype": "float32"},
			Params:   map[string]string{"m.pos.weight": "param/m.pos.weight"},
			Inputs:   map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"},
			Calls: []trace.Call{
				{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}},
				{ID: 1, Step: &step, Module: "m.pos", Parent: &root, Type: "Positions", Params: []string{"m.pos.weight"},
					Tensors: trace.Ports{{Name: "out", Key: "s0/m.pos/out"}}, Scalars: map[string]any{"arg0": rows}},
			}}
		tr, path := pt.open(m), pt.path
		res, err := Discover(context.Background(), tr, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Complete() {
			t.Errorf("offset %d: not complete: %v", offset, res.Doc.Undetermined)
		}
		if !outputReads(res, "param:m.pos.weight") {
			t.Errorf("offset %d: the program's output does not read the table", offset)
		}
		if rel := generate(t, res.Doc, tr); rel > 1e-6 {
			t.Errorf("offset %d: generated output rel-RMS %.3g", offset, rel)
		}
	}
}
