package program

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// segmentMaskHost makes the additive attention mask [1, 1, n, n] of
// segments: bounds b_0 = 0 ≤ b_1 ≤ … ≤ b_k = n (integers, the cumulative
// lengths torch's varlen attention takes as cu_seqlens) cut the n rows
// into segments [b_t, b_{t+1}), and a row attends to the keys of its own
// segment alone: 0 there, −∞ elsewhere. Stored f32 (exact in any
// format). A host step: the mask is n² numbers.
func segmentMaskHost(b exec.Backend, bounds exec.Tensor, n int) (exec.Tensor, error) {
	bs, err := b.Download(bounds)
	if err != nil {
		return nil, err
	}
	seg, err := segmentOf(bs, n)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n*n)
	inf := float32(math.Inf(-1))
	for i := range n {
		for j := range n {
			if seg[i] != seg[j] {
				out[i*n+j] = inf
			}
		}
	}
	return b.Upload(out, []int{1, 1, n, n}, precision.F32)
}

// segmentOf is each of n rows' segment under bounds (see segmentMaskHost);
// an error where the bounds are not integers from 0 rising to n.
func segmentOf(bounds []float32, n int) ([]int, error) {
	k := len(bounds)
	if k < 2 || bounds[0] != 0 || bounds[k-1] != float32(n) {
		return nil, fmt.Errorf("segment mask: bounds %v do not run from 0 to the %d rows", bounds, n)
	}
	seg := make([]int, n)
	for t := 1; t < k; t++ {
		lo, hi := bounds[t-1], bounds[t]
		if hi < lo || hi != float32(math.Trunc(float64(hi))) {
			return nil, fmt.Errorf("segment mask: bound %d (%g) is not an integer at or above the one before (%g)", t, hi, lo)
		}
		for i := int(lo); i < int(hi); i++ {
			seg[i] = t - 1
		}
	}
	return seg, nil
}
