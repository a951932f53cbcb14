package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// gridRopeRows is an interleaved 2-D RoPE table [still + h·w, 2·dAxis] over
// a row-major h×w grid (the first dAxis channels turned by the row, the
// rest by the column, θ 10000, each frequency twice), after still rows of
// cos 1 / sin 0.
func gridRopeRows(still, h, w, dAxis int) (cos, sin []float32) {
	d := 2 * dAxis
	for range still {
		for range d {
			cos, sin = append(cos, 1), append(sin, 0)
		}
	}
	for r := range h {
		for c := range w {
			for axis, pos := range []int{r, c} {
				for i := range dAxis / 2 {
					f := math.Pow(10000, -2*float64(i)/float64(dAxis))
					a := float64(pos) * f
					for range 2 {
						cos, sin = append(cos, float32(math.Cos(a))), append(sin, float32(math.Sin(a)))
					}
				}
				_ = axis
			}
		}
	}
	return cos, sin
}

// TestRopeByBufferedTables: a parameterless call rotates its argument q
// [B, L, H, D] by RoPE tables it holds itself (buffers: never passed, never
// captured), a 3×4 grid's interleaved 2-D RoPE, after 0 or 2 rows that do
// not turn (tokens joined before the grid's). Discovery solves the tables
// from the argument and the result, explains them as the grid's RoPE (the
// still rows as constants before it), and the document is complete and
// generates the output. Before, the call's result was unexplained.
func TestRopeByBufferedTables(t *testing.T) {
	for _, still := range []int{0, 2} {
		const h, w, heads, dAxis = 3, 4, 2, 8
		d := 2 * dAxis
		rows := still + h*w
		cos, sin := gridRopeRows(still, h, w, dAxis)
		rng := rand.New(rand.NewPCG(5, uint64(still)))
		x := make([]float32, rows*heads*d)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]float32, len(x))
		for r := range rows {
			for hd := range heads {
				o := (r*heads + hd) * d
				for i := 0; i < d; i += 2 {
					c, s := cos[r*d+i], sin[r*d+i]
					y[o+i] = x[o+i]*c - x[o+i+1]*s
					y[o+i+1] = x[o+i+1]*c + x[o+i]*s
				}
			}
		}
		pt := newPlanted(t, "bufrope")
		shape := []int{1, rows, heads, d}
		pt.f32("input/q", shape, x)
		pt.f32("output/y", shape, y)
		pt.f32("s0/m/arg0", shape, x)
		pt.f32("s0/m/out", shape, y)
		pt.f32("s0/m.rope/arg0", shape, x)
		pt.f32("s0/m.rope/out", shape, y)
		step, root := 0, 0
		m := &trace.Manifest{Format: "zflow-trace", Version: 1,
			Producer: map[string]any{"framework": "test", "dtype": "float32"},
			Params:   map[string]string{},
			Inputs:   map[string]string{"q": "input/q"}, Outputs: map[string]string{"y": "output/y"},
			Calls: []trace.Call{
				{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}},
				{ID: 1, Step: &step, Module: "m.rope", Parent: &root, Type: "Rotary",
					Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.rope/arg0"}, {Name: "out", Key: "s0/m.rope/out"}}},
			}}
		tr, path := pt.open(m), pt.path
		res, err := Discover(context.Background(), tr, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Complete() {
			t.Errorf("still %d: not complete: %v", still, res.Doc.Undetermined)
		}
		tables := 0
		for _, n := range res.Doc.Program.Nodes {
			if n.Op == program.OpRopeTable.String() {
				tables++
			}
		}
		if tables == 0 {
			t.Errorf("still %d: the program makes no RoPE table", still)
		}
		if rel := generate(t, res.Doc, tr); rel > 1e-6 {
			t.Errorf("still %d: generated output rel-RMS %.3g", still, rel)
		}
	}
}

// TestTokensJoinedMidNetwork: a model joins, before a later layer, n tokens
// made of an embedding [1, D] repeated n times plus a learned table [1, n,
// D] before its rows. Discovery explains the join's first piece as the
// repeated embedding plus the table (not as n lone tokens, each the
// embedding plus a row of the table, which spent the join's pieces), and
// the document is complete and generates the output.
func TestTokensJoinedMidNetwork(t *testing.T) {
	const n, rows, d = 4, 6, 8
	rng := rand.New(rand.NewPCG(9, 1))
	randn := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	c, x, table, we, wb := randn(d), randn(rows*d), randn(n*d), randn(d*d), randn(d*d)
	lin := func(in, wt []float32, k int) []float32 {
		out := make([]float32, k*d)
		for r := range k {
			for o := range d {
				var acc float32
				for i := range d {
					acc += in[r*d+i] * wt[o*d+i]
				}
				out[r*d+o] = acc
			}
		}
		return out
	}
	e := lin(c, we, 1)
	joined := make([]float32, 0, (n+rows)*d)
	for r := range n {
		for i := range d {
			joined = append(joined, e[i]+table[r*d+i])
		}
	}
	joined = append(joined, x...)
	out := lin(joined, wb, n+rows)
	pt := newPlanted(t, "midjoin")
	pt.f32("param/m.table", []int{1, n, d}, table)
	pt.f32("param/m.emb.weight", []int{d, d}, we)
	pt.f32("param/m.blk.weight", []int{d, d}, wb)
	pt.f32("input/c", []int{1, d}, c)
	pt.f32("input/x", []int{1, rows, d}, x)
	pt.f32("output/y", []int{1, n + rows, d}, out)
	pt.f32("s0/m/arg0", []int{1, rows, d}, x)
	pt.f32("s0/m/arg1", []int{1, d}, c)
	pt.f32("s0/m/out", []int{1, n + rows, d}, out)
	pt.f32("s0/m.emb/arg0", []int{1, d}, c)
	pt.f32("s0/m.emb/out", []int{1, d}, e)
	pt.f32("s0/m.blk/arg0", []int{1, n + rows, d}, joined)
	pt.f32("s0/m.blk/out", []int{1, n + rows, d}, out)
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{"m.table": "param/m.table", "m.emb.weight": "param/m.emb.weight", "m.blk.weight": "param/m.blk.weight"},
		Inputs:   map[string]string{"c": "input/c", "x": "input/x"}, Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Params: []string{"m.table"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "arg1", Key: "s0/m/arg1"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: "m.emb", Parent: &root, Type: "Linear", Params: []string{"m.emb.weight"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.emb/arg0"}, {Name: "out", Key: "s0/m.emb/out"}}},
			{ID: 2, Step: &step, Module: "m.blk", Parent: &root, Type: "Linear", Params: []string{"m.blk.weight"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.blk/arg0"}, {Name: "out", Key: "s0/m.blk/out"}}},
		}}
	tr, path := pt.open(m), pt.path
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Errorf("not complete: %v", res.Doc.Undetermined)
	}
	// the join is two pieces: the n tokens made at once, then the rows
	joins := 0
	for _, nd := range res.Doc.Program.Nodes {
		if nd.Op == program.OpConcat.String() {
			joins++
			if len(nd.In) != 2 {
				t.Errorf("the join has %d pieces, want 2 (the tokens, the rows): %v", len(nd.In), nd.In)
			}
		}
	}
	if joins != 1 {
		t.Errorf("%d joins, want 1", joins)
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g", rel)
	}
}
