package cpu

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
)

// SSMScan runs the selective scan as exec.Extended says: the recurrence
// itself, position by position, in f32 (exp in f64 rounded to f32, as a
// correctly rounded f32 exp), the output rounded once to s.Out. Work is
// spread over (batch row, head) pairs; each pair's state is its own.
func (bk *Backend) SSMScan(x, dt, a, bm, cm, d exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	const op = "ssm_scan"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the scan rounds once, in precise math", s)
	}
	var ts [6]*Tensor
	for i, in := range []struct {
		name string
		t    exec.Tensor
	}{{"x", x}, {"dt", dt}, {"A", a}, {"B", bm}, {"C", cm}, {"D", d}} {
		if in.name == "D" && in.t == nil {
			continue
		}
		t, err := bk.get(op, in.name, in.t)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	var dShape []int
	if ts[5] != nil {
		dShape = ts[5].shape
	}
	n, err := exec.CheckSSMScan(ts[0].shape, ts[1].shape, ts[2].shape, ts[3].shape, ts[4].shape, dShape)
	if err != nil {
		return nil, err
	}
	xv, dtv, av, bv, cv := ts[0].data, ts[1].data, ts[2].data, ts[3].data, ts[4].data
	out := newTensor(ts[0].shape, s.Out)
	per := n.H / n.G
	bk.parallel(n.B*n.H, 1, func(lo, hi int) {
		state := make([]float32, n.P*n.N)
		decays := make([]float32, n.N) // exp(dt·A) of each state at this position
		for job := lo; job < hi; job++ {
			b, h := job/n.H, job%n.H
			g := h / per
			clear(state)
			skip := float32(0)
			if ts[5] != nil {
				skip = ts[5].data[h]
			}
			for t := range n.L {
				row := b*n.L + t
				step := dtv[row*n.H+h]
				if n.PerState {
					for k, ak := range av[h*n.N : (h+1)*n.N] {
						decays[k] = float32(math.Exp(float64(step * ak)))
					}
				} else {
					decay := float32(math.Exp(float64(step * av[h])))
					for k := range decays {
						decays[k] = decay
					}
				}
				bt := bv[(row*n.G+g)*n.N : (row*n.G+g+1)*n.N]
				ct := cv[(row*n.G+g)*n.N : (row*n.G+g+1)*n.N]
				xt := xv[(row*n.H+h)*n.P : (row*n.H+h+1)*n.P]
				yt := out.data[(row*n.H+h)*n.P : (row*n.H+h+1)*n.P]
				for p, xp := range xt {
					u := step * xp
					st := state[p*n.N : (p+1)*n.N]
					var y float32
					for k := range st {
						st[k] = float32(decays[k]*st[k]) + float32(u*bt[k]) // no fused multiply-add
						y += float32(ct[k] * st[k])
					}
					yt[p] = y + float32(skip*xp)
				}
			}
		}
	})
	roundInto(out.data, out.data, s.Out)
	return out, nil
}
