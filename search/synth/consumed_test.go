package synth

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// plantedSmallContribution writes a bf16 trace of one model call m(x) =
// h + b(h), h = x + a(x), with a and b linears: b's weights are scaled by
// bScale, so its result can lie under bf16's tolerance against h. With
// blocks k > 1 it is m(x) = a(x) + Σ_k b(x.repeat(k, 1))_k, as a shared
// expert plus experts run over the tokens repeated once per expert: h is
// a(x), and b's result, k blocks of h's size, is summed over the blocks
// (in f32, rounded once) before the add.
func plantedSmallContribution(t *testing.T, bScale float64, blocks int) (*trace.Trace, string) {
	t.Helper()
	const rows, width = 8, 16
	rng := rand.New(rand.NewPCG(7, 11))
	bf := func(n int, scale float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = precision.BF16.Round(float32(rng.NormFloat64() * scale))
		}
		return out
	}
	// linear in f32 accumulation, stored in bf16 (as the reference's GEMM)
	linear := func(x, w []float32) []float32 {
		n := len(x) / width
		out := make([]float32, n*width)
		for r := range n {
			for o := range width {
				var acc float32
				for i := range width {
					acc += x[r*width+i] * w[o*width+i]
				}
				out[r*width+o] = precision.BF16.Round(acc)
			}
		}
		return out
	}
	add := func(a, b []float32) []float32 {
		out := make([]float32, len(a))
		for i := range a {
			out[i] = precision.BF16.Round(a[i] + b[i])
		}
		return out
	}
	x := bf(rows*width, 1)
	wa := bf(width*width, 1/math.Sqrt(width))
	wb := bf(width*width, bScale/math.Sqrt(width))
	ya := linear(x, wa)
	h := add(x, ya)
	hb := h
	if blocks > 1 {
		h, hb = ya, slices.Repeat(x, blocks)
	}
	yb := linear(hb, wb)
	sum := make([]float32, rows*width)
	for b := range blocks {
		for i := range sum {
			sum[i] += yb[b*rows*width+i]
		}
	}
	for i := range sum {
		sum[i] = precision.BF16.Round(sum[i])
	}
	y := add(h, sum)

	path := filepath.Join(t.TempDir(), "small.npz")
	w, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, shape []int, d []float32) {
		b := make([]byte, 2*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
		}
		if err := w.Add(key, trace.BFloat16, shape, b); err != nil {
			t.Fatal(err)
		}
	}
	act, sq := []int{1, rows, width}, []int{width, width}
	bAct := act
	if blocks > 1 {
		bAct = []int{blocks * rows, width}
	}
	put("input/x", act, x)
	put("output/y", act, y)
	put("param/m.a.weight", sq, wa)
	put("param/m.b.weight", sq, wb)
	put("s0/m/arg0", act, x)
	put("s0/m/out", act, y)
	put("s0/m.a/arg0", act, x)
	put("s0/m.a/out", act, ya)
	put("s0/m.b/arg0", bAct, hb)
	put("s0/m.b/out", bAct, yb)
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "bfloat16"},
		Params:   map[string]string{"m.a.weight": "param/m.a.weight", "m.b.weight": "param/m.b.weight"},
		Inputs:   map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: "m.a", Parent: &root, Type: "Linear", Params: []string{"m.a.weight"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.a/arg0"}, {Name: "out", Key: "s0/m.a/out"}}},
			{ID: 2, Step: &step, Module: "m.b", Parent: &root, Type: "Linear", Params: []string{"m.b.weight"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.b/arg0"}, {Name: "out", Key: "s0/m.b/out"}}},
		}}
	if err := w.Close(m); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, path
}

// TestSmallContributionConsumed: a module whose result is under bf16's
// tolerance against the residual it is added to (h + b(h), b's result
// 1e-3 of h) is still computed and added: h alone explains the output
// within the tolerance, but leaves a captured result of a call unused,
// and h + b(h) fits at least as well. The program's output reads b's
// weight, and nothing is listed as not computed. With b's result of h's
// size the same program is found (the control). b's result may also be
// k blocks of h's size, summed over the blocks before the add.
func TestSmallContributionConsumed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scale  float64
		blocks int
	}{{"under the tolerance", 1e-3, 1}, {"of the residual's size", 1, 1},
		{"4 blocks summed, under the tolerance", 2e-4, 4}, {"4 blocks summed, of the residual's size", 1, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			tr, path := plantedSmallContribution(t, tc.scale, tc.blocks)
			ya, _ := tr.Tensor("s0/m.b/out")
			yb, _ := ya.Float32Rounded()
			hKey := "s0/m.b/arg0"
			if tc.blocks > 1 {
				hKey = "s0/m.a/out"
			}
			hv, _ := tr.Tensor(hKey)
			h, _ := hv.Float32Rounded()
			yt, _ := tr.Tensor("s0/m/out")
			y, _ := yt.Float32Rounded()
			small := relRMS(precision.BF16, h, y) <= tolerance(precision.BF16)
			if want := tc.scale < 1; small != want {
				t.Fatalf("the planted trace: h explains the output within bf16's tolerance %v, want %v (b's result rel-RMS %.3g)", small, want, relRMS(precision.BF16, yb, y))
			}
			res, err := Discover(context.Background(), tr, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n := res.Doc.NotComputed(); n != 0 || !res.Complete() {
				t.Errorf("%d boundaries not computed, complete %v: %v", n, res.Complete(), res.Doc.Undetermined)
			}
			if !outputReads(res, "param:m.b.weight") {
				t.Errorf("the program's output does not read m.b's weight: b's result left unused")
			}
			if rel := generate(t, res.Doc, tr); rel > tolerance(precision.BF16) {
				t.Errorf("generated output rel-RMS %.3g", rel)
			}
		})
	}
}

// outputReads reports whether the program's output depends on value name.
func outputReads(res *Result, name string) bool {
	p := res.Doc.Program
	made := map[string][]string{}
	for _, n := range p.Nodes {
		for _, o := range n.Out {
			made[o] = n.In
		}
	}
	seen := map[string]bool{}
	stack := slices.Clone(p.Outputs)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if v == name {
			return true
		}
		if seen[v] {
			continue
		}
		seen[v] = true
		stack = append(stack, made[v]...)
	}
	return false
}
