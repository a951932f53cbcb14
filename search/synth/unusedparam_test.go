package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// TestUnusedScalarParam: a mixture-of-experts router whose module also
// holds a one-number parameter its forward does not read (a temperature
// left at its init, a disabled branch's scale) is read as the router:
// top-1 weights and indices of the softmax of x·Wᵀ. Before, the router's
// form counted the call's parameters (a weight, maybe a bias), took the
// number for neither and the call's results were left unexplained (a
// HiDream block given such a parameter lost its experts).
func TestUnusedScalarParam(t *testing.T) {
	const tokens, d, e = 6, 4, 3
	x := []float32{0.5, -1, 1.5, 0.25, -0.75, 2, 0.1, -0.3, 1.2, 0.4, -0.6, 0.9, -1.1, 0.3, 0.7, -0.2, 0.6, -0.4, 0.2, 1.3, -0.9, 0.8, 0.05, -0.5}
	w := []float32{0.3, -0.2, 0.1, 0.05, 0.2, 0.4, -0.1, 0.3, -0.3, 0.1, 0.25, -0.2}
	weights := make([]float32, tokens)
	idx := make([]int64, tokens)
	for r := range tokens {
		logits := make([]float64, e)
		best := 0
		var z float64
		for j := range e {
			for i := range d {
				logits[j] += float64(x[r*d+i] * w[j*d+i])
			}
			if logits[j] > logits[best] {
				best = j
			}
		}
		for j := range e {
			z += math.Exp(logits[j] - logits[best])
		}
		weights[r], idx[r] = float32(1/z), int64(best)
	}
	pt := newPlanted(t, "router")
	pt.f32("s0/gate/arg0", []int{tokens, d}, x)
	pt.f32("s0/gate/out.0", []int{tokens, 1}, weights)
	pt.i64("s0/gate/out.1", []int{tokens, 1}, idx)
	pt.f32("param/gate.weight", []int{e, d}, w)
	pt.f32("param/gate.temperature", []int{}, []float32{1})
	step := 0
	c := trace.Call{ID: 0, Step: &step, Module: "gate", Type: "Gate", Params: []string{"gate.weight", "gate.temperature"},
		Tensors: trace.Ports{{Name: "arg0", Key: "s0/gate/arg0"}, {Name: "out.0", Key: "s0/gate/out.0"}, {Name: "out.1", Key: "s0/gate/out.1"}}}
	m := &trace.Manifest{Format: "zflow-trace", Version: 1, Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params: map[string]string{"gate.weight": "param/gate.weight", "gate.temperature": "param/gate.temperature"},
		Calls:  []trace.Call{c}}
	s, sc := testSearch(pt.open(m), precision.F32)
	for _, name := range c.Params {
		p, err := s.capture(m.Params[name])
		if err != nil {
			t.Fatal(err)
		}
		p.param = true
		s.params[name] = p
	}
	xv, err := s.capture("s0/gate/arg0")
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]*val{}
	if err := s.leaf(c, sc, map[string]*val{"arg0": xv}, outs); err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"out.0", "out.1"} {
		if v := outs[port]; v == nil || v.opaque {
			t.Errorf("%s not explained", port)
		}
	}
}
