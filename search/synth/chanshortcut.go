package synth

import (
	"fmt"
	"math"
	"slices"

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
// or 2); for a video map [B, C, T, H, W], frames and cells folded into
// the channels together (videoShortcuts); for either, a value of the
// scope resampled along one axis (axisResampled). The rest, t − the shortcut, is
// a value of the scope moved or as it is (shortcutPlus).
func (s *synth) channelShortcut(t *val, vals []*val) *val {
	if len(t.shape) == 5 && !t.integral() {
		terms, paired := s.videoShortcuts(t, vals)
		if w, _ := s.best(t, paired); w != nil {
			return w
		}
		return s.shortcutPlus(t, append(terms, s.axisResampled(t, vals)...), vals)
	}
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	b, c, h, w := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	var terms []*val
	// the shortcut beside another map of the scope moved the same way
	// (a convolution's output folded or unfolded as the shortcut is):
	// read as the sum itself, before the rest is searched for
	var paired []*expr
	pair := func(term *val, move func(*val) *val, fits func(*val) bool, x *val) {
		if term == nil {
			return
		}
		for _, v := range vals {
			if v == x || v.opaque || v.integral() || len(v.shape) != 4 || v.shape[0] != b || !fits(v) {
				continue
			}
			if m := move(v); m != nil {
				paired = append(paired, &expr{op: program.OpAdd, args: []*val{m, term}, out: t.format, label: "moved as its channel shortcut, plus the shortcut"})
			}
		}
	}
	for _, x := range vals {
		if x.opaque || x.integral() || len(x.shape) != 4 || x.shape[0] != b || x == t {
			continue
		}
		cx, hx, wx := x.shape[1], x.shape[2], x.shape[3]
		for _, f := range []int{1, 2} {
			// each cell offset's channels together (pixel_unshuffle's
			// order, c·f² + offset) or each channel's offsets together
			// (offset·C + c: HunyuanImage's VAE)
			orders := []bool{false}
			if f > 1 {
				orders = append(orders, true)
			}
			for _, offsetsFirst := range orders {
				// down: x's cells f×f into channels, groups of g averaged
				// (groups of one where f > 1: the cells folded alone; at
				// f 1 that would be x itself, a plain residual, glue's)
				if hx == f*h && wx == f*w && (cx*f*f)%c == 0 && (cx*f*f > c || f > 1 && cx*f*f == c) {
					term := s.unshuffle(x, f, offsetsFirst)
					if term != nil && cx*f*f > c {
						term = s.groupMean(term, c)
					}
					if term != nil {
						terms = append(terms, term)
					}
					if f > 1 {
						pair(term, func(v *val) *val { return s.unshuffle(v, f, offsetsFirst) }, func(v *val) bool {
							return v.shape[1]*f*f == c && v.shape[2] == f*h && v.shape[3] == f*w
						}, x)
					}
				}
				// up: each channel r times, then f×f channels into cells
				// (once each where f > 1)
				if h == f*hx && w == f*wx && (c*f*f)%cx == 0 && (c*f*f > cx || f > 1 && c*f*f == cx) {
					r := x
					if c*f*f > cx {
						r = s.repeatChannels(x, c*f*f/cx)
					}
					if v := s.shuffle(r, f, offsetsFirst); v != nil {
						terms = append(terms, v)
						if f > 1 {
							pair(v, func(u *val) *val { return s.shuffle(u, f, offsetsFirst) }, func(u *val) bool {
								return u.shape[1] == c*f*f && u.shape[2] == hx && u.shape[3] == wx
							}, x)
						}
					}
				}
			}
		}
	}
	if w, _ := s.best(t, paired); w != nil {
		return w
	}
	return s.shortcutPlus(t, append(terms, s.axisResampled(t, vals)...), vals)
}

// shortcutPlus reads t as one of the shortcut terms alone, or plus a
// value of the scope moved or as it is: t − the shortcut, each entry to four units in
// the last place of t's and the shortcut's magnitudes (the sum rounded
// once, the difference rounded once, half a unit each; the shortcut's
// mean of up to 8 channels summed in another order, up to 3½ more at
// the mean's magnitude).
func (s *synth) shortcutPlus(t *val, terms, vals []*val) *val {
	bits := map[precision.Format]int{precision.F32: 23, precision.BF16: 7, precision.F16: 10}[t.format]
	if bits == 0 {
		return nil
	}
	for _, sh := range terms {
		if relRMS(t.format, sh.data, t.data) <= tolerance(t.format) {
			// the shortcut alone (its own module's output: the Wan 2.2
			// VAE's AvgDown3D)
			if w, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{sh}, out: t.format, label: "a channel shortcut"}}); w != nil {
				return w
			}
		}
		// the rest first as the sum rounds it, exactly (a narrow format's
		// loose bound admits many moves of a value with repeated
		// entries), then within the bound
		sum := func(x float32, i int) bool { return t.format.Round(x+sh.data[i]) == t.data[i] }
		d, tol := make([]float32, t.numel()), make([]float64, t.numel())
		for i, x := range t.data {
			d[i] = float32(float64(x) - float64(sh.data[i]))
			tol[i] = (math.Abs(float64(x))+math.Abs(float64(sh.data[i])))*math.Ldexp(1, 2-bits) + 1e-30
		}
		near := func(x float32, i int) bool { return math.Abs(float64(x)-float64(d[i])) <= tol[i] }
		for _, m := range append(s.nearMovesBy(t, sum, vals, true), s.nearMovesBy(t, near, vals, true)...) {
			if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{m, sh}, out: t.format, label: "plus a channel shortcut"}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// videoShortcuts are the shortcuts of a video map t [B, C, T, H, W]
// made from each map x of the scope, down and up (LTX-Video's, the Wan
// 2.2 VAE's, HunyuanVideo 1.5's samplers): x's frames and cells folded
// into the channels ft×f×f at a time (a space-to-depth in time and
// space, each channel's offsets innermost in (time, row, column) order,
// or outermost) and each group of channels averaged down to C, the clip
// first padded in front where ft does not divide its frames
// (framesInFront); or x unfolded into frames and cells the same ways,
// its channels repeated (upShortcuts), the first frames cut where the
// unfold made more than t holds. paired are each term plus another map of the
// scope moved as the shortcut is (a convolution's output rearranged
// beside its input), its channels joined twice or halved where that
// gives C (HunyuanVideo 1.5's first frame, packed apart).
func (s *synth) videoShortcuts(t *val, vals []*val) (terms []*val, paired []*expr) {
	b, c := t.shape[0], t.shape[1]
	clip := func(v *val) bool {
		return !v.opaque && !v.integral() && len(v.shape) == 5 && v.shape[0] == b && v != t && v.format == t.format
	}
	pair := func(term, x *val, move func(*val) *val) {
		for _, v := range vals {
			if v == x || !clip(v) || !slices.Equal(v.shape[2:], x.shape[2:]) {
				continue
			}
			m := move(v)
			if m == nil {
				continue
			}
			switch m.shape[1] {
			case c:
			case c / 2:
				if c%2 != 0 {
					continue
				}
				m = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{m, m}, out: m.format, label: "the channels joined twice"})
			case 2 * c:
				m = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: c}, args: []*val{m}, out: m.format, label: "the first half of the channels"})
			default:
				continue
			}
			if m != nil {
				paired = append(paired, &expr{op: program.OpAdd, args: []*val{m, term}, out: t.format, label: "moved as its channel shortcut, plus the shortcut"})
			}
		}
	}
	for _, x := range vals {
		if !clip(x) {
			continue
		}
		// factors of one: the channels alone averaged or repeated (the
		// encoder's and decoder's ends), never x itself (a residual, glue's)
		for _, f := range [][2]int{{2, 2}, {1, 2}, {2, 1}, {1, 1}} {
			ft, fs := f[0], f[1]
			k := ft * fs * fs
			for _, offsetsFirst := range []bool{false, true} {
				if k == 1 && offsetsFirst {
					continue // one order where nothing is folded
				}
				// down
				if pad := ft*t.shape[2] - x.shape[2]; pad >= 0 && pad < ft && x.shape[3] == fs*t.shape[3] && x.shape[4] == fs*t.shape[4] && (x.shape[1]*k)%c == 0 && x.shape[1]*k >= c && (k > 1 || x.shape[1] > c) {
					for _, xp := range s.framesInFront(x, pad) {
						u := s.spaceToDepth(xp, ft, fs, offsetsFirst)
						if u != nil && x.shape[1]*k > c {
							u = s.groupMean5(u, c)
						}
						if u != nil {
							terms = append(terms, u)
							if pad == 0 {
								pair(u, x, func(v *val) *val { return s.spaceToDepth(v, ft, fs, offsetsFirst) })
							}
						}
					}
				}
				// up, the first cut frames dropped after (LTX-Video's)
				if cut := ft*x.shape[2] - t.shape[2]; cut >= 0 && cut < ft && t.shape[3] == fs*x.shape[3] && t.shape[4] == fs*x.shape[4] && (k > 1 || c > x.shape[1]) {
					for _, u := range s.upShortcuts(x, c, ft, fs, offsetsFirst) {
						terms = append(terms, s.framesCut(u, cut))
						pair(s.framesCut(u, cut), x, func(v *val) *val {
							if v.shape[1]%k != 0 {
								return nil
							}
							return s.framesCut(s.depthToSpace(v, ft, fs, offsetsFirst), cut)
						})
					}
				}
			}
		}
	}
	return terms, paired
}

// spaceToDepth folds x [B, C, T, H, W] into [B, C·ft·f², T/ft, H/f, W/f],
// channel c·ft·f² + (st·f + sh)·f + sw holding frame st, row sh, column sw
// of each block; with offsetsFirst, channel ((st·f + sh)·f + sw)·C + c
// (HunyuanVideo 1.5's VAE).
func (s *synth) spaceToDepth(x *val, ft, f int, offsetsFirst bool) *val {
	if x == nil || ft*f == 1 {
		return x
	}
	b, c, T, h, w := x.shape[0], x.shape[1], x.shape[2]/ft, x.shape[3]/f, x.shape[4]/f
	split := s.reshape(x, []int{b, c, T, ft, h, f, w, f})
	perm := []int{0, 1, 3, 5, 7, 2, 4, 6}
	if offsetsFirst {
		perm = []int{0, 3, 5, 7, 1, 2, 4, 6}
	}
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{split}, out: x.format, label: "frames and cells into channels"})
	return s.reshape(moved, []int{b, c * ft * f * f, T, h, w})
}

// framesInFront are x with pad frames joined in front: zeros (the Wan
// 2.2 VAE's) or copies of its first frame (LTX-2's); x alone for none.
func (s *synth) framesInFront(x *val, pad int) []*val {
	if pad == 0 {
		return []*val{x}
	}
	shape := slices.Clone(x.shape)
	shape[2] = pad
	z := s.zeros(shape, x.format, fmt.Sprintf("zeros%v", shape), "zero frames padding a clip in front to whole frame groups (made from the request's shape)")
	var out []*val
	for _, front := range []*val{z, s.edgeFrames(x, false, pad)} {
		if v := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{front, x}, out: x.format, label: "frames in front"}); v != nil && front != nil {
			out = append(out, v)
		}
	}
	return out
}

// upShortcuts are x [B, Cx, T, H, W] unfolded into ft×f×f blocks of
// frames and cells with c channels: each channel repeated first
// (repeat_interleave, then the unfold: HunyuanVideo 1.5's), or the
// unfolded channels tiled after (the unfold, then repeat: LTX-Video's).
func (s *synth) upShortcuts(x *val, c, ft, fs int, offsetsFirst bool) []*val {
	k := ft * fs * fs
	var out []*val
	if (c*k)%x.shape[1] == 0 {
		r := x
		if c*k > x.shape[1] {
			r = s.repeatChannels(x, c*k/x.shape[1])
		}
		if u := s.depthToSpace(r, ft, fs, offsetsFirst); u != nil {
			out = append(out, u)
		}
	}
	if x.shape[1]%k == 0 && x.shape[1]/k < c && c%(x.shape[1]/k) == 0 && k > 1 {
		u := s.depthToSpace(x, ft, fs, offsetsFirst)
		if tiled := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: c / (x.shape[1] / k), Axis: 1}, args: []*val{u}, out: x.format, label: "the channels tiled"}); tiled != nil {
			out = append(out, tiled)
		}
	}
	return out
}

// framesCut is v without its first n frames.
func (s *synth) framesCut(v *val, n int) *val {
	if v == nil || n == 0 {
		return v
	}
	return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: n, End: v.shape[2]}, args: []*val{v}, out: v.format, label: fmt.Sprintf("the first %d frames cut", n)})
}

// depthToSpace unfolds x [B, C·ft·f², T, H, W] into [B, C, T·ft, H·f,
// W·f], reading channel c·ft·f² + (st·f + sh)·f + sw (with offsetsFirst,
// ((st·f + sh)·f + sw)·C + c) into frame st, row sh, column sw of each
// block: spaceToDepth undone.
func (s *synth) depthToSpace(x *val, ft, f int, offsetsFirst bool) *val {
	if x == nil || ft*f == 1 {
		return x
	}
	b, T, h, w := x.shape[0], x.shape[2], x.shape[3], x.shape[4]
	c := x.shape[1] / (ft * f * f)
	split := s.reshape(x, []int{b, c, ft, f, f, T, h, w})
	perm := []int{0, 1, 5, 2, 6, 3, 7, 4}
	if offsetsFirst {
		split = s.reshape(x, []int{b, ft, f, f, c, T, h, w})
		perm = []int{0, 4, 5, 1, 6, 2, 7, 3}
	}
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{split}, out: x.format, label: "channels into frames and cells"})
	return s.reshape(moved, []int{b, c, T * ft, h * f, w * f})
}

// groupMean5 is groupMean for a video map [B, C·g, T, H, W].
func (s *synth) groupMean5(x *val, c int) *val {
	if x == nil || x.shape[1]%c != 0 {
		return nil
	}
	b, g := x.shape[0], x.shape[1]/c
	grouped := s.reshape(x, []int{b, c, g, x.shape[2], x.shape[3], x.shape[4]})
	m := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 2}, args: []*val{grouped, nil}, out: x.format, label: fmt.Sprintf("the mean of each %d channels", g)})
	return s.reshape(m, []int{b, c, x.shape[2], x.shape[3], x.shape[4]})
}

// unshuffle is pixel_unshuffle(x, f): [B, C, H·f, W·f] → [B, C·f², H, W],
// channel c·f² + offset; with offsetsFirst, channel offset·C + c.
func (s *synth) unshuffle(x *val, f int, offsetsFirst bool) *val {
	if f == 1 || x == nil {
		return x
	}
	b, c, h, w := x.shape[0], x.shape[1], x.shape[2]/f, x.shape[3]/f
	split := s.reshape(x, []int{b, c, h, f, w, f})
	perm := []int{0, 1, 3, 5, 2, 4}
	if offsetsFirst {
		perm = []int{0, 3, 5, 1, 2, 4}
	}
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{split}, out: x.format, label: "cells into channels"})
	return s.reshape(moved, []int{b, c * f * f, h, w})
}

// shuffle is pixel_shuffle(x, f): [B, C·f², H, W] → [B, C, H·f, W·f],
// reading channel c·f² + offset; with offsetsFirst, offset·C + c.
func (s *synth) shuffle(x *val, f int, offsetsFirst bool) *val {
	if f == 1 || x == nil {
		return x
	}
	b, c, h, w := x.shape[0], x.shape[1]/(f*f), x.shape[2], x.shape[3]
	if offsetsFirst {
		split := s.reshape(x, []int{b, f, f, c, h, w})
		moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 4, 1, 5, 2}}, args: []*val{split}, out: x.format, label: "channels into cells"})
		return s.reshape(moved, []int{b, c, h * f, w * f})
	}
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

// repeatChannels is repeat_interleave(x, r, dim=1), x [B, C, …].
func (s *synth) repeatChannels(x *val, r int) *val {
	one := s.reshape(x, slices.Concat(x.shape[:2], []int{1}, x.shape[2:]))
	rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: r, Axis: 2}, args: []*val{one}, out: x.format, label: fmt.Sprintf("each channel %d times", r)})
	return s.reshape(rep, slices.Concat([]int{x.shape[0], x.shape[1] * r}, x.shape[2:]))
}
