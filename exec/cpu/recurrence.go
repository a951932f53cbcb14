package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
)

// Recurrence runs a recurrent layer's scan as exec.Extended says: per
// batch row, the state's projection whh·h + bh (each product rounded to
// f32, summed over H in order, no fused multiply-add) added to the
// input's projection, then the cell's update, position by position in
// f32; each position's h rounded to s.Out as it is stored, the state kept
// in f32. Work is spread over batch rows; each row's state is its own.
func (bk *Backend) Recurrence(xg, whh, bh exec.Tensor, p exec.RecurrenceParams, s exec.Spec) (exec.Tensor, error) {
	const op = "recurrence"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the scan rounds once, in precise math", s)
	}
	x, err := bk.get(op, "xg", xg)
	if err != nil {
		return nil, err
	}
	w, err := bk.get(op, "whh", whh)
	if err != nil {
		return nil, err
	}
	var bias []float32
	var bShape []int
	if bh != nil {
		b, err := bk.get(op, "bias", bh)
		if err != nil {
			return nil, err
		}
		bias, bShape = b.data, b.shape
	}
	n, err := exec.CheckRecurrence(x.shape, w.shape, bShape, p)
	if err != nil {
		return nil, err
	}
	out := newTensor([]int{n.B, n.L, n.H}, s.Out)
	gh := n.G * n.H
	bk.parallel(n.B, 1, func(lo, hi int) {
		h := make([]float32, n.H)
		c := make([]float32, n.H)
		a := make([]float32, gh) // whh·h + bh
		for b := lo; b < hi; b++ {
			clear(h)
			clear(c)
			for i := range n.L {
				t := i
				if p.Reverse {
					t = n.L - 1 - i
				}
				for j := range gh {
					row := w.data[j*n.H : (j+1)*n.H]
					var sum float32
					for k, wk := range row {
						sum += float32(wk * h[k])
					}
					if bias != nil {
						sum += bias[j]
					}
					a[j] = sum
				}
				xt := x.data[(b*n.L+t)*gh : (b*n.L+t+1)*gh]
				step(p.Cell, n.H, xt, a, h, c)
				y := out.data[(b*n.L+t)*n.H : (b*n.L+t+1)*n.H]
				copy(y, h)
			}
		}
	})
	roundInto(out.data, out.data, s.Out)
	return out, nil
}

// step is one position's cell update of h (and c) from the input's
// projection xt and the state's a, in f32.
func step(cell exec.Cell, H int, xt, a, h, c []float32) {
	sig := func(v float32) float32 { return exec.Activate(exec.ActSigmoid, v, 0) }
	tanh := func(v float32) float32 { return exec.Activate(exec.ActTanh, v, 0) }
	switch cell {
	case exec.CellLSTM:
		for j := range H {
			ig := sig(xt[j] + a[j])
			fg := sig(xt[H+j] + a[H+j])
			gg := tanh(xt[2*H+j] + a[2*H+j])
			og := sig(xt[3*H+j] + a[3*H+j])
			c[j] = float32(fg*c[j]) + float32(ig*gg)
			h[j] = float32(og * tanh(c[j]))
		}
	case exec.CellGRU:
		for j := range H {
			r := sig(xt[j] + a[j])
			z := sig(xt[H+j] + a[H+j])
			nv := tanh(xt[2*H+j] + float32(r*a[2*H+j]))
			h[j] = float32((h[j]-nv)*z) + nv
		}
	case exec.CellTanh:
		for j := range H {
			h[j] = tanh(xt[j] + a[j])
		}
	case exec.CellReLU:
		for j := range H {
			h[j] = exec.Activate(exec.ActReLU, xt[j]+a[j], 0)
		}
	}
}
