package synth

import (
	"slices"

	"github.com/zflow/zflow/exec"
)

func isIdentity(p []int) bool {
	for i, x := range p {
		if i != x {
			return false
		}
	}
	return true
}

// permutations of 0..n-1 (n ≤ 5), identity first.
func permutations(n int) [][]int {
	var out [][]int
	var rec func(p []int, used []bool)
	rec = func(p []int, used []bool) {
		if len(p) == n {
			out = append(out, slices.Clone(p))
			return
		}
		for i := range n {
			if !used[i] {
				used[i] = true
				rec(append(p, i), used)
				used[i] = false
			}
		}
	}
	rec(nil, make([]bool, n))
	return out
}

// permuteData is v's data permuted (torch.permute), row-major.
func permuteData(v *val, perm []int) []float32 {
	n := len(v.shape)
	strides := make([]int, n)
	st := 1
	for i := n - 1; i >= 0; i-- {
		strides[i] = st
		st *= v.shape[i]
	}
	outShape := make([]int, n)
	for i, a := range perm {
		outShape[i] = v.shape[a]
	}
	out := make([]float32, len(v.data))
	idx := make([]int, n)
	for k := range out {
		off := 0
		for i := range n {
			off += idx[i] * strides[perm[i]]
		}
		out[k] = v.data[off]
		for i := n - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < outShape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}

// sliceData is v[..., start:end, ...] along ax.
func sliceData(v *val, ax, start, end int) []float32 {
	outer, inner := exec.Numel(v.shape[:ax]), exec.Numel(v.shape[ax+1:])
	dim := v.shape[ax]
	out := make([]float32, 0, outer*(end-start)*inner)
	for o := range outer {
		out = append(out, v.data[(o*dim+start)*inner:(o*dim+end)*inner]...)
	}
	return out
}

// permuteShape is shape with its axes in perm's order (torch.permute's).
func permuteShape(shape, perm []int) []int {
	out := make([]int, len(perm))
	for i, a := range perm {
		out[i] = shape[a]
	}
	return out
}

// inversePerm is the permutation that undoes perm.
func inversePerm(perm []int) []int {
	inv := make([]int, len(perm))
	for i, p := range perm {
		inv[p] = i
	}
	return inv
}
