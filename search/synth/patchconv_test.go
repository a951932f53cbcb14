package synth

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestStridedConvolutionsOfAPaddedSequence: a 1-D sequence joined along
// its channels with a context, zero-padded by one row to a multiple of the
// patch, read channels first by a convolution whose kernel equals its
// stride (a 1-D patch embedding), then a transposed convolution of the
// same kernel and stride (the unpatchify), its rows cut back to the
// sequence's length: discovery explains the padding (a constant of zeros
// joined), both convolutions (each a linear over blocks of the kernel) and
// the cut; the document is complete and generates the output.
func TestStridedConvolutionsOfAPaddedSequence(t *testing.T) {
	const T, cx, cc, hid, out, k = 5, 2, 3, 4, 2, 2
	rng := rand.New(rand.NewPCG(5, 8))
	draw := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, c := draw(T*cx), draw(T*cc)
	w1, b1 := draw(hid*(cc+cx)*k), draw(hid) // Conv1d weight [hid, C, k]
	w2, b2 := draw(hid*out*k), draw(out)     // ConvTranspose1d weight [hid, out, k]
	const P = T + 1                          // padded length
	in := make([]float32, (cc+cx)*P)         // [1, C, P], channels first
	for r := range T {
		for ch := range cc {
			in[ch*P+r] = c[r*cc+ch]
		}
		for ch := range cx {
			in[(cc+ch)*P+r] = x[r*cx+ch]
		}
	}
	const n = P / k
	h := make([]float32, hid*n) // [1, hid, n]
	for o := range hid {
		for j := range n {
			s := b1[o]
			for ch := range cc + cx {
				for q := range k {
					s += w1[(o*(cc+cx)+ch)*k+q] * in[ch*P+j*k+q]
				}
			}
			h[o*n+j] = s
		}
	}
	up := make([]float32, out*P) // [1, out, P]
	for o := range out {
		for j := range n {
			for q := range k {
				s := b2[o]
				for ch := range hid {
					s += h[ch*n+j] * w2[(ch*out+o)*k+q]
				}
				up[o*P+j*k+q] = s
			}
		}
	}
	y := make([]float32, T*out) // [1, T, out]: up channels last, rows cut to T
	for r := range T {
		for o := range out {
			y[r*out+o] = up[o*P+r]
		}
	}
	pt := newPlanted(t, "strided")
	put := pt.f32
	put("input/x", []int{1, T, cx}, x)
	put("input/c", []int{1, T, cc}, c)
	put("output/y", []int{1, T, out}, y)
	put("param/m.conv.weight", []int{hid, cc + cx, k}, w1)
	put("param/m.conv.bias", []int{hid}, b1)
	put("param/m.up.weight", []int{hid, out, k}, w2)
	put("param/m.up.bias", []int{out}, b2)
	put("s0/m/kw.x", []int{1, T, cx}, x)
	put("s0/m/kw.c", []int{1, T, cc}, c)
	put("s0/m/out", []int{1, T, out}, y)
	put("s0/m.conv/arg0", []int{1, cc + cx, P}, in)
	put("s0/m.conv/out", []int{1, hid, n}, h)
	put("s0/m.up/arg0", []int{1, hid, n}, h)
	put("s0/m.up/out", []int{1, out, P}, up)
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params: map[string]string{"m.conv.weight": "param/m.conv.weight", "m.conv.bias": "param/m.conv.bias",
			"m.up.weight": "param/m.up.weight", "m.up.bias": "param/m.up.bias"},
		Inputs:  map[string]string{"x": "input/x", "c": "input/c"},
		Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{
			{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "kw.x", Key: "s0/m/kw.x"}, {Name: "kw.c", Key: "s0/m/kw.c"}, {Name: "out", Key: "s0/m/out"}}},
			{ID: 1, Step: &step, Module: "m.conv", Parent: &root, Type: "Conv1d", Params: []string{"m.conv.weight", "m.conv.bias"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.conv/arg0"}, {Name: "out", Key: "s0/m.conv/out"}}},
			{ID: 2, Step: &step, Module: "m.up", Parent: &root, Type: "ConvTranspose1d", Params: []string{"m.up.weight", "m.up.bias"},
				Tensors: trace.Ports{{Name: "arg0", Key: "s0/m.up/arg0"}, {Name: "out", Key: "s0/m.up/out"}}},
		}}
	completeReading(t, pt, m, 1e-6, "param:m.conv.weight", "param:m.up.weight", "param:m.up.bias")
}

// completeReading discovers the planted trace of manifest m and checks
// that the document is complete, that its output reads each of the
// values named, and that it generates the output within bound.
func completeReading(t *testing.T, pt *plantedTrace, m *trace.Manifest, bound float64, reads ...string) {
	t.Helper()
	tr, path := pt.open(m), pt.path
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("not complete: %v", res.Doc.Undetermined)
	}
	for _, p := range reads {
		if !outputReads(res, p) {
			t.Errorf("the program's output does not read %s", p)
		}
	}
	if rel := generate(t, res.Doc, tr); rel > bound {
		t.Errorf("generated output rel-RMS %.3g", rel)
	}
}
