package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestPeeledGate plants GhostNetV2's output: two maps [1, 2, 4, 4] joined
// along the channels, times a sigmoid gate [1, 4, 2, 2] upsampled ×2 by
// nearest (each entry repeated over a 2×2 block). Explained as the join
// times the repeated gate; a target whose gate is read at the wrong
// cells (upsampled along one axis only, the other transposed) is not.
func TestPeeledGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	a, b := randVal(rng, 1, 2, 4, 4), randVal(rng, 1, 2, 4, 4)
	a.origin, b.origin = "a", "b"
	g := randVal(rng, 1, 4, 2, 2)
	for i, v := range g.data {
		g.data[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
	g.origin = "gate"
	for _, wrong := range []bool{false, true} {
		want := make([]float32, 64)
		for c := range 4 {
			src, cc := a, c
			if c >= 2 {
				src, cc = b, c-2
			}
			for i := range 4 {
				for j := range 4 {
					gi, gj := i/2, j/2
					if wrong {
						gi, gj = j/2, i/2
					}
					want[(c*4+i)*4+j] = src.data[(cc*4+i)*4+j] * g.data[(c*2+gi)*2+gj]
				}
			}
		}
		s, sc, target := planted(t, precision.F32, []int{1, 4, 4, 4}, want, a, b, g)
		v := s.peeledGate(target, sc, []*val{g, b, a})
		if wrong {
			if v != nil {
				t.Errorf("a gate read at transposed cells explained as %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
	}
}

// TestPooledMap plants F.avg_pool2d(x, 2, 2) of a map [1, 3, 6, 4] held
// by the scope (no module call): explained as the pool; the same target
// with one cell moved is not.
func TestPooledMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	x := randVal(rng, 1, 3, 6, 4)
	want := make([]float32, 3*3*2)
	for c := range 3 {
		for i := range 3 {
			for j := range 2 {
				var sum float32
				for a := range 2 {
					for b := range 2 {
						sum += x.data[(c*6+2*i+a)*4+2*j+b]
					}
				}
				want[(c*3+i)*2+j] = sum / 4
			}
		}
	}
	for _, off := range []float32{0, 0.5} {
		data := append([]float32(nil), want...)
		data[5] += off
		s, _, target := planted(t, precision.F32, []int{1, 3, 3, 2}, data, x)
		v := s.pooledMap(target, []*val{x})
		if off != 0 {
			if v != nil {
				t.Errorf("a target one cell off explained as %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
	}
}
