package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestChannelsFirstPlainNorm: nn.GroupNorm(2, 4, affine=False) and an
// InstanceNorm (4 groups of one channel) over [B, C, H, W], computed here
// in float64, are read as group norms of that many groups without γ.
func TestChannelsFirstPlainNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 5))
	x := randVal(rng, 2, 4, 3, 3)
	for _, groups := range []int{2, 4} {
		per := 4 / groups * 9
		want := make([]float32, len(x.data))
		for g := 0; g < len(x.data)/per; g++ {
			chunk := x.data[g*per : (g+1)*per]
			var mu, v float64
			for _, e := range chunk {
				mu += float64(e)
			}
			mu /= float64(per)
			for _, e := range chunk {
				v += (float64(e) - mu) * (float64(e) - mu)
			}
			v /= float64(per)
			for i, e := range chunk {
				want[g*per+i] = float32((float64(e) - mu) / math.Sqrt(v+1e-5))
			}
		}
		s, _, target := planted(t, precision.F32, x.shape, want, x)
		got := s.channelsFirstNorm(x, nil, target)
		explainedWithin(t, got, target)
		if got != nil && got.from.label != "" && !strings.Contains(got.from.label, map[int]string{2: "of 2 groups", 4: "of 4 groups"}[groups]) {
			t.Errorf("read as %q, want %d groups", got.from.label, groups)
		}
	}
}
