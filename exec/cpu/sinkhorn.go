package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
)

// Sinkhorn runs the alternating normalisation as exec.Extended says: per
// matrix, p.Steps divisions by the column or row sums plus p.Eps, in f32
// (each sum in index order, each quotient rounded), rounded once to s.Out.
func (bk *Backend) Sinkhorn(x exec.Tensor, p exec.SinkhornParams, s exec.Spec) (exec.Tensor, error) {
	const op = "sinkhorn"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the normalisation rounds once, in precise math", s)
	}
	t, err := bk.get(op, "x", x)
	if err != nil {
		return nil, err
	}
	if err := exec.CheckSinkhorn(t.shape, p); err != nil {
		return nil, err
	}
	r := len(t.shape)
	n, m := t.shape[r-2], t.shape[r-1]
	out := newTensor(t.shape, s.Out)
	copy(out.data, t.data)
	for off := 0; off < len(out.data); off += n * m {
		sinkhornOne(out.data[off:off+n*m], n, m, p)
	}
	roundInto(out.data, out.data, s.Out)
	return out, nil
}

// sinkhornOne normalises one row-major matrix [n, m] in place.
func sinkhornOne(y []float32, n, m int, p exec.SinkhornParams) {
	cols := !p.RowsFirst
	for range p.Steps {
		if cols {
			for j := range m {
				var sum float32
				for i := range n {
					sum += y[i*m+j]
				}
				d := sum + p.Eps
				for i := range n {
					y[i*m+j] /= d
				}
			}
		} else {
			for i := range n {
				var sum float32
				for j := range m {
					sum += y[i*m+j]
				}
				d := sum + p.Eps
				for j := range m {
					y[i*m+j] /= d
				}
			}
		}
		cols = !cols
	}
}

// MatMul runs the batched product as exec.Extended says: each product
// rounded to f32, summed over K in index order in f32, rounded once.
func (bk *Backend) MatMul(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	const op = "matmul"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the product rounds once, in precise math", s)
	}
	ta, err := bk.get(op, "a", a)
	if err != nil {
		return nil, err
	}
	tb, err := bk.get(op, "b", b)
	if err != nil {
		return nil, err
	}
	shape, err := exec.CheckMatMul(ta.shape, tb.shape)
	if err != nil {
		return nil, err
	}
	r := len(shape)
	rows, k, cols := ta.shape[r-2], ta.shape[r-1], tb.shape[r-1]
	out := newTensor(shape, s.Out)
	mats := exec.Numel(shape) / (rows * cols)
	bk.parallel(mats*rows, 1, func(lo, hi int) {
		for job := lo; job < hi; job++ {
			mat, i := job/rows, job%rows
			av := ta.data[(mat*rows+i)*k : (mat*rows+i+1)*k]
			bm := tb.data[mat*k*cols : (mat+1)*k*cols]
			dst := out.data[(mat*rows+i)*cols : (mat*rows+i+1)*cols]
			for j := range cols {
				var sum float32
				for q := range k {
					sum += float32(av[q] * bm[q*cols+j]) // the product rounded: no fused multiply-add
				}
				dst[j] = sum
			}
		}
	})
	roundInto(out.data, out.data, s.Out)
	return out, nil
}
