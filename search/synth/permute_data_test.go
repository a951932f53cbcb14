package synth

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPermuteData: permuteData moves every element where torch.permute
// puts it (an index-by-index reference), for ranks 0 to 5, axes of length
// 1, and every permutation of the smaller ranks.
func TestPermuteData(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for rank := 0; rank <= 5; rank++ {
		for trial := range 6 {
			shape := make([]int, rank)
			n := 1
			for i := range shape {
				shape[i] = 1 + r.IntN(4)
				if trial == 0 {
					shape[i] = 1
				}
				n *= shape[i]
			}
			v := &val{shape: shape, data: make([]float32, n)}
			for i := range v.data {
				v.data[i] = float32(i)
			}
			for _, perm := range permutations(rank) {
				if got, want := permuteData(v, perm), permuteNaive(v, perm); !slices.Equal(got, want) {
					t.Fatalf("shape %v perm %v: %v, want %v", shape, perm, got, want)
				}
			}
		}
	}
}

// permuteNaive is permuteData written index by index.
func permuteNaive(v *val, perm []int) []float32 {
	n := len(v.shape)
	out := make([]float32, len(v.data))
	outShape := make([]int, n)
	for i, a := range perm {
		outShape[i] = v.shape[a]
	}
	in := make([]int, n)
	for k := range out {
		rest := k
		for i := n - 1; i >= 0; i-- {
			in[perm[i]] = rest % outShape[i]
			rest /= outShape[i]
		}
		off := 0
		for i := range n {
			off = off*v.shape[i] + in[i]
		}
		out[k] = v.data[off]
	}
	return out
}
