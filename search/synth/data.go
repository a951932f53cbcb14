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
	out := make([]float32, len(v.data))
	if n == 0 || len(out) == 0 {
		copy(out, v.data)
		return out
	}
	strides := make([]int, n)
	st := 1
	for i := n - 1; i >= 0; i-- {
		strides[i] = st
		st *= v.shape[i]
	}
	// the output's axes, each with the input stride it steps by
	outShape, step := make([]int, n), make([]int, n)
	for i, a := range perm {
		outShape[i], step[i] = v.shape[a], strides[a]
	}
	// the last output axis copied in a strided run; the others counted
	// like an odometer, the input offset kept as they turn
	idx := make([]int, n)
	last, lastStep := outShape[n-1], step[n-1]
	off := 0
	for k := 0; k < len(out); k += last {
		o := off
		for j := range last {
			out[k+j] = v.data[o]
			o += lastStep
		}
		for i := n - 2; i >= 0; i-- {
			idx[i]++
			off += step[i]
			if idx[i] < outShape[i] {
				break
			}
			off -= idx[i] * step[i]
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
