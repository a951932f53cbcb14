package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// fourierMixed explains t as the real part of the 2-D Fourier transform
// of a value of its shape over the last two axes (positions and channels
// of [B, S, D]: FNet's token mixing, torch.fft.fftn(x, dim=(1, 2)).real).
// One of glue's late forms.
func (s *synth) fourierMixed(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.reshapedFrom {
		return nil
	}
	// the transform's first entry of each matrix is the matrix's sum: a
	// value whose sums are not t's is not tried
	n := t.shape[len(t.shape)-2] * t.shape[len(t.shape)-1]
	dc := func(v *val) bool {
		for m := 0; m < len(v.data); m += n {
			var sum, abs float64
			for _, x := range v.data[m : m+n] {
				sum, abs = sum+float64(x), abs+math.Abs(float64(x))
			}
			if math.Abs(sum-float64(t.data[m])) > 1e-2*abs+1e-6 {
				return false
			}
		}
		return true
	}
	var cands []*expr
	for _, v := range vals {
		if v.opaque || v.data == nil || v.param || !slices.Equal(v.shape, t.shape) || !dc(v) {
			continue
		}
		cands = append(cands, &expr{op: program.OpFFT2Real, args: []*val{v}, out: t.format, label: "the real part of the 2-D Fourier transform of " + v.origin + " over its last two axes"})
	}
	v, _ := s.best(t, cands)
	return v
}
