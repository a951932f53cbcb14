package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// channelColumns reads params as one entry per channel of x [B, C, ...]
// (rank 3 or more): each of C entries, laid out any way whose other axes
// are 1 ([C, 1, 1] as a video VAE's norm keeps its γ, [1, C, 1] as an
// audio codec's activation keeps its α). It returns them as [C] vectors,
// nil where any is not one.
func (s *synth) channelColumns(params []*val, x *val) []*val {
	if len(x.shape) < 3 || len(params) == 0 {
		return nil
	}
	c := x.shape[1]
	var out []*val
	for _, p := range params {
		if p.numel() != c || c < 2 || len(p.shape) < 2 || slices.Index(p.shape, c) < 0 {
			return nil
		}
		v := s.reshape(p, []int{c})
		if v == nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// fitSnake explains t as the Snake activation of x [B, C, ...] with
// per-channel parameters: x + 1/(β + 1e-9) · sin(α·x)², α and β each the
// parameter or its exp (logscale), β = α where there is one parameter
// (BigVGAN's Snake; SnakeBeta and DAC's and Oobleck's Snake1d with two).
// Composed of the vocabulary as torch computes it, each step rounded to
// x's format: exp, the sum with 1e-9, its reciprocal, the product with x,
// sin, the square, the product, the sum with x.
func (s *synth) fitSnake(x *val, params []*val, t *val) *val {
	cols := s.channelColumns(params, x)
	if cols == nil || len(cols) > 2 || !equalShape(x, t) || x.integral() {
		return nil
	}
	lay := slices.Repeat([]int{1}, len(x.shape))
	lay[1] = x.shape[1]
	orders := [][2]int{{0, 0}}
	if len(cols) == 2 {
		orders = [][2]int{{0, 1}, {1, 0}}
	}
	f := x.format
	var cands []*expr
	for _, o := range orders {
		a, b := s.reshape(cols[o[0]], lay), s.reshape(cols[o[1]], lay)
		for _, logscale := range []bool{false, true} {
			alpha, beta := a, b
			if logscale {
				alpha = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{a}, out: f, label: "exp α"})
				beta = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{b}, out: f, label: "exp β"})
			}
			shifted := s.derive(&expr{op: program.OpAdd, args: []*val{beta, s.constant(1e-9)}, out: f, label: "β + 1e-9"})
			recip := s.derive(&expr{op: program.OpDiv, args: []*val{s.constant(1), shifted}, out: f, label: "1/(β + 1e-9)"})
			ax := s.derive(&expr{op: program.OpMul, args: []*val{alpha, x}, out: f, label: "α·x"})
			sin := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSin}, args: []*val{ax}, out: f, label: "sin(α·x)"})
			sq := s.derive(&expr{op: program.OpMul, args: []*val{sin, sin}, out: f, label: "sin(α·x)²"})
			term := s.derive(&expr{op: program.OpMul, args: []*val{recip, sq}, out: f, label: "sin(α·x)²/(β + 1e-9)"})
			if term == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpAdd, args: []*val{x, term}, out: t.format,
				label: fmt.Sprintf("snake, %d parameters, logscale %v", len(cols), logscale)})
		}
	}
	return s.bestFit(t, cands, "snake")
}
