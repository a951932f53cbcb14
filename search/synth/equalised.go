package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// equalised is a weight multiplied, in its own format, by 1/√fan_in, the
// fan-in read off its shape (every axis but the first): the equalised
// learning rate of StyleGAN-derived layers, whose forward computes
// F.conv2d(x, self.weight * self.scale) or F.linear(x, self.weight *
// self.scale) with self.scale = 1/√fan_in (a Python float, multiplied in
// f32 and rounded to the weight's format, as torch's scalar ops do).
func (s *synth) equalised(w *val) *val {
	if len(w.shape) < 2 || w.shape[0] == 0 {
		return nil
	}
	fanIn := w.numel() / w.shape[0]
	c := s.constant(1 / math.Sqrt(float64(fanIn)))
	c.origin = fmt.Sprintf("1/√%d", fanIn)
	return s.derive(&expr{op: program.OpMul, args: []*val{w, c}, out: w.format, label: fmt.Sprintf("weight·1/√%d (its fan-in)", fanIn)})
}

// equalisedLinear explains t as a linear by a matrix parameter of the
// call scaled by 1/√fan_in (equalised), a vector parameter as bias or
// none: projected's reading with the weight scaled in the forward.
func (s *synth) equalisedLinear(t *val, vals []*val) *val {
	if len(t.shape) == 0 {
		return nil
	}
	var mats, vecs []*val
	out := t.shape[len(t.shape)-1]
	for _, v := range vals {
		switch {
		case !v.param:
		case len(v.shape) == 2 && (v.shape[0] == out || v.shape[1] == out):
			if w := s.equalised(v); w != nil {
				mats = append(mats, w)
			}
		case len(v.shape) == 1:
			vecs = append(vecs, v)
		}
	}
	if len(mats) == 0 {
		return nil
	}
	for _, x := range vals {
		if x.param || x.opaque || len(x.shape) != len(t.shape) || !slices.Equal(x.shape[:len(x.shape)-1], t.shape[:len(t.shape)-1]) {
			continue
		}
		if v := s.linearByParams(x, mats, vecs, out, t); v != nil {
			return v
		}
	}
	return nil
}

// ownConv explains t as a convolution by a weight the call holds itself
// in a forward that also calls modules of its own (a conv layer whose
// activation is a child module), the weight as stored or equalised, a
// vector parameter of the call as bias or none, the geometry read as a
// leaf convolution's (leafConv); then the same after a fixed filter of
// its own (blurredConv).
func (s *synth) ownConv(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 4 {
		return nil
	}
	var weights, vecs []*val
	for _, v := range vals {
		switch {
		case !v.param:
		case len(v.shape) == 4 && v.shape[0] == t.shape[1]:
			weights = append(weights, v)
		case len(v.shape) == 1 && v.shape[0] == t.shape[1]:
			vecs = append(vecs, v)
		}
	}
	if len(weights) == 0 {
		return nil
	}
	var xs []*val
	for _, x := range vals {
		if !x.param && !x.opaque && len(x.shape) == 4 && x.shape[0] == t.shape[0] && x.shape[1]%weights[0].shape[1] == 0 && !x.integral() {
			xs = append(xs, x)
		}
	}
	// plain, then filtered by taps of simple ratios, then by any taps (a
	// least-squares filter absorbs a weight's scale, so the equalised
	// weight is tried first there)
	for pass := range 3 {
		for _, w := range weights {
			ws := []*val{w, s.equalised(w)}
			if pass > 0 {
				ws[0], ws[1] = ws[1], ws[0]
			}
			for _, wv := range ws {
				if wv == nil {
					continue
				}
				for _, b := range append([]*val{nil}, vecs...) {
					params := []*val{wv}
					if b != nil {
						params = append(params, b)
					}
					for _, x := range xs {
						var v *val
						if pass == 0 {
							v = s.leafConv(sc.module, []*val{x}, params, t)
						} else {
							v = s.blurredConv(x, params, t, pass == 2)
						}
						if v != nil {
							return v
						}
					}
				}
			}
		}
	}
	return nil
}

// blurMaxEntries bounds the image a fixed filter is fitted on: the fit
// runs one convolution per tap of each geometry it tries.
const blurMaxEntries = 1 << 22

// blurredConv explains t as a convolution by params (a weight, a bias or
// none) of x first filtered, channel by channel, by a fixed k×k kernel
// that no parameter holds (a buffer: StyleGAN's [1, 3, 3, 1] blur before
// a strided conv, upfirdn2d as a depthwise F.conv2d). The kernel is read
// off the values: the target is linear in its taps, so for each geometry
// (kernel size, its padding, the conv's stride and padding) whose sizes
// give t's, the taps are solved by least squares and snapped to the
// simplest common denominator that keeps them (raw: as solved); the
// convolution after it is then read as a leaf's (leafConv), which must
// reproduce t.
func (s *synth) blurredConv(x *val, params []*val, t *val, raw bool) *val {
	w := params[0]
	if len(w.shape) != 4 || x.shape[1] != w.shape[1] || x.numel() > blurMaxEntries {
		return nil
	}
	rest := t // t without the bias: what the taps must make
	if len(params) > 1 {
		rest = s.derive(&expr{op: program.OpSub, args: []*val{t, s.reshape(params[1], []int{1, t.shape[1], 1, 1})}, out: precision.F32})
		if rest == nil {
			return nil
		}
	}
	H, W, kh, kw := x.shape[2], x.shape[3], w.shape[2], w.shape[3]
	for k := 2; k <= 5; k++ {
		for pb := 0; pb < k; pb++ {
			hb, wb := H+2*pb-k+1, W+2*pb-k+1
			for st := 1; st <= 2; st++ {
				for _, pc := range []int{0, kh / 2} {
					if hb+2*pc < kh || wb+2*pc < kw || (hb+2*pc-kh)/st+1 != t.shape[2] || (wb+2*pc-kw)/st+1 != t.shape[3] {
						continue
					}
					taps := s.blurTaps(x, w, rest, k, pb, program.ConvParams{Pad: pc, Stride: st})
					if taps == nil {
						continue
					}
					kern := snappedTaps(taps)
					if raw {
						kern = taps
					}
					if kern == nil {
						continue
					}
					if v := s.blurred(x, kern, k, pb, params, t); v != nil {
						return v
					}
				}
			}
		}
	}
	return nil
}

// blurTaps solves rest ≈ Σ K[a,b]·conv(shift_ab(x), w; cp) for the k×k
// taps K (x padded by pb on every side, each channel shifted alike);
// nil where the system is singular.
func (s *synth) blurTaps(x, w, rest *val, k, pb int, cp program.ConvParams) []float32 {
	c := x.shape[1]
	bases := make([]*val, k*k)
	for tap := range bases {
		one := &val{shape: []int{c, 1, k, k}, data: make([]float32, c*k*k), format: precision.F32}
		for ch := range c {
			one.data[ch*k*k+tap] = 1
		}
		shifted := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: pb, Groups: c}}, args: []*val{x, one, nil}, out: precision.F32})
		bases[tap] = s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: cp}, args: []*val{shifted, w, nil}, out: precision.F32})
		if bases[tap] == nil || bases[tap].numel() != rest.numel() {
			return nil
		}
	}
	return solveTaps(rest, k*k, func(e, j int) float64 { return float64(bases[j].data[e]) })
}

// snappedTaps are taps as whole numbers over the smallest denominator
// d ≤ 1024 that holds every tap within a hundredth of 1/d (a binomial
// blur's n/64), nil where none does or the taps are all 0.
func snappedTaps(taps []float32) []float32 {
	big := 0.0
	for _, v := range taps {
		big = max(big, math.Abs(float64(v)))
	}
	if big == 0 {
		return nil
	}
	for d := 1; d <= 1024; d++ {
		ok := true
		for _, v := range taps {
			q := float64(v) * float64(d)
			if math.Abs(q-math.Round(q)) > 0.01 || math.Abs(q) > 1e6 {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		out := make([]float32, len(taps))
		for i, v := range taps {
			out[i] = float32(math.Round(float64(v)*float64(d)) / float64(d))
		}
		return out
	}
	return nil
}

// blurred is x filtered channel by channel by the k×k kernel (a constant
// in x's format, as the forward casts its buffer), padded pb, then the
// convolution by params read as a leaf's; nil where it does not
// reproduce t.
func (s *synth) blurred(x *val, kern []float32, k, pb int, params []*val, t *val) *val {
	c := x.shape[1]
	kc := &val{shape: []int{c, 1, k, k}, data: make([]float32, c*k*k), format: x.format, origin: fmt.Sprintf("filter%dx%d", k, k)}
	for ch := range c {
		for i, v := range kern {
			kc.data[ch*k*k+i] = x.format.Round(v)
		}
	}
	dw := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: pb, Groups: c}}, args: []*val{x, kc, nil}, out: x.format,
		label: fmt.Sprintf("a fixed %dx%d filter per channel, padded %d", k, k, pb)})
	if dw == nil {
		return nil
	}
	v := s.leafConv("", []*val{dw}, params, t)
	if v == nil {
		return nil
	}
	s.em.constant(kc, fmt.Sprintf("a fixed %dx%d filter applied to each channel before a convolution (a buffer of the module: no parameter holds it), its taps %v read off the values", k, k, kern[:min(len(kern), 16)]))
	return v
}

// biasedPiecewise explains t as a piecewise activation (fitPiecewise) of
// x plus a vector parameter b along its channels: axis 1 of an image or
// a sequence whose axis 1 has b's length, else the last axis (StyleGAN's
// FusedLeakyReLU: leaky_relu(x + bias, 0.2)·√2).
func (s *synth) biasedPiecewise(x, b, t *val) *val {
	n := b.shape[0]
	shape := make([]int, len(x.shape))
	for i := range shape {
		shape[i] = 1
	}
	switch {
	case len(x.shape) >= 3 && x.shape[1] == n:
		shape[1] = n
	case len(x.shape) >= 1 && x.shape[len(x.shape)-1] == n:
		shape[len(shape)-1] = n
	default:
		return nil
	}
	xb := s.derive(&expr{op: program.OpAdd, args: []*val{x, s.reshape(b, shape)}, out: x.format, label: "x + bias"})
	if xb == nil {
		return nil
	}
	return s.fitPiecewise(xb, t)
}
