package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestChannelsLastRows: tokens made from a channels-first convolution
// output [B, C, F, H, W] moved channels last and flattened, with a vector
// added to every token (x.permute(0, 2, 3, 4, 1).reshape(B, F·H·W, C) +
// t[:, None]), are explained through the value read as rows, exactly, and
// the reading leaves the scope as it was. (This small scope's early forms
// take the target too; the MAGI replica's trace needed the reading: its
// first block's input was opaque without it.)
func TestChannelsLastRows(t *testing.T) {
	const b, c, f, h, w = 1, 32, 2, 4, 4 // as many channels as tokens, as in a tiny trace
	n := f * h * w
	rng := rand.New(rand.NewPCG(5, 6))
	img := make([]float32, b*c*n)
	for i := range img {
		img[i] = float32(rng.NormFloat64())
	}
	vec := make([]float32, c)
	for i := range vec {
		vec[i] = float32(rng.NormFloat64())
	}
	want := make([]float32, b*n*c)
	for p := range n {
		for ch := range c {
			want[p*c+ch] = img[ch*n+p] + vec[ch]
		}
	}
	other := make([]float32, c)
	for i := range other {
		other[i] = float32(rng.NormFloat64())
	}
	noise := make([]float32, b*4*n)
	for i := range noise {
		noise[i] = float32(rng.NormFloat64())
	}
	vals := []*val{
		{shape: []int{b, 4, f, h, w}, data: noise, format: precision.F32, origin: "input"},
		{shape: []int{b, c}, data: other, format: precision.F32, origin: "sinusoid"},
		{shape: []int{b, c}, data: vec, format: precision.F32, origin: "vector"},
		{shape: []int{b, c, f, h, w}, data: img, format: precision.F32, origin: "conv out"},
	}
	s, sc, target := planted(t, precision.F32, []int{b, n, c}, want, vals...)
	got := s.channelsLastRows(target, sc, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g, want exact", e)
	}
	if len(sc.vals) != len(vals) {
		t.Errorf("the rows reading left in the scope: %d values, want %d", len(sc.vals), len(vals))
	}
}
