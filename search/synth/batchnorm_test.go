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

// TestBatchNormOverLooseGroupNorm: in bf16, a batch norm at its initial
// statistics over a map whose own statistics are near 0 and 1 (a conv
// output of a small random model) is within tolerance of a group norm of
// one group too; the batch norm, near exact, must win, and its factor be
// recorded once. A real group norm of the same map is still read as one,
// no batch norm recorded.
func TestBatchNormOverLooseGroupNorm(t *testing.T) {
	const c, hw = 4, 64
	rng := rand.New(rand.NewPCG(5, 2))
	raw := make([]float64, c*hw)
	var mean, sq float64
	for i := range raw {
		raw[i] = rng.NormFloat64()
		mean += raw[i]
	}
	mean /= float64(len(raw))
	for _, v := range raw {
		sq += (v - mean) * (v - mean)
	}
	std := math.Sqrt(sq / float64(len(raw)))
	x := &val{shape: []int{1, c, 8, 8}, data: make([]float32, len(raw)), format: precision.BF16, origin: "conv out", seq: 10}
	for i, v := range raw {
		x.data[i] = precision.BF16.Round(float32((v-mean)/std*1.01 + 0.004)) // statistics near, not at, 0 and 1
	}
	g := &val{shape: []int{c}, data: []float32{1.5, 0.75, 1.25, 2}, format: precision.BF16, origin: "γ", param: true}
	beta := &val{shape: []int{c}, data: []float32{0.5, -0.25, 0.125, 1}, format: precision.BF16, origin: "β", param: true}
	inv := float32(1 / math.Sqrt(float64(float32(1)+float32(1e-5))))
	bn := make([]float32, len(x.data))
	for i, v := range x.data {
		ch := i / hw
		bn[i] = precision.BF16.Round(v*(g.data[ch]*inv) + beta.data[ch])
	}
	s, _, target := planted(t, precision.BF16, x.shape, bn, x)
	got := s.fitNorm(x, []*val{g, beta}, target)
	if got == nil || relRMS(precision.BF16, got.data, target.data) > looseFloor(precision.BF16) {
		t.Fatalf("batch norm not read: %v", got)
	}
	if len(s.batchNorms) != 1 {
		t.Errorf("%d batch norm records, want 1", len(s.batchNorms))
	}

	var m, v float64
	for _, a := range x.data {
		m += float64(a)
	}
	m /= float64(len(x.data))
	for _, a := range x.data {
		v += (float64(a) - m) * (float64(a) - m)
	}
	rstd := 1 / math.Sqrt(v/float64(len(x.data))+1e-5)
	gn := make([]float32, len(x.data))
	for i, a := range x.data {
		ch := i / hw
		gn[i] = precision.BF16.Round(float32((float64(a)-m)*rstd)*g.data[ch] + beta.data[ch])
	}
	s, _, target = planted(t, precision.BF16, x.shape, gn, x)
	got = s.fitNorm(x, []*val{g, beta}, target)
	if got == nil || len(s.batchNorms) != 0 {
		t.Errorf("a group norm read with %d batch norm records (%v)", len(s.batchNorms), got)
	}
}
