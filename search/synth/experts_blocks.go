package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// Experts run as one batched GEMM over E blocks of rows (the tokens
// repeated once per expert) leave two values between the router and the
// layer's output: the blocks' input, each block the tokens weighted by
// one expert's column of the dense routing weights (the weights scale
// the experts' inputs), and the output, the blocks summed back over the
// experts, maybe onto a value of the scope (a shared expert). Both are
// found by their values, then written in the vocabulary (repeat,
// permute, mul; slice, add).

// weightedBlocks explains t [E·T, D] as x [T, D] repeated E times along
// the rows, block e times column e of dense weights w [T, E]:
// x.repeat(E, 1) · wᵀ.reshape(E·T, 1).
func (s *synth) weightedBlocks(t *val, vals []*val) *val {
	if len(t.shape) != 2 {
		return nil
	}
	rows, d := t.shape[0], t.shape[1]
	tol := tolerance(t.format)
	for _, w := range vals {
		if w.opaque || w.integral() || len(w.shape) < 2 {
			continue
		}
		e := w.shape[len(w.shape)-1]
		if e < 2 || rows%e != 0 || w.numel() != rows {
			continue
		}
		tokens := rows / e
		for _, x := range vals {
			if x.opaque || x.integral() || x == w || x.numel() != tokens*d || len(x.shape) == 0 || x.shape[len(x.shape)-1] != d {
				continue
			}
			// the values first, on the host: most pairs fail here
			got := make([]float32, len(t.data))
			for b := range e {
				for r := range tokens {
					c := w.data[r*e+b]
					for j := range d {
						got[(b*tokens+r)*d+j] = x.data[r*d+j] * c
					}
				}
			}
			if relRMS(t.format, got, t.data) > 2*tol {
				continue
			}
			rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: e, Axis: 0}, args: []*val{s.reshape(x, []int{tokens, d})}, out: x.format, label: "tokens once per expert"})
			cols := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{s.reshape(w, []int{tokens, e})}, out: w.format, label: "weights per expert"})
			col := s.reshape(cols, []int{rows, 1})
			if rep == nil || col == nil {
				continue
			}
			cand := &expr{op: program.OpMul, args: []*val{rep, col}, out: t.format, label: fmt.Sprintf("tokens weighted per expert (%d blocks)", e)}
			if v, _ := s.best(t, []*expr{cand}); v != nil {
				return v
			}
		}
	}
	return nil
}

// blocksSummed explains t [.., D] as the E blocks of rows of u [E·T, D]
// added in order (u.reshape(E, T, D).sum(0)), onto a value of t's size
// where one makes it (shared.add_(sum)), or alone.
func (s *synth) blocksSummed(t *val, vals []*val) *val {
	if len(t.shape) == 0 {
		return nil
	}
	d := t.shape[len(t.shape)-1]
	tokens := t.numel() / d
	tol := tolerance(t.format)
	for _, u := range vals {
		if u.opaque || u.integral() || len(u.shape) != 2 || u.shape[1] != d || u.shape[0] <= tokens || u.shape[0]%tokens != 0 {
			continue
		}
		e := u.shape[0] / tokens
		sum := make([]float32, tokens*d)
		for b := range e {
			for i := range sum {
				sum[i] += u.data[b*tokens*d+i]
			}
		}
		onto := []*val{nil}
		for _, v := range vals {
			if v != u && !v.opaque && !v.integral() && v.numel() == t.numel() {
				onto = append(onto, v)
			}
		}
		for _, v := range onto {
			got := sum
			if v != nil {
				got = make([]float32, len(sum))
				for i := range got {
					got[i] = v.data[i] + sum[i]
				}
			}
			if relRMS(t.format, got, t.data) > 2*tol {
				continue
			}
			acc := s.blockSum(u, e, t.format)
			if acc == nil {
				continue
			}
			cand := &expr{op: program.OpReshape, attrs: program.Attrs{Shape: t.shape}, args: []*val{acc}, out: t.format, label: fmt.Sprintf("%d experts' blocks summed", e)}
			if v != nil {
				cand = &expr{op: program.OpAdd, args: []*val{s.reshape(v, t.shape), s.reshape(acc, t.shape)}, out: t.format, label: fmt.Sprintf("%d experts' blocks summed onto a value", e)}
			}
			if w, _ := s.best(t, []*expr{cand}); w != nil {
				return w
			}
		}
	}
	return nil
}

// blockSum writes the e equal blocks of rows of u [e·T, D] added in
// order (u.reshape(e, T, D).sum(0)) as [T, D] in format f. Past two
// blocks the sum accumulates in f32 and is rounded once, as torch's sum.
func (s *synth) blockSum(u *val, e int, f precision.Format) *val {
	if u == nil || e < 2 || len(u.shape) != 2 || u.shape[0]%e != 0 {
		return nil
	}
	tokens := u.shape[0] / e
	acc := f
	if e > 2 {
		acc = precision.F32
	}
	var sum *val
	for b := range e {
		blk := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: b * tokens, End: (b + 1) * tokens}, args: []*val{u}, out: u.format, label: "one expert's block"})
		if sum == nil {
			sum = blk
		} else {
			sum = s.derive(&expr{op: program.OpAdd, args: []*val{sum, blk}, out: acc, label: "blocks summed"})
		}
	}
	if sum == nil || sum.format == f {
		return sum
	}
	return s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: f}, args: []*val{sum}, out: f, label: "blocks' sum rounded"})
}
