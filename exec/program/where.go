package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
)

// whereHost is torch.where(cond > 0, a, b): per element of the three
// broadcast together, a's value where cond is above zero, b's elsewhere
// (NaN in cond picks b, as NaN > 0 is false), rounded to s.Out. A host
// step: a piecewise activation's two sides are computed by the backend's
// pointwise ops, only the choice is made here.
func whereHost(b exec.Backend, cond, x, y exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	shape, err := whereShape(cond.Shape(), x.Shape(), y.Shape())
	if err != nil {
		return nil, err
	}
	var vals [3][]float32
	for i, t := range []exec.Tensor{cond, x, y} {
		if vals[i], err = b.Download(t); err != nil {
			return nil, err
		}
	}
	idx := [3]func(int) int{broadcastIndex(cond.Shape(), shape), broadcastIndex(x.Shape(), shape), broadcastIndex(y.Shape(), shape)}
	out := make([]float32, exec.Numel(shape))
	for i := range out {
		v := vals[2][idx[2](i)]
		if vals[0][idx[0](i)] > 0 {
			v = vals[1][idx[1](i)]
		}
		out[i] = s.Out.Round(v)
	}
	return b.Upload(out, shape, s.Out)
}

// whereShape is the shape cond, a and b broadcast to.
func whereShape(c, a, b []int) ([]int, error) {
	s, err := exec.Broadcast(c, a)
	if err == nil {
		s, err = exec.Broadcast(s, b)
	}
	if err != nil {
		return nil, fmt.Errorf("where: %v, %v and %v do not broadcast: %w", c, a, b, err)
	}
	return s, nil
}

// broadcastIndex maps a flat index of out to the flat index of the element
// of a tensor of shape in (broadcast to out, NumPy rules) that it reads.
func broadcastIndex(in, out []int) func(int) int {
	n := len(out)
	strides := make([]int, n) // in's stride for each of out's axes (0: broadcast)
	st := 1
	for i := len(in) - 1; i >= 0; i-- {
		j := n - len(in) + i
		if in[i] != 1 {
			strides[j] = st
		}
		st *= in[i]
	}
	return func(k int) int {
		at := 0
		for i := n - 1; i >= 0; i-- {
			at += (k % out[i]) * strides[i]
			k /= out[i]
		}
		return at
	}
}
