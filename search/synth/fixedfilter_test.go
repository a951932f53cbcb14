package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// reflect101 is index i of a sequence of n cells reflected about its
// edge cells (torch's reflect padding).
func reflect101(i, n int) int {
	for i < 0 || i >= n {
		if i < 0 {
			i = -i
		}
		if i >= n {
			i = 2*(n-1) - i
		}
	}
	return i
}

// TestFixedFilters: a [1, 3, 3, 1]/8 kernel held as a buffer, applied
// channel by channel after reflect padding, strided down (Downsample1d)
// or as a transposed convolution up (Upsample1d), is read off the values
// with its taps as eighths.
func TestFixedFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 7))
	kern := []float64{1.0 / 8, 3.0 / 8, 3.0 / 8, 1.0 / 8}
	const C = 2
	t.Run("down", func(t *testing.T) {
		x := randVal(rng, 1, C, 16)
		want := make([]float32, C*8)
		for c := range C {
			for i := range 8 {
				var sum float64
				for j, k := range kern {
					sum += k * float64(x.data[c*16+reflect101(2*i+j-1, 16)])
				}
				want[c*8+i] = float32(sum)
			}
		}
		s, _, target := planted(t, precision.F32, []int{1, C, 8}, want, x)
		explainedWithin(t, s.fixedFilter1D(x, target), target)
	})
	t.Run("up", func(t *testing.T) {
		x := randVal(rng, 1, C, 8)
		const P = 3 // (10 − 1)·2 + 4 − 2·3 = 16
		want := make([]float32, C*16)
		for c := range C {
			for o := range 16 {
				var sum float64
				for j, k := range kern {
					if m := o + P - j; m >= 0 && m%2 == 0 && m/2 < 10 {
						sum += k * float64(x.data[c*8+reflect101(m/2-1, 8)])
					}
				}
				want[c*16+o] = float32(sum)
			}
		}
		s, _, target := planted(t, precision.F32, []int{1, C, 16}, want, x)
		explainedWithin(t, s.fixedUpFilter1D(x, target), target)
	})
}

// TestPaddedMove: F.pad(x.permute(0, 2, 1), (2, 0), mode="replicate") of
// x [1, 5, 3] whose rows repeat (a gather of whole rows cannot tell them
// apart) is read as the move, then the padding.
func TestPaddedMove(t *testing.T) {
	x := &val{shape: []int{1, 5, 3}, format: precision.F32, origin: "x",
		data: []float32{0.5, -1.5, 2.25, 0.5, -1.5, 2.25, 0.75, 1.5, -0.25, 0.5, -1.5, 2.25, 3, 0.125, -2}}
	want := make([]float32, 0, 3*7)
	for c := range 3 {
		for i := -2; i < 5; i++ {
			want = append(want, x.data[max(i, 0)*3+c])
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, 3, 7}, want, x)
	got := s.paddedMove(target, []*val{x})
	explainedWithin(t, got, target)
	if s.gatheredEntries(target, []*val{x}) != nil {
		t.Error("rows that repeat were read as a gather of whole rows: the test shows nothing")
	}
}
