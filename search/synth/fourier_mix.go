package synth

import (
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
	var cands []*expr
	for _, v := range vals {
		if v.opaque || v.data == nil || v.param || !slices.Equal(v.shape, t.shape) {
			continue
		}
		cands = append(cands, &expr{op: program.OpFFT2Real, args: []*val{v}, out: t.format, label: "the real part of the 2-D Fourier transform of " + v.origin + " over its last two axes"})
	}
	v, _ := s.best(t, cands)
	return v
}
