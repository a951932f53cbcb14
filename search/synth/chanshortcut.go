package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// channelShortcut explains a map t [B, C, H, W] as an expression of the
// first forms (a convolution's output, rearranged) plus a shortcut that
// reshapes a map of the scope without weights: its cells folded into the
// channels f×f at a time (pixel_unshuffle) and each group of g
// consecutive channels averaged down to C, or each channel repeated r
// times and unfolded back into cells (repeat_interleave, pixel_shuffle):
// DC-AE's down and up blocks and its encoder's and decoder's ends (f 1
// or 2). The rest, t − the shortcut, is a value of the scope moved or as
// it is (rearranged's reading, to two units in the last place).
func (s *synth) channelShortcut(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	b, c, h, w := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	var terms []*val
	for _, x := range vals {
		if x.opaque || x.integral() || len(x.shape) != 4 || x.shape[0] != b || x == t {
			continue
		}
		cx, hx, wx := x.shape[1], x.shape[2], x.shape[3]
		for _, f := range []int{1, 2} {
			// down: x's cells f×f into channels, groups of g averaged
			// (groups of one where f > 1: the cells folded alone; at f 1
			// that would be x itself, a plain residual, glue's)
			if hx == f*h && wx == f*w && (cx*f*f)%c == 0 && (cx*f*f > c || f > 1 && cx*f*f == c) {
				if u := s.unshuffle(x, f); u != nil && cx*f*f == c {
					terms = append(terms, u)
				} else if v := s.groupMean(u, c); v != nil {
					terms = append(terms, v)
				}
			}
			// up: each channel r times, then f×f channels into cells
			// (once each where f > 1)
			if h == f*hx && w == f*wx && (c*f*f)%cx == 0 && (c*f*f > cx || f > 1 && c*f*f == cx) {
				r := x
				if c*f*f > cx {
					r = s.repeatChannels(x, c*f*f/cx)
				}
				if v := s.shuffle(r, f); v != nil {
					terms = append(terms, v)
				}
			}
		}
	}
	bits := map[precision.Format]int{precision.F32: 23, precision.BF16: 7, precision.F16: 10}[t.format]
	if bits == 0 {
		return nil
	}
	for _, sh := range terms {
		// t − the shortcut, each entry to two units in the last place of
		// t's and the shortcut's magnitudes (the sum rounded once, the
		// shortcut's mean summed in another order), is a value of the
		// scope moved or as it is
		d, tol := make([]float32, t.numel()), make([]float64, t.numel())
		for i, x := range t.data {
			d[i] = float32(float64(x) - float64(sh.data[i]))
			tol[i] = (math.Abs(float64(x))+math.Abs(float64(sh.data[i])))*math.Ldexp(1, 1-bits) + 1e-30
		}
		for _, m := range s.nearMoves(t, d, tol, vals, true) {
			if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{m, sh}, out: t.format, label: "plus a channel shortcut"}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// unshuffle is pixel_unshuffle(x, f): [B, C, H·f, W·f] → [B, C·f², H, W].
func (s *synth) unshuffle(x *val, f int) *val {
	if f == 1 || x == nil {
		return x
	}
	b, c, h, w := x.shape[0], x.shape[1], x.shape[2]/f, x.shape[3]/f
	split := s.reshape(x, []int{b, c, h, f, w, f})
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 3, 5, 2, 4}}, args: []*val{split}, out: x.format, label: "cells into channels"})
	return s.reshape(moved, []int{b, c * f * f, h, w})
}

// shuffle is pixel_shuffle(x, f): [B, C·f², H, W] → [B, C, H·f, W·f].
func (s *synth) shuffle(x *val, f int) *val {
	if f == 1 || x == nil {
		return x
	}
	b, c, h, w := x.shape[0], x.shape[1]/(f*f), x.shape[2], x.shape[3]
	split := s.reshape(x, []int{b, c, f, f, h, w})
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 4, 2, 5, 3}}, args: []*val{split}, out: x.format, label: "channels into cells"})
	return s.reshape(moved, []int{b, c, h * f, w * f})
}

// groupMean averages x [B, C·g, H, W]'s consecutive groups of g channels
// down to c.
func (s *synth) groupMean(x *val, c int) *val {
	if x == nil || x.shape[1]%c != 0 {
		return nil
	}
	b, g, h, w := x.shape[0], x.shape[1]/c, x.shape[2], x.shape[3]
	grouped := s.reshape(x, []int{b, c, g, h, w})
	m := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 2}, args: []*val{grouped, nil}, out: x.format, label: fmt.Sprintf("the mean of each %d channels", g)})
	return s.reshape(m, []int{b, c, h, w})
}

// repeatChannels is repeat_interleave(x, r, dim=1).
func (s *synth) repeatChannels(x *val, r int) *val {
	b, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	one := s.reshape(x, []int{b, c, 1, h, w})
	rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: r, Axis: 2}, args: []*val{one}, out: x.format, label: fmt.Sprintf("each channel %d times", r)})
	return s.reshape(rep, []int{b, c * r, h, w})
}
