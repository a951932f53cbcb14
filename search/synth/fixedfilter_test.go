package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// reflect101 is index i of a sequence of n cells reflected about its
// edge cells (torch's reflect padding).
func reflect101(i, n int) int {
	for i < 0 || i >= n {
		if i < 0 {
			i = -i
		}
		if i >= n {
			i = 2*(n-1) - i
		}
	}
	return i
}

// TestFixedFilters: a kernel held as a buffer, applied channel by
// channel after reflect padding, strided down (Downsample1d) or as a
// transposed convolution up (Upsample1d), is read off the values: a
// [1, 3, 3, 1]/8 kernel in f32, and Dance Diffusion's 8-tap cubic
// kernel in 256ths in bf16, where a shorter kernel or the taps as solved
// come within the format's tolerance and only the buffer's own taps
// reproduce every rounding.
func TestFixedFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 7))
	cubic := []float64{-3, -9, 29, 111, 111, 29, -9, -3}
	for i := range cubic {
		cubic[i] /= 256
	}
	for _, tc := range []struct {
		name   string
		f      precision.Format
		kern   []float64
		c, l   int
		padIn  int // the reflect padding before the strided or transposed convolution
		padOut int // the transposed convolution's own padding
	}{
		{"eighths f32", precision.F32, []float64{1.0 / 8, 3.0 / 8, 3.0 / 8, 1.0 / 8}, 2, 16, 1, 3},
		{"cubic bf16", precision.BF16, cubic, 8, 32, 3, 7},
	} {
		k := len(tc.kern)
		t.Run(tc.name+" down", func(t *testing.T) {
			x := roundedVal(randVal(rng, 1, tc.c, tc.l), tc.f)
			lo := (tc.l+2*tc.padIn-k)/2 + 1
			want := make([]float32, tc.c*lo)
			for c := range tc.c {
				for i := range lo {
					var sum float64
					for j, w := range tc.kern {
						sum += w * float64(x.data[c*tc.l+reflect101(2*i+j-tc.padIn, tc.l)])
					}
					want[c*lo+i] = float32(sum)
				}
			}
			s, _, target := planted(t, tc.f, []int{1, tc.c, lo}, want, x)
			explainedWithin(t, s.fixedFilter1D(x, target), target)
			if tc.f != precision.F32 {
				bitExact(t, s.fixedFilter1D(x, target), target)
			}
		})
		t.Run(tc.name+" up", func(t *testing.T) {
			x := roundedVal(randVal(rng, 1, tc.c, tc.l/2), tc.f)
			lp := tc.l/2 + 2*(tc.padIn-1) // reflect-padded by padIn − 1
			lo := (lp-1)*2 + k - 2*tc.padOut
			want := make([]float32, tc.c*lo)
			for c := range tc.c {
				for o := range lo {
					var sum float64
					for j, w := range tc.kern {
						if m := o + tc.padOut - j; m >= 0 && m%2 == 0 && m/2 < lp {
							sum += 2 * w * float64(x.data[c*tc.l/2+reflect101(m/2-(tc.padIn-1), tc.l/2)])
						}
					}
					want[c*lo+o] = float32(sum)
				}
			}
			s, _, target := planted(t, tc.f, []int{1, tc.c, lo}, want, x)
			explainedWithin(t, s.fixedUpFilter1D(x, target), target)
			if tc.f != precision.F32 {
				bitExact(t, s.fixedUpFilter1D(x, target), target)
			}
		})
	}
}

// roundedVal is v with its entries rounded to f and stored as f.
func roundedVal(v *val, f precision.Format) *val {
	for i, x := range v.data {
		v.data[i] = f.Round(x)
	}
	v.format = f
	return v
}

// bitExact fails unless got reproduces target bit for bit (in a narrow
// format, a filter's own taps do; a kernel only near them does not).
func bitExact(t *testing.T, got, target *val) {
	t.Helper()
	if e := errOf(got, target); e != 0 {
		t.Errorf("explained to rel-RMS %.3g, not exactly", e)
	}
}

// TestPaddedMove: F.pad(x.permute(0, 2, 1), (2, 0), mode="replicate") of
// x [1, 5, 3] whose rows repeat (a gather of whole rows cannot tell them
// apart) is read as the move, then the padding.
func TestPaddedMove(t *testing.T) {
	x := &val{shape: []int{1, 5, 3}, format: precision.F32, origin: "x",
		data: []float32{0.5, -1.5, 2.25, 0.5, -1.5, 2.25, 0.75, 1.5, -0.25, 0.5, -1.5, 2.25, 3, 0.125, -2}}
	want := make([]float32, 0, 3*7)
	for c := range 3 {
		for i := -2; i < 5; i++ {
			want = append(want, x.data[max(i, 0)*3+c])
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, 3, 7}, want, x)
	got := s.paddedMove(target, []*val{x})
	explainedWithin(t, got, target)
	if s.gatheredEntries(target, []*val{x}) != nil {
		t.Error("rows that repeat were read as a gather of whole rows: the test shows nothing")
	}
}

// TestFixedFilter2D: a binomial 5×5 kernel held as a buffer, applied to
// each channel of a map, zero padded by 2 and strided by 2 (LTX-2's
// latent upsampler's blur before it strides down), is read off the
// values, and the expression reproduces the map.
func TestFixedFilter2D(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 2))
	const c, h, w, k, st, p = 2, 9, 12, 5, 2, 2
	binom := []float64{1, 4, 6, 4, 1}
	x := randVal(rng, 1, c, h, w)
	ho, wo := (h+2*p-k)/st+1, (w+2*p-k)/st+1
	want := make([]float32, c*ho*wo)
	for ch := range c {
		for i := range ho {
			for j := range wo {
				var sum float64
				for u := range k {
					for v := range k {
						y, z := st*i+u-p, st*j+v-p
						if y >= 0 && y < h && z >= 0 && z < w {
							sum += binom[u] * binom[v] / 256 * float64(x.data[(ch*h+y)*w+z])
						}
					}
				}
				want[(ch*ho+i)*wo+j] = float32(sum)
			}
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, c, ho, wo}, want, x)
	v := s.fixedFilter2D(x, target)
	explainedWithin(t, v, target)
	if v != nil {
		if kern := v.from.args[1].data[:k*k]; kern[0] != 1.0/256 || kern[12] != 36.0/256 {
			t.Errorf("taps %v, want the binomial's in 256ths", kern)
		}
	}
}
