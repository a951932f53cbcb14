package synth

import (
	"fmt"
	"math"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// TestGridTimesteps: a DDPM pipeline's noise time, round(σ·999)/1000 at
// σ = 1, 0.75, 0.4 (0.999, 0.749, 0.4), is read as an integer timestep
// divided back by 1000, and reproduced at every step.
func TestGridTimesteps(t *testing.T) {
	sigmas := []float32{1, 0.75, 0.4}
	pt := newPlanted(t, "gridtime")
	var calls []trace.Call
	want := make([]float32, len(sigmas))
	for step, sg := range sigmas {
		want[step] = float32(math.Round(float64(sg)*999)) / 1000
		key := fmt.Sprintf("s%d/m/kw.t", step)
		pt.f32(key, []int{1}, want[step:step+1])
		st := step
		calls = append(calls, trace.Call{ID: step, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "kw.t", Key: key}}})
	}
	m := &trace.Manifest{Format: "zflow-trace", Version: 1, Producer: map[string]any{"framework": "test", "dtype": "float32"}, Calls: calls}
	s, _ := testSearch(pt.open(m), precision.F32)
	sig := &val{shape: []int{1}, data: sigmas[:1], format: precision.F32, perStep: func(st int) []float32 { return sigmas[st : st+1] }}
	var found bool
	for _, v := range s.gridTimesteps(trace.Port{Name: "kw.t", Key: "s0/m/kw.t"}, sig) {
		ok := v != nil
		for st := range sigmas {
			if got, has := s.at(v, st); !ok || !has || len(got) != 1 || got[0] != want[st] {
				ok = false
			}
		}
		found = found || ok
	}
	if !found {
		t.Errorf("no reading reproduces %v at every step", want)
	}
}
