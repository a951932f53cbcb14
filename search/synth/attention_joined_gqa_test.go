package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestJoinedKeysOfFewerHeadsEachStreamRotated: one stream's rows (b, 4
// rows) attend over keys and values joined from a prefix stream (a, 3
// rows) and their own, two query heads over one key/value head, each
// stream's keys rotated by the RoPE table of its own rows before the join
// (half layout): discovery finds the joined, rotated, grouped keys; the
// document is complete and generates the output.
func TestJoinedKeysOfFewerHeadsEachStreamRotated(t *testing.T) {
	const D, d, heads, na, nb = 16, 8, 2, 3, 4
	rng := rand.New(rand.NewPCG(6, 1))
	draw := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		return v
	}
	table := func(first, rows int) (cos, sin []float32) { // half layout [rows, d], θ 10000
		for r := range rows {
			for c := range d {
				f := math.Pow(10000, -float64(2*(c%(d/2)))/float64(d))
				cos = append(cos, float32(math.Cos(float64(first+r)*f)))
				sin = append(sin, float32(math.Sin(float64(first+r)*f)))
			}
		}
		return cos, sin
	}
	lin := func(in []float32, rows, n, m int, w []float32) []float32 {
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
	rope := func(x []float32, rows, h int, cos, sin []float32) []float32 { // x [rows, h·d]
		out := make([]float32, len(x))
		for r := range rows {
			for hd := range h {
				base := r*h*d + hd*d
				for c := range d {
					var rot float32
					if c < d/2 {
						rot = -x[base+c+d/2]
					} else {
						rot = x[base+c-d/2]
					}
					out[base+c] = x[base+c]*cos[r*d+c] + rot*sin[r*d+c]
				}
			}
		}
		return out
	}
	a, b := draw(na*D, 1), draw(nb*D, 1)
	cosA, sinA := table(0, na)
	cosB, sinB := table(na, nb)
	wka, wva, wq, wkb, wvb, wo := draw(d*D, 0.4), draw(d*D, 0.4), draw(D*D, 0.4), draw(d*D, 0.4), draw(d*D, 0.4), draw(D*D, 0.4)
	ka, va := lin(a, na, D, d, wka), lin(a, na, D, d, wva)
	q, kb, vb := lin(b, nb, D, D, wq), lin(b, nb, D, d, wkb), lin(b, nb, D, d, wvb)
	rq, rka, rkb := rope(q, nb, heads, cosB, sinB), rope(ka, na, 1, cosA, sinA), rope(kb, nb, 1, cosB, sinB)
	keys, vals := append(append([]float32{}, rka...), rkb...), append(append([]float32{}, va...), vb...)
	att := make([]float32, nb*D)
	for hd := range heads {
		for i := range nb {
			sc := make([]float64, na+nb)
			mx := math.Inf(-1)
			for j := range sc {
				var s float64
				for c := range d {
					s += float64(rq[i*D+hd*d+c]) * float64(keys[j*d+c])
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
					s += sc[j] / z * float64(vals[j*d+c])
				}
				att[i*D+hd*d+c] = float32(s)
			}
		}
	}
	y := lin(att, nb, D, D, wo)
	pt := newPlanted(t, "joinedgqa")
	put := pt.f32
	sa, sb := []int{1, na, D}, []int{1, nb, D}
	put("input/a", sa, a)
	put("input/b", sb, b)
	put("output/y", sb, y)
	step, root := 0, 0
	inputs := map[string]string{"a": "input/a", "b": "input/b"} // the tables too: a request's RoPE tables
	args := trace.Ports{{Name: "kw.a", Key: "s0/m/kw.a"}, {Name: "kw.b", Key: "s0/m/kw.b"}}
	put("s0/m/kw.a", sa, a)
	put("s0/m/kw.b", sb, b)
	for i, tb := range []struct {
		v    []float32
		rows int
	}{{cosA, na}, {sinA, na}, {cosB, nb}, {sinB, nb}} {
		key := "s0/m/kw.rope." + string(rune('0'+i))
		put(key, []int{tb.rows, d}, tb.v)
		inputs["rope"+string(rune('0'+i))] = "input/rope" + string(rune('0'+i))
		put("input/rope"+string(rune('0'+i)), []int{tb.rows, d}, tb.v)
		args = append(args, trace.Port{Name: "kw.rope." + string(rune('0'+i)), Key: key})
	}
	put("s0/m/out", sb, y)
	calls := []trace.Call{{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: append(args, trace.Port{Name: "out", Key: "s0/m/out"})}}
	params := map[string]string{}
	linear := func(name string, in []float32, inShape []int, w []float32, out []float32, outShape []int) {
		params["m."+name+".weight"] = "param/m." + name + ".weight"
		put("param/m."+name+".weight", []int{outShape[2], inShape[2]}, w)
		put("s0/m."+name+"/arg0", inShape, in)
		put("s0/m."+name+"/out", outShape, out)
		calls = append(calls, trace.Call{ID: len(calls), Step: &step, Module: "m." + name, Parent: &root, Type: "Linear", Params: []string{"m." + name + ".weight"},
			Tensors: trace.Ports{{Name: "arg0", Key: "s0/m." + name + "/arg0"}, {Name: "out", Key: "s0/m." + name + "/out"}}})
	}
	linear("to_k", a, sa, wka, ka, []int{1, na, d})
	linear("to_v", a, sa, wva, va, []int{1, na, d})
	linear("add_q", b, sb, wq, q, sb)
	linear("add_k", b, sb, wkb, kb, []int{1, nb, d})
	linear("add_v", b, sb, wvb, vb, []int{1, nb, d})
	linear("to_add_out", att, sb, wo, y, sb)
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   params, Inputs: inputs, Outputs: map[string]string{"y": "output/y"}, Calls: calls}
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
