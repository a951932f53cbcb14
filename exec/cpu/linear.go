package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
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
	if s.Has(exec.RoundAccum) && s.Out != precision.F32 {
		bk.gemmStored(out.data, xt.data, wt.data, bt, m, nOut, nIn, s.Out)
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

// gemmStored is a linear whose sums are stored in format f one product at
// a time (exec.RoundAccum): each output starts at its bias (0 without
// one), and for each k in order the product is rounded to f, then the
// sum with it (PyTorch 1.13's CPU convolutions on bf16: their unfolded
// columns times the filters, bit for bit).
func (bk *Backend) gemmStored(c, a, b []float32, bias *Tensor, m, n, k int, f precision.Format) {
	start := func(j int) float32 {
		if bias == nil {
			return 0
		}
		return f.Round(bias.data[j])
	}
	bk.parallel(m, max(1, 4096/max(k*n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x, row := a[i*k:(i+1)*k], c[i*n:(i+1)*n]
			j := 0
			if f == precision.BF16 {
				// four outputs at a time: each sum is a chain of
				// dependent roundings, so four chains keep the core busy
				for ; j+4 <= n; j += 4 {
					row[j], row[j+1], row[j+2], row[j+3] = storedSumsBF16(start(j), start(j+1), start(j+2), start(j+3),
						x, b[j*k:(j+1)*k], b[(j+1)*k:(j+2)*k], b[(j+2)*k:(j+3)*k], b[(j+3)*k:(j+4)*k])
				}
			}
			for ; j < n; j++ {
				acc, w := start(j), b[j*k:(j+1)*k]
				for t, xv := range x {
					acc = f.Round(acc + f.Round(xv*w[t]))
				}
				row[j] = acc
			}
		}
	})
}

// storedSumsBF16 is four sums a_q + Σ x·w_q with every product and partial
// sum rounded to bfloat16, interleaved.
func storedSumsBF16(a0, a1, a2, a3 float32, x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for t, xv := range x {
		a0 = roundBF16(a0 + roundBF16(xv*w0[t]))
		a1 = roundBF16(a1 + roundBF16(xv*w1[t]))
		a2 = roundBF16(a2 + roundBF16(xv*w2[t]))
		a3 = roundBF16(a3 + roundBF16(xv*w3[t]))
	}
	return a0, a1, a2, a3
}

// roundBF16 is precision.RoundBF16 for the stored sums' inner loop.
func roundBF16(x float32) float32 {
	return precision.BF16ToF32(precision.BF16Bits(x))
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
