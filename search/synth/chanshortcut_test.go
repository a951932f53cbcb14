package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestChannelShortcut: a map plus DC-AE's shortcuts, computed here by
// hand, is read as the value (moved, or as it is) plus the shortcut:
// down, each 2×2 of x's cells folded into channels and groups of 2
// averaged; up, each channel of x repeated 2 times and unfolded 2×2 into
// cells. A map no shortcut makes is not.
func TestChannelShortcut(t *testing.T) {
	const b, c, h, w = 1, 4, 2, 2
	mk := func(shape []int, seed float64) *val {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := &val{shape: shape, data: make([]float32, n), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(math.Sin(seed + float64(i)*0.37))
		}
		return v
	}
	y := mk([]int{b, c, h, w}, 1) // the value the shortcut is added to
	// down: x [1, 2, 4, 4]; unshuffled [1, 8, 2, 2], channel k·4 + (i%2)·2 + j%2
	// of channel k at cell (i, j); groups of 2 averaged to 4
	x := mk([]int{b, 2, 2 * h, 2 * w}, 2)
	down := make([]float32, b*c*h*w)
	for oc := range c {
		for i := range h {
			for j := range w {
				var sum float32
				for g := range 2 {
					u := oc*2 + g // unshuffled channel
					k, di, dj := u/4, (u%4)/2, u%2
					sum += x.data[(k*2*h+2*i+di)*2*w+2*j+dj]
				}
				down[(oc*h+i)*w+j] = y.data[(oc*h+i)*w+j] + sum/2
			}
		}
	}
	// up: z [1, 2, 1, 1]; each channel repeated 4 times, [1, 8, 1, 1],
	// unfolded into [1, 2, 2, 2]: cell (i, j) of channel oc reads repeated
	// channel oc·4 + i·2 + j, which is z's channel (oc·4 + i·2 + j)/4
	z := mk([]int{b, 2, h / 2, w / 2}, 3)
	yUp := mk([]int{b, 2, h, w}, 4)
	up := make([]float32, len(yUp.data))
	for oc := range 2 {
		for i := range h {
			for j := range w {
				r := oc*4 + i*2 + j // the repeated channel
				up[(oc*h+i)*w+j] = yUp.data[(oc*h+i)*w+j] + z.data[r/4]
			}
		}
	}
	for _, tc := range []struct {
		name   string
		target *val
		vals   []*val
	}{
		{"down", &val{shape: []int{b, c, h, w}, data: down, format: precision.F32}, []*val{x, y}},
		{"up", &val{shape: []int{b, 2, h, w}, data: up, format: precision.F32}, []*val{z, yUp}},
	} {
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.channelShortcut(tc.target, tc.vals)
		if v == nil {
			t.Errorf("%s: not explained", tc.name)
			continue
		}
		if e := relRMS(precision.F32, v.data, tc.target.data); e > 1e-6 {
			t.Errorf("%s: rel-RMS %g", tc.name, e)
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	noise := mk([]int{b, c, h, w}, 9)
	if v := s.channelShortcut(noise, []*val{x, y}); v != nil {
		t.Errorf("a map no shortcut makes explained as %s", v.from.label)
	}
}

// TestVideoShortcut: a video map plus LTX-Video's downsampler shortcut,
// computed here by hand, is read as a value's elements moved plus the
// shortcut: y's and x's frames and cells folded into channels 2×2×2 at a
// time (channel c·8 + st·4 + sh·2 + sw, or HunyuanVideo 1.5's
// (st·4 + sh·2 + sw)·C + c), x's groups of two channels averaged.
func TestVideoShortcut(t *testing.T) {
	const T, h, w = 4, 4, 4
	mk := func(c int, seed float64) *val {
		v := &val{shape: []int{1, c, T, h, w}, data: make([]float32, c*T*h*w), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(math.Sin(seed + float64(i)*0.37))
		}
		return v
	}
	for _, offsetsFirst := range []bool{false, true} {
		x, y := mk(2, 1), mk(1, 2)
		sx, sy := s2dByHandOrder(x, offsetsFirst), s2dByHandOrder(y, offsetsFirst)
		const n = 8 * T / 2 * h / 2 * w / 2 // [1, 8, 2, 2, 2]
		target := &val{shape: []int{1, 8, T / 2, h / 2, w / 2}, data: make([]float32, n), format: precision.F32}
		for i := range n {
			oc, cell := i/(n/8), i%(n/8)
			mean := (sx[(2*oc)*(n/8)+cell] + sx[(2*oc+1)*(n/8)+cell]) / 2
			target.data[i] = sy[i] + mean
		}
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.channelShortcut(target, []*val{x, y})
		if v == nil {
			t.Fatalf("offsets first %v: not explained", offsetsFirst)
		}
		if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
			t.Errorf("offsets first %v: rel-RMS %g", offsetsFirst, e)
		}
	}
}

// s2dByHand folds a video map [1, C, T, H, W] into [1, C·8, T/2, H/2,
// W/2], channel c·8 + st·4 + sh·2 + sw, by hand.
func s2dByHand(v *val) []float32 { return s2dByHandOrder(v, false) }

// s2dByHandOrder is s2dByHand, with offsetsFirst channel
// (st·4 + sh·2 + sw)·C + c.
func s2dByHandOrder(v *val, offsetsFirst bool) []float32 {
	c, T, h, w := v.shape[1], v.shape[2], v.shape[3], v.shape[4]
	out := make([]float32, len(v.data))
	for ch := range c {
		for f := range T {
			for y := range h {
				for x := range w {
					off := (f%2)*4 + (y%2)*2 + x%2
					oc := ch*8 + off
					if offsetsFirst {
						oc = off*c + ch
					}
					out[((oc*T/2+f/2)*h/2+y/2)*w/2+x/2] = v.data[((ch*T+f)*h+y)*w+x]
				}
			}
		}
	}
	return out
}

// TestVideoShortcutPadded: the Wan 2.2 VAE's AvgDown3D on a clip of 3
// frames, by hand: one zero frame in front (whole pairs of frames), the
// frames and cells folded 2×2×2 into the channels, each two channels
// averaged; read as the shortcut alone, its own module's output.
func TestVideoShortcutPadded(t *testing.T) {
	const c, T, h, w = 2, 3, 4, 4
	x := &val{shape: []int{1, c, T, h, w}, data: make([]float32, c*T*h*w), format: precision.F32}
	for i := range x.data {
		x.data[i] = float32(math.Sin(0.5 + float64(i)*0.37))
	}
	padded := &val{shape: []int{1, c, T + 1, h, w}, data: make([]float32, c*(T+1)*h*w), format: precision.F32}
	for ch := range c {
		copy(padded.data[(ch*(T+1)+1)*h*w:(ch+1)*(T+1)*h*w], x.data[ch*T*h*w:(ch+1)*T*h*w])
	}
	sp := s2dByHand(padded)
	n := len(sp) / 2 // [1, 8, 2, 2, 2]
	target := &val{shape: []int{1, c * 4, (T + 1) / 2, h / 2, w / 2}, data: make([]float32, n), format: precision.F32}
	per := n / (c * 4)
	for i := range n {
		oc, cell := i/per, i%per
		target.data[i] = (sp[(2*oc)*per+cell] + sp[(2*oc+1)*per+cell]) / 2
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.channelShortcut(target, []*val{x})
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}

// TestChannelShortcutOffsetsFirst: HunyuanImage's VAE upsampler by hand:
// out[c, 2i+r1, 2j+r2] = h[(2·r1+r2)·C + c, i, j] + x[((2·r1+r2)·C + c)/2,
// i, j] (each channel's offsets outermost, not pixel_shuffle's c·4 +
// offset; the input's channels each repeated twice) is read as the
// convolution's output moved as the shortcut is, plus the shortcut.
func TestChannelShortcutOffsetsFirst(t *testing.T) {
	const co, ci, h, w = 2, 4, 2, 3
	mk := func(c int, seed float64) *val {
		v := &val{shape: []int{1, c, h, w}, data: make([]float32, c*h*w), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(math.Sin(seed + float64(i)*0.61))
		}
		return v
	}
	x, conv := mk(ci, 0.4), mk(4*co, 1.3)
	target := &val{shape: []int{1, co, 2 * h, 2 * w}, data: make([]float32, co*4*h*w), format: precision.F32}
	for c := range co {
		for i := range h {
			for j := range w {
				for r1 := range 2 {
					for r2 := range 2 {
						k := (2*r1+r2)*co + c
						target.data[(c*2*h+2*i+r1)*2*w+2*j+r2] = conv.data[(k*h+i)*w+j] + x.data[((k/2)*h+i)*w+j]
					}
				}
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.channelShortcut(target, []*val{x, conv})
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}

// TestVideoShortcutUp: HunyuanVideo 1.5's upsampler by hand: a
// convolution's output h [1, C·8, T, H, W] unfolded 2×2×2 into frames and
// cells (channel (st·4 + sh·2 + sw)·C + c), plus the input x [1, Cx, T,
// H, W] with each channel repeated C·8/Cx times and unfolded the same
// way, is read as h moved as the shortcut is, plus the shortcut.
func TestVideoShortcutUp(t *testing.T) {
	const c, cx, T, h, w = 2, 4, 2, 2, 3
	rng := rand.New(rand.NewPCG(6, 3))
	x, conv := randVal(rng, 1, cx, T, h, w), randVal(rng, 1, 8*c, T, h, w)
	r := 8 * c / cx
	target := &val{shape: []int{1, c, 2 * T, 2 * h, 2 * w}, data: make([]float32, 8*c*T*h*w), format: precision.F32}
	for ch := range c {
		for f := range 2 * T {
			for y := range 2 * h {
				for z := range 2 * w {
					off := (f%2)*4 + (y%2)*2 + z%2
					k := off*c + ch // the packed channel
					at := func(v *val, kc int) float32 { return v.data[((kc*T+f/2)*h+y/2)*w+z/2] }
					target.data[((ch*2*T+f)*2*h+y)*2*w+z] = at(conv, k) + at(x, k/r)
				}
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.channelShortcut(target, []*val{x, conv})
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}

// TestVideoShortcutUpCut: LTX-2's upsampler by hand on a clip of two
// frames: the convolution's output h [1, C·8, 2, H, W] unfolded 2×2×2 into
// frames and cells (channel c·8 + offset), plus the input x [1, 8, 2, H,
// W] unfolded the same way and its one channel tiled C times, both with
// the first frame cut, is read as h moved as the shortcut is, plus it.
func TestVideoShortcutUpCut(t *testing.T) {
	const c, T, h, w = 2, 2, 2, 2
	rng := rand.New(rand.NewPCG(6, 4))
	x, conv := randVal(rng, 1, 8, T, h, w), randVal(rng, 1, 8*c, T, h, w)
	at := func(v *val, kc, f, y, z int) float32 { return v.data[((kc*T+f/2)*h+y/2)*w+z/2] }
	const to = 2*T - 1
	target := &val{shape: []int{1, c, to, 2 * h, 2 * w}, data: make([]float32, c*to*4*h*w), format: precision.F32}
	for ch := range c {
		for f := range to {
			for y := range 2 * h {
				for z := range 2 * w {
					ff := f + 1 // the first unfolded frame cut
					off := (ff%2)*4 + (y%2)*2 + z%2
					target.data[((ch*to+f)*2*h+y)*2*w+z] = at(conv, ch*8+off, ff, y, z) + at(x, off, ff, y, z)
				}
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.channelShortcut(target, []*val{x, conv})
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}
