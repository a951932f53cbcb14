package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestInitialBatchNorm: a batch norm in eval mode with its initial
// statistics, x·(γ·(1/√(1 + ε))) + β per channel of x [B, C, L] as torch
// computes it in f32, is read with its ε and declared; the same values
// with the channels' β shifted by a learned mean are not (the assumption
// must reproduce the output, never be forced on it).
func TestInitialBatchNorm(t *testing.T) {
	const b, c, l = 2, 4, 6
	rng := rand.New(rand.NewPCG(3, 9))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	x := &val{shape: []int{b, c, l}, data: fill(b * c * l), format: precision.F32, origin: "conv out", seq: 10}
	g := &val{shape: []int{c}, data: fill(c), format: precision.F32, origin: "γ", param: true}
	beta := &val{shape: []int{c}, data: fill(c), format: precision.F32, origin: "β", param: true}
	norm := func(mean float32) []float32 {
		inv := float32(1 / math.Sqrt(float64(float32(1)+float32(1e-3))))
		out := make([]float32, len(x.data))
		for i, v := range x.data {
			ch := i / l % c
			alpha := inv * g.data[ch]
			out[i] = (v-mean)*alpha + beta.data[ch]
		}
		return out
	}
	s, _, target := planted(t, precision.F32, []int{b, c, l}, norm(0), x)
	got := s.initialBatchNorm(x, []*val{g, beta}, target)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, target.data); e > 1e-7 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
	if len(s.batchNorms) != 1 || s.batchNorms[0].eps != 1e-3 {
		t.Errorf("records %+v, want one with ε 1e-3", s.batchNorms)
	} else if f := s.batchNorms[0].factor(); f.Name != "batch_norm_stats" || f.Value != "initial" {
		t.Errorf("factor %s = %v", f.Name, f.Value)
	}
	s2, _, shifted := planted(t, precision.F32, []int{b, c, l}, norm(0.5), x)
	if v := s2.initialBatchNorm(x, []*val{g, beta}, shifted); v != nil {
		t.Errorf("a norm with a learned mean read as the initial one (%s)", v.from.label)
	}
}
