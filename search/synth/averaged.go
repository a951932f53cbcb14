package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// averaged explains t as the mean of three or four values of its shape,
// or an activation split at zero of that mean (fitPiecewise), stacked
// and averaged as torch.stack(xs).mean(0) does (a vocoder's
// parallel residual blocks of several kernel sizes, averaged: HiFi-GAN's
// multi-receptive-field fusion): each value given a leading axis, joined
// along it, then its mean taken, in f32 and rounded once. The sets are
// screened on the host (their sum over k within the format's tolerance)
// before one expression is made. Tried once every other form failed.
func (s *synth) averaged(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	if len(ops) < 3 || t.integral() {
		return nil
	}
	tol := tolerance(t.format)
	mean := make([]float32, len(t.data))
	for _, set := range append(subsets(len(ops), 3), subsets(len(ops), 4)...) {
		for e := range mean {
			var sum float64
			for _, i := range set {
				sum += float64(ops[i].data[e])
			}
			mean[e] = float32(sum / float64(len(set)))
		}
		plain := relRMS(t.format, mean, t.data) <= 2*tol
		if !plain && !twoSlopes(mean, t.data, 2*tol) {
			continue
		}
		lead := append([]int{1}, t.shape...)
		var parts []*val
		for _, i := range set {
			if r := s.reshape(ops[i], lead); r != nil {
				parts = append(parts, r)
			}
		}
		if len(parts) != len(set) {
			continue
		}
		stacked := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: parts, out: t.format, label: "stacked"})
		if stacked == nil {
			continue
		}
		cand := &expr{op: program.OpMean, attrs: program.Attrs{Axis: 0}, args: []*val{stacked, nil}, out: t.format, label: fmt.Sprintf("mean of %d", len(set))}
		if plain {
			if w, _ := s.best(t, []*expr{cand}); w != nil {
				return w
			}
			continue
		}
		// the mean then an activation split at zero, called as a
		// function (F.leaky_relu(mean, 0.1) before the next upsampler)
		if m := s.derive(cand); m != nil {
			if w := s.piecewiseGlue(m, t); w != nil {
				return w
			}
		}
	}
	return nil
}

// twoSlopes reports whether t is a·m where m > 0 and b·m elsewhere (a
// leaky ReLU of m, a and b fitted by least squares on each side) within
// tol of t's size.
func twoSlopes(m, t []float32, tol float64) bool {
	var pmm, pmt, nmm, nmt, tt float64
	for i, x := range m {
		v, w := float64(x), float64(t[i])
		tt += w * w
		if x > 0 {
			pmm, pmt = pmm+v*v, pmt+v*w
		} else {
			nmm, nmt = nmm+v*v, nmt+v*w
		}
	}
	if pmm == 0 || nmm == 0 || tt == 0 {
		return false
	}
	a, b := pmt/pmm, nmt/nmm
	var res float64
	for i, x := range m {
		k := b
		if x > 0 {
			k = a
		}
		e := float64(t[i]) - k*float64(x)
		res += e * e
	}
	return res <= tol*tol*tt
}
