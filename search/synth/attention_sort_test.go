package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortByScore: the order sortByScore gives is slices.SortStableFunc's
// on the choices themselves, ties (and NaN scores, which compare equal to
// everything) included.
func TestSortByScore(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 19, 20, 21, 100, 1000} {
		choices := make([]attnChoice, n)
		for i := range choices {
			choices[i].headDim = i // identifies the choice
			switch r.IntN(5) {
			case 0:
				choices[i].score = math.NaN()
			case 1:
				choices[i].score = 0.5 // a tie
			default:
				choices[i].score = r.Float64()
			}
		}
		want := slices.Clone(choices)
		slices.SortStableFunc(want, func(a, b attnChoice) int { return cmpFloat(a.score, b.score) })
		got := slices.Clone(choices)
		sortByScore(got)
		for i := range want {
			if got[i].headDim != want[i].headDim {
				t.Fatalf("n=%d: position %d holds choice %d, want %d", n, i, got[i].headDim, want[i].headDim)
			}
		}
	}
}
