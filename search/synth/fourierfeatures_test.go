package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestFourierFeatures: Mochi's Fourier features by hand ([x, sin(w·x'),
// cos(w·x')] over the channels, x' each channel twice, w = 2⁶·2π and
// 2⁷·2π in f32) are read with their frequencies; a frequency that is no
// power of two times 2π, π or 1 is not.
func TestFourierFeatures(t *testing.T) {
	const c, n = 2, 12
	x := &val{shape: []int{1, c, 3, 4}, data: make([]float32, c*n), format: precision.F32}
	for i := range x.data {
		x.data[i] = float32(math.Sin(float64(i)*1.7 + 0.2))
	}
	features := func(freqs []float32) *val {
		k := len(freqs)
		out := &val{shape: []int{1, c * (1 + 2*k), 3, 4}, format: precision.F32}
		out.data = append(out.data, x.data...)
		for _, f := range []func(float64) float64{math.Sin, math.Cos} {
			for ch := range c {
				for _, w := range freqs {
					for _, v := range x.data[ch*n : (ch+1)*n] {
						out.data = append(out.data, float32(f(float64(w*v))))
					}
				}
			}
		}
		return out
	}
	twoPi := float32(2 * math.Pi)
	target := features([]float32{64 * twoPi, 128 * twoPi})
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.fitFourierFeatures(x, target)
	if v == nil {
		t.Fatal("not read")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
	if !strings.Contains(v.from.label, "[402.12387 804.24774]") {
		t.Errorf("frequencies: %s", v.from.label)
	}
	if v := s.fitFourierFeatures(x, features([]float32{3.3})); v != nil {
		t.Errorf("a frequency of 3.3: read as %s", v.from.label)
	}
}

// TestFourierProjectionRounded: a Gaussian Fourier projection of the
// timestep run in bf16 (x[:, None]·W[None, :]·2·π, then cos and sin, as
// Dance Diffusion's UNet1D embeds t) rounds the product x·W to bf16
// before the scale: read with that rounding it is bit-exact, where the
// products in f32 come only within the format's tolerance.
func TestFourierProjectionRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 1))
	const n, f = 3, 8
	x := roundedVal(&val{shape: []int{n}, data: []float32{0.93, 0.61, 0.27}}, precision.BF16)
	w := roundedVal(randVal(rng, f), precision.BF16)
	want := make([]float32, 0, n*2*f)
	angles := make([]float32, 0, n*f)
	for _, xv := range x.data {
		for _, wv := range w.data {
			a := precision.BF16.Round(precision.BF16.Round(xv*wv) * float32(2*math.Pi))
			angles = append(angles, a)
		}
	}
	for r := range n {
		for _, fn := range []func(float64) float64{math.Cos, math.Sin} {
			for _, a := range angles[r*f : (r+1)*f] {
				want = append(want, float32(fn(float64(a))))
			}
		}
	}
	s, _, target := planted(t, precision.BF16, []int{n, 2 * f}, want, x, w)
	got := s.fitFourier(x, w, target)
	explainedWithin(t, got, target)
	bitExact(t, got, target)
}
