package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
)

// Rope rotates the first RotaryDim elements of each head of x [B, S, H·D]:
// y = x·cos + rot(x)·sin in f32, the two products rounded to s.Out first
// under RoundProduct, the sum rounded once.
func (bk *Backend) Rope(x, cos, sin exec.Tensor, p exec.RopeParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("rope: %w", err)
	}
	if p.Layout != exec.RopeInterleaved && p.Layout != exec.RopeHalf {
		return nil, exec.Unsupported(bk.Name(), "rope", "layout %v", p.Layout)
	}
	xt, err := bk.get("rope", "x", x)
	if err != nil {
		return nil, err
	}
	ct, err := bk.get("rope", "cos", cos)
	if err != nil {
		return nil, err
	}
	st, err := bk.get("rope", "sin", sin)
	if err != nil {
		return nil, err
	}
	if len(xt.shape) != 3 || p.Heads <= 0 || xt.shape[2]%p.Heads != 0 {
		return nil, fmt.Errorf("exec: rope: x %v is not [B, S, H·D] for %d heads", xt.shape, p.Heads)
	}
	bsz, seq := xt.shape[0], xt.shape[1]
	d := xt.shape[2] / p.Heads
	r := p.RotaryDim
	if r == 0 {
		r = d
	}
	if r < 0 || r > d || r%2 != 0 {
		return nil, fmt.Errorf("exec: rope: rotary dim %d for heads of %d", p.RotaryDim, d)
	}
	perBatch, err := tableShape(ct.shape, st.shape, bsz, seq, r)
	if err != nil {
		return nil, err
	}
	f, rp := s.Out, s.Has(exec.RoundProduct)
	out := newTensor(xt.shape, f)
	copy(out.data, xt.data)
	width := xt.shape[2]
	bk.parallel(bsz*seq, 64, func(lo, hi int) {
		rot := make([]float32, r)
		for row := lo; row < hi; row++ {
			toff := (row % seq) * r
			if perBatch {
				toff = row * r
			}
			cs, sn := ct.data[toff:toff+r], st.data[toff:toff+r]
			for h := range p.Heads {
				src := xt.data[row*width+h*d : row*width+h*d+r]
				dst := out.data[row*width+h*d : row*width+h*d+d]
				if p.Layout == exec.RopeInterleaved {
					for i := 0; i < r; i += 2 {
						rot[i], rot[i+1] = -src[i+1], src[i]
					}
				} else {
					half := r / 2
					for i := range half {
						rot[i], rot[half+i] = -src[half+i], src[i]
					}
				}
				for i, v := range src {
					dst[i] = at(rp, f, float32(v*cs[i])) + at(rp, f, float32(rot[i]*sn[i]))
				}
				roundInto(dst, dst, f)
			}
		}
	})
	return out, nil
}

// tableShape checks cos and sin: [S, R] (shared by the batch) or [B, S, R].
func tableShape(c, s []int, bsz, seq, r int) (perBatch bool, err error) {
	if len(c) != len(s) {
		return false, fmt.Errorf("exec: rope: cos %v and sin %v differ", c, s)
	}
	for i := range c {
		if c[i] != s[i] {
			return false, fmt.Errorf("exec: rope: cos %v and sin %v differ", c, s)
		}
	}
	switch {
	case len(c) == 2 && c[0] == seq && c[1] == r:
		return false, nil
	case len(c) == 3 && c[0] == bsz && c[1] == seq && c[2] == r:
		return true, nil
	case len(c) == 3 && c[0] == 1 && c[1] == seq && c[2] == r:
		return false, nil
	}
	return false, fmt.Errorf("exec: rope: tables %v are not [%d, %d] or [%d, %d, %d]", c, seq, r, bsz, seq, r)
}
