package program

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
)

// PoolShape is the output shape of a k×k pool of x [B, C, H, W] under p
// (torch's pooling arithmetic: floor, or with Ceil the last partial window
// kept where it starts inside the image or its leading padding), or an
// error naming what does not fit.
func PoolShape(x []int, p ConvParams) ([]int, error) {
	k, st := p.Kernel, max(p.Stride, 1)
	if len(x) != 4 {
		return nil, fmt.Errorf("max_pool2d of %v: want x [B, C, H, W]", x)
	}
	if k < 1 || p.Pad < 0 || p.Stride < 0 || 2*p.Pad > k {
		return nil, fmt.Errorf("max_pool2d of %v: window %d, padding %d, stride %d (want a window of at least 1, padding at most half of it)", x, k, p.Pad, p.Stride)
	}
	side := func(n int) int {
		span := n + 2*p.Pad - k
		if span < 0 {
			return 0
		}
		if !p.Ceil {
			return span/st + 1
		}
		o := (span+st-1)/st + 1
		if (o-1)*st >= n+p.Pad {
			o--
		}
		return o
	}
	h, w := side(x[2]), side(x[3])
	if h < 1 || w < 1 {
		return nil, fmt.Errorf("max_pool2d of %v: window %d with padding %d leaves no output", x, k, p.Pad)
	}
	return []int{x[0], x[1], h, w}, nil
}

// maxPoolRun is torch's max_pool2d composed of backend ops: x padded with
// −∞, each window cell a strided tap of it (as a convolution's), the taps
// joined by pairwise maximum. Every result is one of x's own values, so
// nothing rounds: the maximum is taken in x's format.
func maxPoolRun(b exec.Backend, x exec.Tensor, p ConvParams) (exec.Tensor, error) {
	out, err := PoolShape(x.Shape(), p)
	if err != nil {
		return nil, err
	}
	sc := &scratch{b: b}
	defer sc.free()
	tap, err := taps(b, x, p, out[2], out[3], p.Kernel, p.Kernel, float32(math.Inf(-1)), sc.keep)
	if err != nil {
		return nil, err
	}
	var cells []exec.Tensor
	for i := range p.Kernel {
		for j := range p.Kernel {
			t, err := tap(i, j)
			if err != nil {
				return nil, err
			}
			cells = append(cells, t)
		}
	}
	// the last maximum is not kept: it is the result the caller owns (a
	// window of one cell is copied by its maximum with itself)
	acc, f := cells[0], exec.Out(x.Format())
	for _, t := range cells[1:max(len(cells)-1, 1)] {
		if acc, err = sc.keep(b.Maximum(acc, t, f)); err != nil {
			return nil, err
		}
	}
	return b.Maximum(acc, cells[len(cells)-1], f)
}
