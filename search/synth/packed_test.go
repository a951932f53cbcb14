package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestPackedRowsWithoutABatchAxis: a latent [1, C, 1, H, W] cut into 2×2
// patches packed without a batch axis ([N, p·p·C], channels last inside
// each patch), projected, then causal attention of two heads over those
// [N, H·D] rows (q, k, v each a linear of the rows), and an output
// projection: discovery reads the patches as a batch of one beside the
// image and the attention as a batch of one over the scope's rows; the
// document is complete and generates the output.
func TestPackedRowsWithoutABatchAxis(t *testing.T) {
	const C, H, W, p, D, heads = 2, 4, 4, 2, 8, 2
	const N, F = (H / p) * (W / p), p * p * C
	rng := rand.New(rand.NewPCG(4, 4))
	draw := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		return v
	}
	x := draw(C*H*W, 1)
	patches := make([]float32, N*F) // [N, (ph, pw, c)]
	for hi := range H / p {
		for wi := range W / p {
			for ph := range p {
				for pw := range p {
					for c := range C {
						patches[(hi*(W/p)+wi)*F+(ph*p+pw)*C+c] = x[(c*H+hi*p+ph)*W+wi*p+pw]
					}
				}
			}
		}
	}
	lin := func(in []float32, rows, n, m int, w []float32) []float32 { // in [rows, n] · wᵀ, w [m, n]
		out := make([]float32, rows*m)
		for r := range rows {
			for o := range m {
				var s float32
				for i := range n {
					s += in[r*n+i] * w[o*n+i]
				}
				out[r*m+o] = s
			}
		}
		return out
	}
	wi, wq, wk, wv, wo := draw(D*F, 0.5), draw(D*D, 0.4), draw(D*D, 0.4), draw(D*D, 0.4), draw(D*D, 0.4)
	h := lin(patches, N, F, D, wi)
	q, k, v := lin(h, N, D, D, wq), lin(h, N, D, D, wk), lin(h, N, D, D, wv)
	const d = D / heads
	att := make([]float32, N*D)
	for hd := range heads {
		for i := range N {
			sc := make([]float64, i+1)
			mx := math.Inf(-1)
			for j := 0; j <= i; j++ {
				var s float64
				for c := range d {
					s += float64(q[i*D+hd*d+c]) * float64(k[j*D+hd*d+c])
				}
				sc[j] = s / math.Sqrt(d)
				mx = math.Max(mx, sc[j])
			}
			var z float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				z += sc[j]
			}
			for c := range d {
				var s float64
				for j := range sc {
					s += sc[j] / z * float64(v[j*D+hd*d+c])
				}
				att[i*D+hd*d+c] = float32(s)
			}
		}
	}
	y := lin(att, N, D, D, wo)
	pt := newPlanted(t, "packed")
	put := pt.f32
	img, rows, tok := []int{1, C, 1, H, W}, []int{N, D}, []int{N, F}
	put("input/x", img, x)
	put("output/y", rows, y)
	params := map[string]string{}
	var calls []trace.Call
	step, root := 0, 0
	calls = append(calls, trace.Call{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "kw.x", Key: "s0/m/kw.x"}, {Name: "out", Key: "s0/m/out"}}})
	put("s0/m/kw.x", img, x)
	put("s0/m/out", rows, y)
	linear := func(name string, in []float32, inShape []int, w []float32, wShape []int, out []float32) {
		params["m."+name+".weight"] = "param/m." + name + ".weight"
		put("param/m."+name+".weight", wShape, w)
		put("s0/m."+name+"/arg0", inShape, in)
		put("s0/m."+name+"/out", rows, out)
		calls = append(calls, trace.Call{ID: len(calls), Step: &step, Module: "m." + name, Parent: &root, Type: "Linear", Params: []string{"m." + name + ".weight"},
			Tensors: trace.Ports{{Name: "arg0", Key: "s0/m." + name + "/arg0"}, {Name: "out", Key: "s0/m." + name + "/out"}}})
	}
	linear("proj_in", patches, tok, wi, []int{D, F}, h)
	linear("to_q", h, rows, wq, []int{D, D}, q)
	linear("to_k", h, rows, wk, []int{D, D}, k)
	linear("to_v", h, rows, wv, []int{D, D}, v)
	linear("to_out", att, rows, wo, []int{D, D}, y)
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   params, Inputs: map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"}, Calls: calls}
	tr, path := pt.open(m), pt.path
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("not complete: %v", res.Doc.Undetermined)
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-5 {
		t.Errorf("generated output rel-RMS %.3g", rel)
	}
}
