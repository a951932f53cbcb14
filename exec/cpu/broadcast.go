package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
)

// bcast iterates over the rows (last axis) of a broadcast result: for each
// output row it hands a kernel each input's row, materialised when the
// input is broadcast along the last axis.
type bcast struct {
	shape []int   // output shape
	inner int     // last-axis length (1 for a scalar)
	rows  int     // number of output rows
	st    [][]int // per input, its stride for each output axis (0: broadcast)
}

// newBcast broadcasts the input shapes against each other; out, if not
// nil, must be the result (inputs may not broadcast x itself).
func newBcast(op string, out []int, ins ...[]int) (*bcast, error) {
	shape := out
	if shape == nil {
		shape = ins[0]
		for _, s := range ins[1:] {
			var err error
			if shape, err = exec.Broadcast(shape, s); err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
		}
	}
	bc := &bcast{shape: append([]int(nil), shape...), inner: 1, st: make([][]int, len(ins))}
	r := len(shape)
	if r > 0 {
		bc.inner = shape[r-1]
	}
	n := exec.Numel(shape)
	if bc.inner > 0 {
		bc.rows = n / bc.inner
	}
	for k, s := range ins {
		if len(s) > r {
			return nil, fmt.Errorf("exec: %s: input %v has more axes than the result %v", op, s, shape)
		}
		full := exec.Strides(s)
		st := make([]int, r)
		for i := range r {
			j := len(s) - r + i
			switch {
			case j < 0 || s[j] == 1 && shape[i] != 1:
				st[i] = 0
			case s[j] == shape[i]:
				st[i] = full[j]
			default:
				return nil, fmt.Errorf("exec: %s: input %v does not broadcast to %v", op, s, shape)
			}
		}
		bc.st[k] = st
	}
	return bc, nil
}

// run calls fn(row, dst, srcs) for every output row in parallel; dst is
// the row of out and srcs[k] the row of input k (length inner each).
func (bc *bcast) run(b *Backend, out []float32, ins [][]float32, fn func(dst []float32, srcs [][]float32)) {
	r := len(bc.shape)
	inner := bc.inner
	b.parallel(bc.rows, max(1, 4096/max(inner, 1)), func(lo, hi int) {
		srcs := make([][]float32, len(ins))
		bufs := make([][]float32, len(ins))
		idx := make([]int, r)
		for row := lo; row < hi; row++ {
			rem := row
			for i := r - 2; i >= 0; i-- {
				idx[i] = rem % bc.shape[i]
				rem /= bc.shape[i]
			}
			for k, in := range ins {
				st := bc.st[k]
				off := 0
				for i := 0; i < r-1; i++ {
					off += idx[i] * st[i]
				}
				if r == 0 || st[r-1] != 0 || inner == 1 {
					srcs[k] = in[off : off+inner]
					continue
				}
				if bufs[k] == nil {
					bufs[k] = make([]float32, inner)
				}
				v := in[off]
				for j := range bufs[k] {
					bufs[k][j] = v
				}
				srcs[k] = bufs[k]
			}
			fn(out[row*inner:(row+1)*inner], srcs)
		}
	})
}
