package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// fitConv3D explains a 3-D convolution (w [O, C, kt, kh, kw] over x [B, C,
// T, H, W], groups 1: a video model's convolutions) as a 2-D one over
// frames whose channels hold the kt time taps: x padded in time to give
// t's length (as much before as after, or all of it before: a causal
// convolution, a video VAE's, that pads the past itself and convolves
// unpadded), by zeros or else by copies of the edge frame (a causal
// convolution that repeats the first frame, inside the module that
// holds the weight, so that no capture sees the padded clip), the kt windows of it (every st-th frame from
// each tap: a stride in time, a VAE's temporal downsampling) joined on
// the channel axis, every frame then convolved by w laid out [O, kt·C,
// kh, kw] (one f32 sum over kt·C·kh·kw products and the bias, rounded
// once). Every spatial stride and padding the sizes allow is tried
// (stdConvGeometries). Kernels whose time taps equal the stride with no
// overlap are fitConv's (a patch embedding).
func (s *synth) fitConv3D(x *val, params []*val, t *val) *val {
	return s.fitConv3DOf("", x, params, t)
}

// fitConv3DOf is fitConv3D for a call of module (its path without the
// call's ordinal; "" for none), whose padded clip it keeps in convClips.
func (s *synth) fitConv3DOf(module string, x *val, params []*val, t *val) *val {
	if x == nil {
		return nil
	}
	w, bias := convParams(params)
	if len(w.shape) != 5 || len(x.shape) != 5 || len(t.shape) != 5 || x.integral() {
		return nil
	}
	b, c, o, kt := x.shape[0], x.shape[1], w.shape[0], w.shape[2]
	if w.shape[1] != c || t.shape[0] != b || t.shape[1] != o || t.shape[2] < 1 {
		return nil
	}
	wk := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{w}, out: w.format, label: "time taps before channels"}),
		[]int{o, kt * c, w.shape[3], w.shape[4]})
	if wk == nil {
		return nil
	}
	padded := map[*expr]*val{} // each candidate's clip, padded
	zeroPadded := s.conv3DCandidates(x, wk, bias, t, kt, false, padded)
	v := s.bestFit(t, zeroPadded, "conv")
	if v == nil {
		v = s.bestFit(t, append(zeroPadded, s.conv3DCandidates(x, wk, bias, t, kt, true, padded)...), "conv")
	}
	if v != nil && module != "" {
		if s.convClips == nil {
			s.convClips = map[string]*val{}
		}
		s.convClips[module] = padded[v.from]
	}
	return v
}

// convPast is the past a later call of a 3-D convolution module joins
// before its clip x: the last kt − 1 frames of the clip its previous call
// convolved, padded (convClips; kt − 2 behind a stride in time, which
// keeps one frame fewer), each tried by fitConv3D unpadded.
func (s *synth) convPast(module string, x *val, params []*val, t *val) *val {
	prev := s.convClips[module]
	w, _ := convParams(params)
	if prev == nil || len(w.shape) != 5 || len(prev.shape) != 5 {
		return nil
	}
	kt := w.shape[2]
	for _, n := range []int{kt - 1, kt - 2} {
		if n < 1 || n > prev.shape[2] {
			continue
		}
		past := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: prev.shape[2] - n, End: prev.shape[2]}, args: []*val{prev}, out: prev.format, label: "the frames the module kept from its last call"})
		if past == nil {
			continue
		}
		if v := s.fitConv3DOf(module, s.pastJoined(past, x), params, t); v != nil {
			return v
		}
	}
	return nil
}

// conv3DCandidates are fitConv3D's readings for one way of padding time:
// every stride, pad placement and spatial geometry the sizes allow.
func (s *synth) conv3DCandidates(x, wk, bias, t *val, kt int, edge bool, padded map[*expr]*val) []*expr {
	b, tt, o, to := x.shape[0], x.shape[2], t.shape[1], t.shape[2]
	var cands []*expr
	for st := 1; st <= max(1, min(kt, 4)); st++ {
		if st > 1 && to == 1 {
			break // one frame out: every stride reads the same taps
		}
		grow := (to-1)*st + kt - tt // both time pads together
		if grow < 0 {
			continue
		}
		pads := [][2]int{{grow, 0}} // causal
		if grow%2 == 0 && grow > 0 {
			pads = [][2]int{{grow / 2, grow / 2}, {grow, 0}}
		}
		for _, pad := range pads {
			if edge && pad == [2]int{0, 0} {
				continue // nothing padded: the zeros' reading already
			}
			frames, xp := s.timeTaps(x, pad, kt, to, st, edge)
			if frames == nil {
				continue
			}
			proxy := &val{shape: []int{b * to, o, t.shape[3], t.shape[4]}, format: t.format}
			how := fmt.Sprintf("%d time taps, padded %d before and %d after", kt, pad[0], pad[1])
			if edge {
				how += " by copies of the edge frames"
			}
			if st > 1 {
				how += fmt.Sprintf(", stride %d", st)
			}
			for _, e := range s.stdConvGeometries(frames, wk, bias, proxy, how) {
				y := s.reshape(s.derive(e), []int{b, to, o, t.shape[3], t.shape[4]})
				if y == nil {
					continue
				}
				c := &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{y}, out: t.format, label: "conv3d: " + e.label}
				padded[c] = xp
				cands = append(cands, c)
			}
		}
	}
	return cands
}

// timeTaps is x [B, C, T, H, W] padded in time (pad: before, after) by
// zeros, or with edge by copies of its first and last frames, its kt
// windows of to frames, every st-th, joined on the channels, read as
// frames [B·to, kt·C, H, W]; and the padded clip (the frames read
// past the last window left out).
func (s *synth) timeTaps(x *val, pad [2]int, kt, to, st int, edge bool) (*val, *val) {
	clip := x
	b, c, h, w := x.shape[0], x.shape[1], x.shape[3], x.shape[4]
	readPast := st - 1 // a strided tap's window reads past its last frame: frames never used
	pad[1] += readPast
	parts := []*val{x}
	for i, n := range pad {
		if n == 0 {
			continue
		}
		var z *val
		if edge {
			if z = s.edgeFrames(x, i == 1, n); z == nil {
				return nil, nil
			}
		} else {
			shape := slices.Clone(x.shape)
			shape[2] = n
			z = s.zeros(shape, x.format, fmt.Sprintf("zeros%v", shape), "zeros padding a 3-D convolution's input in time (made from the request's shape)")
		}
		if i == 0 {
			parts = append([]*val{z}, parts...)
		} else {
			parts = append(parts, z)
		}
	}
	xp := x
	if len(parts) > 1 {
		if xp = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: parts, out: x.format, label: "padded in time"}); xp == nil {
			return nil, nil
		}
		clip = xp
		if readPast > 0 {
			clip = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: xp.shape[2] - readPast}, args: []*val{xp}, out: x.format, label: "the padded clip"})
		}
	}
	var taps []*val
	for j := range kt {
		tap := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: j, End: j + to*st}, args: []*val{xp}, out: x.format, label: fmt.Sprintf("time tap %d", j)})
		if st > 1 {
			// every st-th frame: the window read as [to, st] frames, the first of each
			tap = s.reshape(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: 1},
				args: []*val{s.reshape(tap, []int{b, c, to, st, h, w})}, out: x.format, label: fmt.Sprintf("every %d-th frame", st)}), []int{b, c, to, h, w})
		}
		if tap == nil {
			return nil, nil
		}
		taps = append(taps, tap)
	}
	stacked := taps[0]
	if kt > 1 {
		stacked = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: taps, out: x.format, label: "time taps joined on the channels"})
	}
	if stacked == nil {
		return nil, nil
	}
	return s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{stacked}, out: x.format, label: "frames first"}),
		[]int{b * to, kt * c, h, w}), clip
}

// edgeFrames is n copies of x's first frame (last: its last), joined in
// time: a clip padded by repeating its edge.
func (s *synth) edgeFrames(x *val, last bool, n int) *val {
	at := 0
	if last {
		at = x.shape[2] - 1
	}
	f := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: at, End: at + 1}, args: []*val{x}, out: x.format, label: "an edge frame"})
	if f == nil || n == 1 {
		return f
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: slices.Repeat([]*val{f}, n), out: x.format, label: fmt.Sprintf("the edge frame %d times", n)})
}

// pastJoined is past joined before x in time (both [B, C, T, H, W], equal
// but for T): a causal convolution handed its input's frames before
// this chunk; nil where the shapes do not join.
func (s *synth) pastJoined(past, x *val) *val {
	if len(past.shape) != 5 || len(x.shape) != 5 || past.integral() {
		return nil
	}
	for i := range 5 {
		if i != 2 && past.shape[i] != x.shape[i] {
			return nil
		}
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{past, x}, out: x.format, label: "the frames before joined"})
}
