package cpu

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
)

// DeltaScan runs the gated delta-rule scan as exec.Extended says: the
// recurrence itself, position by position, in f32 (exp in f64 rounded to
// f32, as a correctly rounded f32 exp; no fused multiply-add), the output
// rounded once to s.Out. Work is spread over (batch row, head) pairs; each
// pair's state is its own.
func (bk *Backend) DeltaScan(q, k, v, g, beta exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	const op = "delta_scan"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the scan rounds once, in precise math", s)
	}
	var ts [5]*Tensor
	for i, in := range []struct {
		name string
		t    exec.Tensor
	}{{"q", q}, {"k", k}, {"v", v}, {"g", g}, {"beta", beta}} {
		t, err := bk.get(op, in.name, in.t)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	n, err := exec.CheckDeltaScan(ts[0].shape, ts[1].shape, ts[2].shape, ts[3].shape, ts[4].shape)
	if err != nil {
		return nil, err
	}
	qv, kv, vv, gv, bv := ts[0].data, ts[1].data, ts[2].data, ts[3].data, ts[4].data
	out := newTensor(ts[2].shape, s.Out)
	per := n.H / n.G
	bk.parallel(n.B*n.H, 1, func(lo, hi int) {
		state := make([]float32, n.K*n.V) // S[i, j] at i·V + j
		u := make([]float32, n.V)
		for job := lo; job < hi; job++ {
			b, h := job/n.H, job%n.H
			grp := h / per
			clear(state)
			for t := range n.L {
				row := b*n.L + t
				decay := float32(math.Exp(float64(gv[row*n.H+h])))
				step := bv[row*n.H+h]
				qt := qv[(row*n.G+grp)*n.K : (row*n.G+grp+1)*n.K]
				kt := kv[(row*n.G+grp)*n.K : (row*n.G+grp+1)*n.K]
				vt := vv[(row*n.H+h)*n.V : (row*n.H+h+1)*n.V]
				yt := out.data[(row*n.H+h)*n.V : (row*n.H+h+1)*n.V]
				for i := range state {
					state[i] *= decay
				}
				clear(u)
				for i, ki := range kt { // kᵀS, summed over i in order
					si := state[i*n.V : (i+1)*n.V]
					for j := range u {
						u[j] += float32(ki * si[j])
					}
				}
				for j := range u {
					u[j] = float32(step * (vt[j] - u[j]))
				}
				clear(yt)
				for i, ki := range kt {
					si := state[i*n.V : (i+1)*n.V]
					qi := qt[i]
					for j := range si {
						si[j] += float32(ki * u[j])
						yt[j] += float32(qi * si[j])
					}
				}
			}
		}
	})
	roundInto(out.data, out.data, s.Out)
	return out, nil
}
