package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestNarrowValues plants attention whose values are narrower per head
// than its queries and keys: one projection [1, 6, h·(2·dk + dv)] laid
// out [q | k | v], 2 heads, dk 8, dv 4, the target [1, 6, h·dv]. It is
// explained as attention with v padded per head; a target of noise the
// same shape is not.
func TestNarrowValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 1))
	const n, h, dk, dv = 6, 2, 8, 4
	w := h * (2*dk + dv)
	f := randVal(rng, 1, n, w)
	want := make([]float32, n*h*dv)
	for hd := range h {
		at := func(off, width int) func(r, e int) float64 {
			return func(r, e int) float64 { return float64(f.data[r*w+off+hd*width+e]) }
		}
		plantedAttentionDV(n, n, dk, dv, at(0, dk), at(h*dk, dk), at(2*h*dk, dv), func(r, e int, y float64) { want[r*h*dv+hd*dv+e] = float32(y) })
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, h * dv}, want)
	sc.add(f, true)
	explainedWithin(t, s.attentionOf(target, sc, false), target)

	noise := randVal(rng, 1, n, h*dv)
	s, sc, target = planted(t, precision.F32, noise.shape, noise.data)
	sc.add(f, true)
	if got := s.narrowValues(target, sc); got != nil {
		t.Error("noise explained as an attention with narrow values")
	}
}

// TestBesideColumnsOf plants SHViT's mixer: a map x [1, 12, 2, 2] whose
// first 4 channels go through a single-head attention (q and k of 8
// channels, v of 4, from one convolution of them), the result joined
// along the channels with x's other 8 channels as they were. The join is
// explained; with those channels changed (no longer x's) it is not.
func TestBesideColumnsOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 2))
	const c, p, cells, dk = 12, 4, 4, 8
	x := randVal(rng, 1, c, 2, 2)
	qkv := randVal(rng, 1, 2*dk+p, 2, 2)
	att := make([]float32, p*cells)
	at := func(off int) func(r, e int) float64 {
		return func(r, e int) float64 { return float64(qkv.data[(off+e)*cells+r]) }
	}
	plantedAttentionDV(cells, cells, dk, p, at(0), at(dk), at(2*dk), func(r, e int, y float64) { att[e*cells+r] = float32(y) })
	want := slices.Concat(att, x.data[p*cells:])
	s, sc, target := planted(t, precision.F32, x.shape, want)
	sc.add(x, false)
	sc.arg[x] = true
	sc.add(qkv, true)
	explainedWithin(t, s.mapsAttention(target, sc, false), target)

	changed := slices.Clone(want)
	for i := p * cells; i < len(changed); i++ {
		changed[i] += 0.5
	}
	s, sc, target = planted(t, precision.F32, x.shape, changed)
	sc.add(x, false)
	sc.arg[x] = true
	sc.add(qkv, true)
	if got := s.mapsAttention(target, sc, false); got != nil {
		t.Error("channels no value holds explained as kept")
	}
}
