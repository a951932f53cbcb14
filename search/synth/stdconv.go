package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
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
	for stride := 1; stride <= max(kh, kw); stride++ {
		for _, ws := range weights {
			label := ws.from.args[0].from.label
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
		z := &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: x.format, origin: fmt.Sprintf("zeros%v", shape)}
		s.em.constant(z, "zeros of a 'same' padding (made from the request's shape)")
		return z
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
