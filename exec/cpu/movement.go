package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Reshape returns a tensor sharing x's storage under a new shape.
func (b *Backend) Reshape(x exec.Tensor, shape []int) (exec.Tensor, error) {
	xt, err := b.get("reshape", "x", x)
	if err != nil {
		return nil, err
	}
	out, err := exec.ResolveShape(xt.shape, shape)
	if err != nil {
		return nil, err
	}
	return &Tensor{shape: out, format: xt.format, data: xt.data}, nil
}

// Permute reorders axes: output axis i is input axis perm[i].
func (b *Backend) Permute(x exec.Tensor, perm []int) (exec.Tensor, error) {
	xt, err := b.get("permute", "x", x)
	if err != nil {
		return nil, err
	}
	outShape, p, err := exec.PermuteShape(xt.shape, perm)
	if err != nil {
		return nil, err
	}
	r := len(outShape)
	out := newTensor(outShape, xt.format)
	if len(out.data) == 0 {
		return out, nil
	}
	in := exec.Strides(xt.shape)
	src := make([]int, r) // input stride of each output axis
	for i, a := range p {
		src[i] = in[a]
	}
	if r == 0 {
		copy(out.data, xt.data)
		return out, nil
	}
	inner := outShape[r-1]
	rows := len(out.data) / max(inner, 1)
	b.parallel(rows, 256, func(lo, hi int) {
		idx := make([]int, r-1)
		for row := lo; row < hi; row++ {
			rem, off := row, 0
			for i := r - 2; i >= 0; i-- {
				idx[i] = rem % outShape[i]
				rem /= outShape[i]
				off += idx[i] * src[i]
			}
			dst := out.data[row*inner : (row+1)*inner]
			st := src[r-1]
			for j := range dst {
				dst[j] = xt.data[off+j*st]
			}
		}
	})
	return out, nil
}

// Slice copies x[..., start:end, ...] along axis.
func (b *Backend) Slice(x exec.Tensor, axis, start, end int) (exec.Tensor, error) {
	xt, err := b.get("slice", "x", x)
	if err != nil {
		return nil, err
	}
	ax, err := exec.Axis(axis, len(xt.shape))
	if err != nil {
		return nil, fmt.Errorf("slice: %w", err)
	}
	dim := xt.shape[ax]
	if start < 0 || end < start || end > dim {
		return nil, fmt.Errorf("exec: slice %v axis %d [%d:%d]: out of range", xt.shape, ax, start, end)
	}
	shape := append([]int(nil), xt.shape...)
	shape[ax] = end - start
	out := newTensor(shape, xt.format)
	outer := exec.Numel(xt.shape[:ax])
	inner := exec.Numel(xt.shape[ax+1:])
	w := (end - start) * inner
	for o := range outer {
		copy(out.data[o*w:(o+1)*w], xt.data[(o*dim+start)*inner:(o*dim+end)*inner])
	}
	return out, nil
}

// Concat joins xs along axis; they must agree on format and other axes.
func (b *Backend) Concat(xs []exec.Tensor, axis int) (exec.Tensor, error) {
	if len(xs) == 0 {
		return nil, fmt.Errorf("exec: concat: no tensors")
	}
	ts := make([]*Tensor, len(xs))
	for i, x := range xs {
		t, err := b.get("concat", fmt.Sprintf("input %d", i), x)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	shapes, formats := make([][]int, len(ts)), make([]precision.Format, len(ts))
	for i, t := range ts {
		shapes[i], formats[i] = t.shape, t.format
	}
	shape, ax, err := exec.ConcatShape(shapes, formats, axis)
	if err != nil {
		return nil, err
	}
	first := ts[0]
	out := newTensor(shape, first.format)
	outer := exec.Numel(shape[:ax])
	inner := exec.Numel(shape[ax+1:])
	pos := 0
	for o := range outer {
		for _, t := range ts {
			w := t.shape[ax] * inner
			copy(out.data[pos:pos+w], t.data[o*w:(o+1)*w])
			pos += w
		}
	}
	return out, nil
}
