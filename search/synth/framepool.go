package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// framePairsAveraged explains t as a video map of the scope, x [B, C, T,
// H, W], with its frames averaged two by two (avg_pool1d over time,
// kernel and stride 2), the first frame kept alone where T is odd (a
// causal video VAE's temporal downsampling: the first frame is an image
// of its own): t [B, C, T', H, W], or the frames folded into the batch
// [B·T', C, H, W] as a 2-D convolution reads them next.
func (s *synth) framePairsAveraged(t *val, vals []*val) *val {
	if t.integral() || len(t.shape) != 4 && len(t.shape) != 5 {
		return nil
	}
	var cands []*expr
	for _, x := range vals {
		if x.opaque || x.integral() || len(x.shape) != 5 || x.shape[2] < 2 || x.format != t.format {
			continue
		}
		b, c, T, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.shape[4]
		tp := (T + 1) / 2
		folded := []int{b * tp, c, h, w}
		if !slices.Equal(t.shape, []int{b, c, tp, h, w}) && !slices.Equal(t.shape, folded) {
			continue
		}
		y := s.pairsAveraged(x)
		if y == nil {
			continue
		}
		if len(t.shape) == 5 {
			cands = append(cands, y.from)
			continue
		}
		moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{y}, out: y.format, label: "frames first"})
		if moved != nil {
			cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: folded}, args: []*val{moved}, out: y.format, label: "frames folded into the batch"})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, _ := s.best(t, cands)
	return v
}

// pairsAveraged is x [B, C, T, H, W] with frames 2i and 2i+1 averaged
// (from frame 1 where T is odd, frame 0 then kept before them).
func (s *synth) pairsAveraged(x *val) *val {
	b, c, T, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.shape[4]
	rest, first := x, (*val)(nil)
	if T%2 == 1 {
		first = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: 1}, args: []*val{x}, out: x.format, label: "the first frame"})
		rest = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 1, End: T}, args: []*val{x}, out: x.format, label: "the frames after the first"})
	}
	n := (T - T%2) / 2
	if rest == nil || n == 0 {
		return first
	}
	pairs := s.reshape(rest, []int{b, c, n, 2, h, w})
	m := s.reshape(s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 3}, args: []*val{pairs, nil}, out: x.format, label: "frames averaged two by two"}), []int{b, c, n, h, w})
	if first == nil || m == nil {
		return m
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{first, m}, out: x.format, label: fmt.Sprintf("the first frame, then %d averaged pairs", n)})
}
