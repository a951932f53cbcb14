package synth

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestGatedJoin plants MambaOut's gated convolution on a 3×3 grid:
// t = a · cat(u[.., 2:5], m read channels last), a and u [1, 3, 3, 5]
// rows of the scope, m a channels-first map [1, 2, 3, 3]. Explained as a
// value times a join; the same target with the map's grid transposed
// (its cells in another order) is not.
func TestGatedJoin(t *testing.T) {
	const h, w = 3, 3
	rng := rand.New(rand.NewPCG(6, 1))
	a, u, m := randVal(rng, 1, h, w, 5), randVal(rng, 1, h, w, 5), randVal(rng, 1, 2, h, w)
	a.origin, u.origin, m.origin, a.seq, u.seq, m.seq = "act", "fc1", "conv", 1, 2, 3
	for _, transposed := range []bool{false, true} {
		want := make([]float32, h*w*5)
		for i := range h {
			for j := range w {
				p := i*w + j
				for c := range 5 {
					var b float32
					if c < 3 {
						b = u.data[p*5+2+c]
					} else if transposed {
						b = m.data[((c-3)*h+j)*w+i]
					} else {
						b = m.data[((c-3)*h+i)*w+j]
					}
					want[p*5+c] = a.data[p*5+c] * b
				}
			}
		}
		s, sc, target := planted(t, precision.F32, []int{1, h, w, 5}, want, a, u, m)
		v := s.gatedJoin(target, sc.vals)
		if transposed {
			if v != nil {
				t.Errorf("a transposed map explained as a gated join: %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
		if v != nil && !strings.Contains(describe(v), "join") {
			t.Errorf("explained as %s", describe(v))
		}
	}
}
