package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// fitConv3D explains a 3-D convolution (w [O, C, kt, kh, kw] over x [B, C,
// T, H, W], groups 1, stride 1 along time: a video model's convolutions)
// as a 2-D one over frames whose channels hold the kt time taps: x padded
// by zeros in time to keep or give t's length (as much before as after,
// or all of it before: a causal convolution, a video VAE's, that pads the
// past itself and convolves unpadded), the kt shifted windows of it
// joined on the channel axis, every frame then convolved by w laid out
// [O, kt·C, kh, kw] (one f32 sum over kt·C·kh·kw products and the bias,
// rounded once). Every spatial stride and padding the sizes allow is
// tried (stdConvGeometries). Kernels whose time taps equal the stride
// with no overlap are fitConv's (a patch embedding).
func (s *synth) fitConv3D(x *val, params []*val, t *val) *val {
	w, bias := convParams(params)
	if len(w.shape) != 5 || len(x.shape) != 5 || len(t.shape) != 5 || x.integral() {
		return nil
	}
	b, c, tt, o, kt := x.shape[0], x.shape[1], x.shape[2], w.shape[0], w.shape[2]
	to := t.shape[2]
	grow := to - tt + kt - 1 // both time pads together, at stride 1
	if w.shape[1] != c || t.shape[0] != b || t.shape[1] != o || to < 1 || grow < 0 {
		return nil
	}
	pads := [][2]int{{grow, 0}} // causal
	if grow%2 == 0 {
		pads = [][2]int{{grow / 2, grow / 2}, {grow, 0}}
	}
	if grow == 0 {
		pads = pads[:1]
	}
	wk := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{w}, out: w.format, label: "time taps before channels"}),
		[]int{o, kt * c, w.shape[3], w.shape[4]})
	if wk == nil {
		return nil
	}
	var cands []*expr
	for _, pad := range pads {
		frames := s.timeTaps(x, pad, kt, to)
		if frames == nil {
			continue
		}
		proxy := &val{shape: []int{b * to, o, t.shape[3], t.shape[4]}, format: t.format}
		for _, e := range s.stdConvGeometries(frames, wk, bias, proxy, fmt.Sprintf("%d time taps, padded %d before and %d after", kt, pad[0], pad[1])) {
			y := s.reshape(s.derive(e), []int{b, to, o, t.shape[3], t.shape[4]})
			if y == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{y}, out: t.format, label: "conv3d: " + e.label})
		}
	}
	return s.bestFit(t, cands, "conv")
}

// timeTaps is x [B, C, T, H, W] padded by zeros in time (pad: before,
// after), its kt windows of to frames joined on the channels, read as
// frames [B·to, kt·C, H, W].
func (s *synth) timeTaps(x *val, pad [2]int, kt, to int) *val {
	b, c := x.shape[0], x.shape[1]
	parts := []*val{x}
	for i, n := range pad {
		if n == 0 {
			continue
		}
		shape := slices.Clone(x.shape)
		shape[2] = n
		z := s.zeros(shape, x.format, fmt.Sprintf("zeros%v", shape), "zeros padding a 3-D convolution's input in time (made from the request's shape)")
		if i == 0 {
			parts = append([]*val{z}, parts...)
		} else {
			parts = append(parts, z)
		}
	}
	xp := x
	if len(parts) > 1 {
		if xp = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: parts, out: x.format, label: "padded in time"}); xp == nil {
			return nil
		}
	}
	var taps []*val
	for j := range kt {
		tap := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: j, End: j + to}, args: []*val{xp}, out: x.format, label: fmt.Sprintf("time tap %d", j)})
		if tap == nil {
			return nil
		}
		taps = append(taps, tap)
	}
	stacked := taps[0]
	if kt > 1 {
		stacked = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: taps, out: x.format, label: "time taps joined on the channels"})
	}
	if stacked == nil {
		return nil
	}
	return s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{stacked}, out: x.format, label: "frames first"}),
		[]int{b * to, kt * c, x.shape[3], x.shape[4]})
}
