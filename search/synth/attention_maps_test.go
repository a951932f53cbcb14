package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestMapsAttention plants a convolutional attention: q, k and v are maps
// [1, 8, 3, 3] (2 heads of 4 channels, each head's channels a block of
// the map's), the result the attention over the 9 cells laid back out as
// a map [1, 8, 3, 3] (v @ attnᵀ viewed as [B, H·D, h, w]). Read as rows,
// it is an attention of 2 heads; a map that is no attention of them is
// not explained.
func TestMapsAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	const heads, d, cells = 2, 4, 9
	c := heads * d
	q, k, v := randVal(rng, 1, c, 3, 3), randVal(rng, 1, c, 3, 3), randVal(rng, 1, c, 3, 3)
	want := make([]float32, c*cells)
	scale := 1 / math.Sqrt(d)
	for h := range heads {
		for i := range cells {
			scores := make([]float64, cells)
			top := math.Inf(-1)
			for j := range cells {
				for e := range d {
					scores[j] += float64(q.data[(h*d+e)*cells+i]) * float64(k.data[(h*d+e)*cells+j])
				}
				scores[j] *= scale
				top = max(top, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - top)
				sum += scores[j]
			}
			for e := range d {
				var y float64
				for j := range cells {
					y += scores[j] / sum * float64(v.data[(h*d+e)*cells+j])
				}
				want[(h*d+e)*cells+i] = float32(y)
			}
		}
	}
	s, sc, target := planted(t, precision.F32, q.shape, want)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	explainedWithin(t, s.attention(target, sc), target)

	noise := randVal(rng, 1, c, 3, 3)
	s, sc, target = planted(t, precision.F32, q.shape, noise.data)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	if got := s.attention(target, sc); got != nil {
		t.Error("a random map read as an attention of the scope's maps")
	}
}
