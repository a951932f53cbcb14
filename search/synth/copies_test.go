package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestCopied: a sum of two clips of the scope, its first frame copied
// twice in front (Cosmos's causal convolution input, torch.cat of the
// first frame and the clip), or its cells repeated twice along the width
// (a nearest upsampling), is read as the sum copied; a clip with no
// copies in it is not.
func TestCopied(t *testing.T) {
	const c, T, h, w = 2, 3, 2, 3
	rng := rand.New(rand.NewPCG(4, 9))
	a, b := randVal(rng, 1, c, T, h, w), randVal(rng, 1, c, T, h, w)
	sum := func(i int) float32 { return a.data[i] + b.data[i] }
	for _, tc := range []struct {
		name  string
		shape []int
		from  func(ch, f, y, z int) int // the sum's flat index each entry copies
	}{
		{"first frame twice in front", []int{1, c, T + 2, h, w}, func(ch, f, y, z int) int { return ((ch*T+max(f-2, 0))*h+y)*w + z }},
		{"each column twice", []int{1, c, T, h, 2 * w}, func(ch, f, y, z int) int { return ((ch*T+f)*h+y)*w + z/2 }},
	} {
		n := c * tc.shape[2] * tc.shape[3] * tc.shape[4]
		data := make([]float32, 0, n)
		for ch := range c {
			for f := range tc.shape[2] {
				for y := range tc.shape[3] {
					for z := range tc.shape[4] {
						data = append(data, sum(tc.from(ch, f, y, z)))
					}
				}
			}
		}
		s, sc, target := planted(t, precision.F32, tc.shape, data, a, b)
		explainedWithin(t, s.copied(target, sc), target)
	}
	s, sc, target := planted(t, precision.F32, a.shape, randVal(rng, 1, c, T, h, w).data, a, b)
	if got := s.copied(target, sc); got != nil {
		t.Error("a clip with no copies in it read as copied")
	}
}

// TestCopiedBatch: rows joined from two values of a batch of one, then
// the batch copied once per frame (I2VGen-XL's cross-attention context),
// is read as the join copied; five frames, past the maps' bound of four.
func TestCopiedBatch(t *testing.T) {
	const frames, c = 5, 4
	rng := rand.New(rand.NewPCG(4, 10))
	a, b := randVal(rng, 1, 2, c), randVal(rng, 1, 3, c)
	one := append(slices.Clone(a.data), b.data...)
	s, sc, target := planted(t, precision.F32, []int{frames, 5, c}, slices.Repeat(one, frames), a, b)
	explainedWithin(t, s.copied(target, sc), target)
}
