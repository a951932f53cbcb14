package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestBroadcastProduct plants a squeeze-and-excitation output x·g over a
// map x [1, 4, 3, 3] whose second channel is all zero (a ReLU's), g [1, 4,
// 1, 1] a saturated hard-sigmoid gate (0, 1, 0.37, 1): explained as the
// product; the same target moved off by 0.1 in one channel is not.
func TestBroadcastProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	x := randVal(rng, 1, 4, 3, 3)
	for i := 9; i < 18; i++ {
		x.data[i] = 0
	}
	g := &val{shape: []int{1, 4, 1, 1}, data: []float32{0, 1, 0.37, 1}, format: precision.F32, origin: "gate"}
	prod := make([]float32, len(x.data))
	for i := range prod {
		prod[i] = x.data[i] * g.data[i/9]
	}
	for _, off := range []float32{0, 0.1} {
		want := append([]float32(nil), prod...)
		for i := 18; i < 27; i++ {
			want[i] += off
		}
		s, _, target := planted(t, precision.F32, []int{1, 4, 3, 3}, want)
		v := s.broadcastProduct(target, []*val{x, g})
		if off != 0 {
			if v != nil {
				t.Errorf("a target 0.1 off in one channel explained as %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
	}
}
