package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitFourierFeatures explains a parameterless call's result t as Fourier
// features of its argument x [B, C, ...] along the channels: x itself
// (where t begins with it), then sin and cos of each channel times K
// frequencies, [x, sin(w·x'), cos(w·x')] with x' each channel repeated K
// times and w the K frequencies repeated for every channel, in f32 and
// stored in t's format (Mochi's VAE input; NeRF's positional encoding).
// Each frequency is read off the first channel's sines among the powers
// of two times 2π, π or 1, as the forward makes them in f32.
func (s *synth) fitFourierFeatures(x, t *val) *val {
	if len(x.shape) < 2 || len(x.shape) != len(t.shape) || x.numel() == 0 || x.integral() {
		return nil // an empty x (a chunk of no frames) has no channel to read
	}
	c, ct := x.shape[1], t.shape[1]
	for a := range x.shape {
		if a != 1 && x.shape[a] != t.shape[a] {
			return nil
		}
	}
	inner := x.numel() / (x.shape[0] * c) // the elements of one channel of one batch row
	with := ct > c && (ct-c)%(2*c) == 0 && slices.Equal(channelOf(t, 0, inner), channelOf(x, 0, inner))
	k := ct / (2 * c)
	if with {
		k = (ct - c) / (2 * c)
	}
	if k < 1 || !with && ct%(2*c) != 0 {
		return nil
	}
	first := 0 // t's channel of the first sine
	if with {
		first = c
	}
	freqs := make([]float32, k)
	for j := range k {
		w, ok := fourierFrequency(channelOf(x, 0, inner), channelOf(t, first+j, inner), t.format)
		if !ok {
			return nil
		}
		freqs[j] = w
	}
	xf := x
	if x.format != precision.F32 {
		xf = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{x}, out: precision.F32, label: "in f32"})
	}
	split := slices.Insert(slices.Clone(x.shape), 2, 1)
	rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: k, Axis: 2}, args: []*val{s.reshape(xf, split)}, out: precision.F32, label: fmt.Sprintf("each channel %d times", k)})
	wide := slices.Clone(x.shape)
	wide[1] = c * k
	rep = s.reshape(rep, wide)
	wshape := make([]int, len(x.shape))
	for a := range wshape {
		wshape[a] = 1
	}
	wshape[1] = c * k
	w := &val{shape: wshape, data: slices.Repeat(freqs, c), format: precision.F32, origin: fmt.Sprintf("fourier frequencies %v", freqs)}
	s.em.constant(w, fmt.Sprintf("the Fourier features' frequencies %v for each of %d channels (made in the forward)", freqs, c))
	h := s.derive(&expr{op: program.OpMul, args: []*val{rep, w}, out: precision.F32, label: "the angles"})
	sin := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSin}, args: []*val{h}, out: precision.F32, label: "sin"})
	cos := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActCos}, args: []*val{h}, out: precision.F32, label: "cos"})
	if sin == nil || cos == nil {
		return nil
	}
	parts := []*val{sin, cos}
	if with {
		parts = []*val{xf, sin, cos}
	}
	label := fmt.Sprintf("Fourier features of %d frequencies %v", k, freqs)
	cat := &expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: parts, out: t.format, label: label}
	v, ev := s.best(t, []*expr{cat})
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "fourier_features", candidates: ev}
	return v
}

// channelOf is channel ch of x's first batch row: inner elements.
func channelOf(x *val, ch, inner int) []float32 {
	return x.data[ch*inner : (ch+1)*inner]
}

// fourierFrequency finds w with sin(f32(w·x)) = s element by element,
// within f's rounding, among 2^e times f32(2π), f32(π) or 1 (e from −8
// to 16): a frequency a forward makes as a power of two times a constant.
func fourierFrequency(x, s []float32, f precision.Format) (float32, bool) {
	tol := 1e-5
	if f != precision.F32 {
		tol = 1e-2
	}
	n := min(len(x), 64)
	for _, base := range []float32{float32(2 * math.Pi), float32(math.Pi), 1} {
		for e := -8; e <= 16; e++ {
			w := float32(math.Ldexp(1, e)) * base
			ok := true
			for i := range n {
				if math.Abs(math.Sin(float64(w*x[i]))-float64(s[i])) > tol {
					ok = false
					break
				}
			}
			if ok {
				return w, true
			}
		}
	}
	return 0, false
}
