package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
)

// Linear is y = x·Wᵀ + b: f32 accumulation in k order (gemm), the bias
// added in f32 (or after rounding the product, with RoundBeforeBias), the
// result rounded once to s.Out.
func (bk *Backend) Linear(x, w, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("linear: %w", err)
	}
	xt, err := bk.get("linear", "x", x)
	if err != nil {
		return nil, err
	}
	wt, err := bk.get("linear", "weight", w)
	if err != nil {
		return nil, err
	}
	bt, err := bk.opt("linear", "bias", b)
	if err != nil {
		return nil, err
	}
	if len(wt.shape) != 2 || len(xt.shape) == 0 || xt.shape[len(xt.shape)-1] != wt.shape[1] {
		return nil, fmt.Errorf("exec: linear: x %v and weight %v do not match ([..., in] and [out, in])", xt.shape, wt.shape)
	}
	nOut, nIn := wt.shape[0], wt.shape[1]
	if bt != nil && (len(bt.shape) != 1 || bt.shape[0] != nOut) {
		return nil, fmt.Errorf("exec: linear: bias %v for %d outputs", bt.shape, nOut)
	}
	shape := append(append([]int(nil), xt.shape[:len(xt.shape)-1]...), nOut)
	out := newTensor(shape, s.Out)
	m := exec.Numel(shape) / max(nOut, 1)
	if nOut == 0 {
		return out, nil
	}
	if exec.TensorCoreSums(s, xt.format, wt.format) {
		bk.gemmMMA(out.data, xt.data, wt.data, m, nOut, nIn)
	} else {
		bk.gemm(out.data, xt.data, wt.data, m, nOut, nIn)
	}
	early := s.Has(exec.RoundBeforeBias)
	bk.parallel(m, max(1, 4096/nOut), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := out.data[i*nOut : (i+1)*nOut]
			if bt != nil {
				if early {
					roundInto(row, row, s.Out)
				}
				for j, v := range bt.data {
					row[j] += v
				}
			}
			roundInto(row, row, s.Out)
		}
	})
	return out, nil
}

// gemmMMA is gemm with each output accumulated as a tensor core does
// (exec.DotMMA), one dot product at a time.
func (bk *Backend) gemmMMA(c, a, b []float32, m, n, k int) {
	bk.parallel(m*n, max(1, 4096/max(k, 1)), func(lo, hi int) {
		for idx := lo; idx < hi; idx++ {
			i, j := idx/n, idx%n
			c[idx] = exec.DotMMA(a[i*k:(i+1)*k], b[j*k:(j+1)*k])
		}
	})
}
