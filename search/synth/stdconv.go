package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// stdConvEpsilons are the ε a weight standardisation adds to each
// filter's variance (timm's StdConv2d 1e-6, its ResNetV2 stems' 1e-8,
// torch's batch norm default 1e-5).
var stdConvEpsilons = [...]float64{1e-8, 1e-6, 1e-5}

// fitStdConv2D explains a convolution whose weight is standardised when
// it is called (BiT's and ViT-hybrid's StdConv2d: each filter w[o] less
// its mean, over √(its biased variance + ε), F.batch_norm of the weight
// in training mode), padded symmetrically or, for 'same' padding
// (StdConv2dSame, TF's SAME), with the odd cell at the end (zeros joined
// on the right and below, then an unpadded convolution). The
// standardisation is a layer norm without parameters over each filter's
// C/g·kh·kw entries, in f32.
func (s *synth) fitStdConv2D(x, w, bias, t *val) *val {
	groups := convGroups(x, w)
	if groups == 0 || len(x.shape) != 4 || len(t.shape) != 4 || t.shape[0] != x.shape[0] || t.shape[1] != w.shape[0] {
		return nil
	}
	o, kh, kw := w.shape[0], w.shape[2], w.shape[3]
	flat := s.reshape(w, []int{o, w.shape[1] * kh * kw})
	if flat == nil {
		return nil
	}
	var weights []*val
	for _, eps := range stdConvEpsilons {
		n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormLayer, Eps: float32(eps)}},
			args: []*val{flat, nil, nil}, out: w.format, label: fmt.Sprintf("each filter standardised, ε=%g", eps)})
		if ws := s.reshape(n, slices.Clone(w.shape)); ws != nil {
			weights = append(weights, ws)
		}
	}
	var cands []*expr
	for _, ws := range weights {
		cands = append(cands, s.stdConvGeometries(x, ws, bias, t, ws.from.args[0].from.label)...)
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// stdConvGeometries are the convolutions of x by ws that give t's size:
// every stride up to the kernel (at least 2) with symmetric pads, and 'same' padding
// with the odd cell at the end; label names the weight's making.
func (s *synth) stdConvGeometries(x, ws, bias, t *val, label string) []*expr {
	groups := convGroups(x, ws)
	kh, kw := ws.shape[2], ws.shape[3]
	var cands []*expr
	for stride := 1; stride <= max(kh, kw, 2); stride++ { // a 1x1 of stride 2: a downsampling shortcut
		// symmetric pads
		for pad := 0; pad <= max(kh, kw)/2; pad++ {
			if (x.shape[2]+2*pad-kh)/stride+1 == t.shape[2] && (x.shape[3]+2*pad-kw)/stride+1 == t.shape[3] && x.shape[2]+2*pad >= kh {
				cands = append(cands, &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: pad, Groups: groups, Stride: stride}},
					args: []*val{x, ws, bias}, out: t.format, label: fmt.Sprintf("conv %dx%d stride %d pad %d, %s", kh, kw, stride, pad, label)})
			}
		}
		// 'same': the odd padding cell at the end
		padded := s.samePadded(x, kh, kw, stride)
		if padded == nil || (padded.shape[2]-kh)/stride+1 != t.shape[2] || (padded.shape[3]-kw)/stride+1 != t.shape[3] {
			continue
		}
		cands = append(cands, &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Groups: groups, Stride: stride}},
			args: []*val{padded, ws, bias}, out: t.format, label: fmt.Sprintf("conv %dx%d stride %d, same padding, %s", kh, kw, stride, label)})
	}
	return cands
}

// fitScaledStdConv2D explains a convolution whose weight is standardised
// per filter and then scaled by a learned gain and a constant when it is
// called (NFNet's ScaledStdConv2d: F.batch_norm of the weight with γ =
// gain·scale, scale = γ_act·fan_in^−½, a constant the trace does not
// hold): params are w, a bias [O] and the gain (O entries). The constant
// is read off the output by least squares against the unit-scale
// convolution (the convolution is linear in it), snapped to a simple
// number where one is as good; the standardisation in f32, times gain·scale
// (an f32 product), rounded to w's format.
func (s *synth) fitScaledStdConv2D(x *val, params []*val, t *val) *val {
	if len(params) != 3 || len(x.shape) != 4 || len(t.shape) != 4 || len(params[0].shape) != 4 || t.shape[1] != params[0].shape[0] {
		return nil
	}
	w := params[0]
	o := w.shape[0]
	var bias, gain *val
	for _, p := range params[1:] {
		switch {
		case len(p.shape) == 1 && p.shape[0] == o && bias == nil:
			bias = p
		case p.numel() == o && gain == nil:
			gain = p
		}
	}
	if gain == nil || convGroups(x, w) == 0 {
		return nil
	}
	gainCol := s.reshape(gain, []int{o, 1})
	flat := s.reshape(w, []int{o, w.numel() / o})
	if gainCol == nil || flat == nil {
		return nil
	}
	// the unit-scale convolutions without the bias: the geometry, ε and
	// scale whose fit leaves the least residual
	var best *expr
	var bestNorm *val
	bestScale, bestRes := 0.0, math.Inf(1)
	for _, eps := range stdConvEpsilons {
		n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormLayer, Eps: float32(eps)}},
			args: []*val{flat, nil, nil}, out: precision.F32, label: fmt.Sprintf("each filter standardised, ε=%g", eps)})
		ng := s.reshape(s.derive(&expr{op: program.OpMul, args: []*val{n, gainCol}, out: precision.F32, label: "times the gain"}), slices.Clone(w.shape))
		if ng == nil {
			continue
		}
		for _, e := range s.stdConvGeometries(x, ng, nil, t, n.from.label) {
			y0 := s.derive(e)
			if y0 == nil {
				continue
			}
			hw := t.shape[2] * t.shape[3]
			var yy, yt float64
			for i, yv := range y0.data {
				r := float64(t.data[i])
				if bias != nil {
					r -= float64(bias.data[(i/hw)%o])
				}
				yy, yt = yy+float64(yv)*float64(yv), yt+float64(yv)*r
			}
			if yy == 0 {
				continue
			}
			sc := yt / yy
			var res float64
			for i, yv := range y0.data {
				r := float64(t.data[i])
				if bias != nil {
					r -= float64(bias.data[(i/hw)%o])
				}
				d := r - sc*float64(yv)
				res += d * d
			}
			if res < bestRes {
				best, bestNorm, bestScale, bestRes = e, n, sc, res
			}
		}
	}
	if best == nil || !(bestScale > 0) {
		return nil
	}
	var cands []*expr
	for _, sc := range snapped(bestScale) {
		g := s.derive(&expr{op: program.OpMul, args: []*val{gainCol, s.constant(sc)}, out: precision.F32, label: fmt.Sprintf("gain·%g", sc)})
		ws := s.reshape(s.derive(&expr{op: program.OpMul, args: []*val{bestNorm, g}, out: w.format, label: "the scaled standardised weight"}), slices.Clone(w.shape))
		if ws == nil {
			continue
		}
		args := slices.Clone(best.args)
		args[1], args[2] = ws, bias
		cands = append(cands, &expr{op: program.OpConv2D, attrs: best.attrs, args: args, out: t.format,
			label: fmt.Sprintf("%s, times gain·%g", best.label, sc)})
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// samePadded is x [B, C, H, W] zero-padded for a 'same' convolution of a
// kh×kw kernel at stride: along each axis max((⌈n/stride⌉ − 1)·stride +
// k − n, 0) cells, half of them (rounded down) before and the rest after;
// nil where that is no padding at all or splits evenly (a symmetric pad).
func (s *synth) samePadded(x *val, kh, kw, stride int) *val {
	pads := func(n, k int) (int, int) {
		total := max((n+stride-1)/stride*stride-stride+k-n, 0)
		return total / 2, total - total/2
	}
	th, bh := pads(x.shape[2], kh)
	lw, rw := pads(x.shape[3], kw)
	if th == bh && lw == rw {
		return nil
	}
	zeros := func(shape []int) *val {
		return s.zeros(shape, x.format, fmt.Sprintf("zeros%v", shape), "zeros of a 'same' padding (made from the request's shape)")
	}
	cur := x
	join := func(ax, before, after int) {
		if cur == nil {
			return
		}
		parts := []*val{cur}
		if before > 0 {
			shape := slices.Clone(cur.shape)
			shape[ax] = before
			parts = append([]*val{zeros(shape)}, parts...)
		}
		if after > 0 {
			shape := slices.Clone(cur.shape)
			shape[ax] = after
			parts = append(parts, zeros(shape))
		}
		if len(parts) > 1 {
			cur = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: x.format, label: "zeros joined ('same' padding)"})
		}
	}
	join(2, th, bh)
	join(3, lw, rw)
	return cur
}
