package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestConv3DTimePadding: a (3, 1, 1) causal convolution by hand, its two
// past frames zeros or copies of the first frame (a video VAE's
// convolution that repeats frame 0 inside the module holding the
// weight), is read with the padding it has.
func TestConv3DTimePadding(t *testing.T) {
	const c, o, T, h, w, kt = 2, 3, 4, 2, 3, 3
	rng := rand.New(rand.NewPCG(5, 1))
	x, wt, bias := randVal(rng, 1, c, T, h, w), randVal(rng, o, c, kt, 1, 1), randVal(rng, o)
	for _, edge := range []bool{false, true} {
		frame := func(ch, f, p int) float64 { // the padded clip's frame f (kt-1 frames in front)
			f -= kt - 1
			if f < 0 {
				if !edge {
					return 0
				}
				f = 0
			}
			return float64(x.data[(ch*T+f)*h*w+p])
		}
		target := &val{shape: []int{1, o, T, h, w}, data: make([]float32, o*T*h*w), format: precision.F32}
		for oc := range o {
			for f := range T {
				for p := range h * w {
					sum := float64(bias.data[oc])
					for ch := range c {
						for k := range kt {
							sum += float64(wt.data[(oc*c+ch)*kt+k]) * frame(ch, f+k, p)
						}
					}
					target.data[(oc*T+f)*h*w+p] = float32(sum)
				}
			}
		}
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.fitConv3D(x, []*val{wt, bias}, target)
		if v == nil {
			t.Fatalf("edge %v: not explained", edge)
		}
		if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
			t.Errorf("edge %v: rel-RMS %g", edge, e)
		}
	}
}

// TestConv3DModulePast: EasyAnimate's causal convolution by hand, called
// twice: the first call's clip padded with two copies of its first frame,
// the second call's joined after the last two frames the first call
// convolved (kept on the module). The second call is read with that
// past; without the first, it is not.
func TestConv3DModulePast(t *testing.T) {
	const c, o, h, w, kt = 2, 3, 2, 2, 3
	rng := rand.New(rand.NewPCG(5, 2))
	wt, bias := randVal(rng, o, c, kt, 1, 1), randVal(rng, o)
	x0, x1 := randVal(rng, 1, c, 1, h, w), randVal(rng, 1, c, 4, h, w)
	// conv of a clip given as frames (each [c, h·w]), stride 1, no padding
	conv := func(frames [][]float32) *val {
		T := len(frames) - kt + 1
		y := &val{shape: []int{1, o, T, h, w}, data: make([]float32, o*T*h*w), format: precision.F32}
		for oc := range o {
			for f := range T {
				for p := range h * w {
					sum := float64(bias.data[oc])
					for ch := range c {
						for k := range kt {
							sum += float64(wt.data[(oc*c+ch)*kt+k]) * float64(frames[f+k][ch*h*w+p])
						}
					}
					y.data[(oc*T+f)*h*w+p] = float32(sum)
				}
			}
		}
		return y
	}
	frame := func(x *val, f int) []float32 {
		T := x.shape[2]
		out := make([]float32, 0, c*h*w)
		for ch := range c {
			out = append(out, x.data[(ch*T+f)*h*w:(ch*T+f+1)*h*w]...)
		}
		return out
	}
	f0 := frame(x0, 0)
	y0 := conv([][]float32{f0, f0, f0})
	y1 := conv([][]float32{f0, f0, frame(x1, 0), frame(x1, 1), frame(x1, 2), frame(x1, 3)})

	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if s.convPast("m", x1, []*val{wt, bias}, y1) != nil {
		t.Fatal("a past read before the module's first call")
	}
	if s.fitConv3DOf("m", x0, []*val{wt, bias}, y0) == nil {
		t.Fatal("the first call not explained")
	}
	v := s.convPast("m", x1, []*val{wt, bias}, y1)
	if v == nil {
		t.Fatal("the second call not explained")
	}
	if e := relRMS(precision.F32, v.data, y1.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}

// TestConv3DReflectSpace: LTX-2's decoder convolution by hand, a (3, 3, 3)
// kernel over a clip reflect-padded by one cell in space and not in time
// (its frames padded before the call), is read as reflect padding, then
// the convolution.
func TestConv3DReflectSpace(t *testing.T) {
	const c, o, T, h, w, k = 2, 2, 4, 3, 3, 3
	rng := rand.New(rand.NewPCG(5, 3))
	x, wt := randVal(rng, 1, c, T, h, w), randVal(rng, o, c, k, k, k)
	reflect := func(i, n int) int {
		if i < 0 {
			return -i
		}
		if i >= n {
			return 2*(n-1) - i
		}
		return i
	}
	to := T - k + 1
	target := &val{shape: []int{1, o, to, h, w}, data: make([]float32, o*to*h*w), format: precision.F32}
	for oc := range o {
		for f := range to {
			for y := range h {
				for z := range w {
					var sum float64
					for ch := range c {
						for kf := range k {
							for ky := range k {
								for kz := range k {
									xi := ((ch*T+f+kf)*h+reflect(y+ky-1, h))*w + reflect(z+kz-1, w)
									sum += float64(wt.data[(((oc*c+ch)*k+kf)*k+ky)*k+kz]) * float64(x.data[xi])
								}
							}
						}
					}
					target.data[((oc*to+f)*h+y)*w+z] = float32(sum)
				}
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32), relConsts: map[string]*val{}}
	if s.fitConv3D(x, []*val{wt}, target) != nil {
		t.Fatal("read zero-padded: the test does not need the mode")
	}
	v := s.fitModePaddedConv(x, []*val{wt}, target)
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}

// TestSqueezedConv: a 2-D convolution run on a video of one frame, its
// frame axis squeezed out and put back (x.squeeze(2), zero padded, conv,
// unsqueeze(2): QwenImage 2.1's VAE), its weight of four axes at
// boundaries of five, is read as that convolution.
func TestSqueezedConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 1))
	const c, o, h, w, k = 2, 3, 5, 4, 3
	x := randVal(rng, 1, c, 1, h, w)
	wt := randVal(rng, o, c, k, k)
	target := &val{shape: []int{1, o, 1, h, w}, data: make([]float32, o*h*w), format: precision.F32}
	for oc := range o {
		for y := range h {
			for z := range w {
				var sum float64
				for ch := range c {
					for ky := range k {
						for kz := range k {
							yy, zz := y+ky-1, z+kz-1
							if yy < 0 || yy >= h || zz < 0 || zz >= w {
								continue
							}
							sum += float64(wt.data[((oc*c+ch)*k+ky)*k+kz]) * float64(x.data[(ch*h+yy)*w+zz])
						}
					}
				}
				target.data[(oc*h+y)*w+z] = float32(sum)
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32), relConsts: map[string]*val{}}
	v := s.leafConv("m", []*val{x}, []*val{wt}, target)
	if v == nil {
		t.Fatal("not explained")
	}
	if !slices.Equal(v.shape, target.shape) {
		t.Errorf("shape %v, want %v", v.shape, target.shape)
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}
