package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// grnEpsilons are the ε a global response normalisation adds to the
// channels' mean norm.
var grnEpsilons = [...]float64{1e-6, 1e-5}

// fitGRN explains a leaf call's result t as a global response
// normalisation of its argument x [B, .., C] (channels last) with two
// per-channel parameters γ and β of shape [1, .., 1, C] (ConvNeXt V2's
// GRN): g = ‖x‖₂ over every axis between the batch and the channels, one
// per (batch, channel); n = g / (mean of g over the channels + ε);
// t = γ·(x·n) + β + x. Written in the vocabulary: x², its mean over the
// cells times their count (the sum), √, the channels' mean, + ε, the
// division, then the products and sums in torch's order, each rounded to
// t's format.
func (s *synth) fitGRN(xs, params []*val, t *val) *val {
	if len(xs) != 1 || len(params) != 2 {
		return nil
	}
	x := xs[0]
	n := len(x.shape)
	if n < 3 || !slices.Equal(x.shape, t.shape) || x.integral() {
		return nil
	}
	c := x.shape[n-1]
	for _, p := range params {
		if len(p.shape) < 2 || p.numel() != c || p.shape[len(p.shape)-1] != c {
			return nil
		}
	}
	b := x.shape[0]
	cells := exec.Numel(x.shape[1 : n-1])
	f := t.format
	rows := s.reshape(x, []int{b, cells, c})
	gamma, beta := s.reshape(params[0], []int{1, 1, c}), s.reshape(params[1], []int{1, 1, c})
	if rows == nil || gamma == nil || beta == nil {
		return nil
	}
	step := func(op program.Op, label string, args ...*val) *val {
		return s.derive(&expr{op: op, args: args, out: f, label: label})
	}
	sq := step(program.OpMul, "x²", rows, rows)
	if sq == nil {
		return nil
	}
	mean := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{sq, nil}, out: f, label: "the mean of x² over the cells"})
	if mean == nil {
		return nil
	}
	sum := step(program.OpMul, "times the cells (the sum)", mean, s.constant(float64(cells)))
	g := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSqrt}, args: []*val{sum}, out: f, label: "‖x‖₂ per channel"})
	if g == nil {
		return nil
	}
	gm := s.reshape(s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{g, nil}, out: f, label: "the channels' mean norm"}), []int{b, 1})
	if gm == nil {
		return nil
	}
	var cands []*expr
	for _, eps := range grnEpsilons {
		d := step(program.OpAdd, "+ ε", gm, s.constant(eps))
		nx := s.reshape(step(program.OpDiv, "the norms over their mean", g, d), []int{b, 1, c})
		if nx == nil {
			continue
		}
		y := step(program.OpAdd, "+ β", step(program.OpMul, "γ·(x·n)", gamma, step(program.OpMul, "x·n", rows, nx)), beta)
		y = step(program.OpAdd, "+ x", y, rows)
		if y == nil {
			continue
		}
		cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: f,
			label: fmt.Sprintf("global response norm ε=%g", eps)})
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "glue", candidates: ev}
	return v
}
