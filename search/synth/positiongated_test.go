package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestPositionGatedSum plants FocalNet's focal modulation on a 4×4 grid
// of 6 channels: two contexts [1, 6, 4, 4] and a global context
// [1, 6, 1, 1], each times one column of a projection laid channels last
// [1, 4, 4, 5] (its columns 2, 3 and 4), summed in that order. Explained
// as a sum of values gated per cell; the same sum with a gate no channel
// of the scope holds is not.
func TestPositionGatedSum(t *testing.T) {
	const c, h, w, k = 6, 4, 4, 5
	rng := rand.New(rand.NewPCG(9, 2))
	c0, c1, glob, proj := randVal(rng, 1, c, h, w), randVal(rng, 1, c, h, w), randVal(rng, 1, c, 1, 1), randVal(rng, 1, h, w, k)
	c0.origin, c1.origin, glob.origin, proj.origin = "ctx0", "ctx1", "global", "proj"
	c0.seq, c1.seq, glob.seq, proj.seq = 2, 3, 4, 1
	stray := randVal(rng, 1, h, w)
	for _, foreign := range []bool{false, true} {
		want := make([]float32, c*h*w)
		for ch := range c {
			for p := range h * w {
				g2 := proj.data[p*k+4]
				if foreign {
					g2 = stray.data[p]
				}
				want[ch*h*w+p] = c0.data[ch*h*w+p]*proj.data[p*k+2] + c1.data[ch*h*w+p]*proj.data[p*k+3] + glob.data[ch]*g2
			}
		}
		s, sc, target := planted(t, precision.F32, []int{1, c, h, w}, want, proj, c0, c1, glob)
		v := s.positionGatedSum(target, sc.vals)
		if foreign {
			if v != nil {
				t.Errorf("a gate no channel holds explained as %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
	}
}
