package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestPerPositionNorm: a layer norm over the channels of x [B, C, H, W]
// laid channels first, each position on its own (γ, β per channel),
// written as loops; fitNorm must explain it (no norm over the last axis
// or group norm does) and read ε.
func TestPerPositionNorm(t *testing.T) {
	const b, c, h, w = 2, 6, 3, 3
	const eps = 1e-6
	f := precision.F32
	rng := rand.New(rand.NewPCG(6, 2))
	x := &val{shape: []int{b, c, h, w}, data: make([]float32, b*c*h*w), format: f}
	for i := range x.data {
		x.data[i] = float32(rng.NormFloat64()*2 + 0.5)
	}
	g := &val{shape: []int{c}, data: make([]float32, c), format: f, param: true}
	be := &val{shape: []int{c}, data: make([]float32, c), format: f, param: true}
	for i := range c {
		g.data[i], be.data[i] = float32(1+0.3*rng.NormFloat64()), float32(0.2*rng.NormFloat64())
	}
	want := make([]float32, len(x.data))
	for bb := range b {
		for p := range h * w {
			at := func(ch int) int { return (bb*c+ch)*h*w + p }
			var mean, sq float64
			for ch := range c {
				mean += float64(x.data[at(ch)])
			}
			mean /= c
			for ch := range c {
				d := float64(x.data[at(ch)]) - mean
				sq += d * d
			}
			r := 1 / math.Sqrt(sq/c+eps)
			for ch := range c {
				want[at(ch)] = float32((float64(x.data[at(ch)])-mean)*r*float64(g.data[ch]) + float64(be.data[ch]))
			}
		}
	}
	s, _, target := planted(t, f, x.shape, want)
	got := s.fitNorm(x, []*val{g, be}, target)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(f, got.data, want); e > 1e-6 {
		t.Errorf("rel-RMS %.3g", e)
	}
	if got.fit == nil || got.fit.norm.Eps != eps {
		t.Errorf("fit %+v, want a norm of ε %g", got.fit, eps)
	}
}
