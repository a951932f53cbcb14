package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestStdConv plants ViT-hybrid's stem: x [1, 2, 8, 8] through a 3×3
// convolution of stride 2 with 'same' padding (one cell in all: a zero
// row and column at the end, none before) by weights standardised per filter (ε
// 1e-8), computed in float64. Explained as a standardised convolution
// with same padding; the same convolution by the raw weights is not.
func TestStdConv(t *testing.T) {
	const c, n, o, k, stride = 2, 8, 3, 3, 2
	rng := rand.New(rand.NewPCG(8, 8))
	x, w := randVal(rng, 1, c, n, n), randVal(rng, o, c, k, k)
	w.param = true
	std := make([]float64, len(w.data))
	const per = c * k * k
	for f := range o {
		var mean, v float64
		for _, e := range w.data[f*per : (f+1)*per] {
			mean += float64(e) / float64(per)
		}
		for _, e := range w.data[f*per : (f+1)*per] {
			v += (float64(e) - mean) * (float64(e) - mean) / float64(per)
		}
		for i, e := range w.data[f*per : (f+1)*per] {
			std[f*per+i] = (float64(e) - mean) / math.Sqrt(v+1e-8)
		}
	}
	const m = n / stride // 'same': 4 outputs, (4 − 1)·2 + 3 − 8 = 1 padding cell, after
	conv := func(weights func(i int) float64) []float32 {
		out := make([]float32, o*m*m)
		for f := range o {
			for i := range m {
				for j := range m {
					var sum float64
					for ch := range c {
						for a := range k {
							for b := range k {
								r, q := i*stride+a, j*stride+b // nothing before; the cell after is zero
								if r < 0 || q < 0 || r >= n || q >= n {
									continue
								}
								sum += float64(x.data[(ch*n+r)*n+q]) * weights(((f*c+ch)*k+a)*k+b)
							}
						}
					}
					out[(f*m+i)*m+j] = float32(sum)
				}
			}
		}
		return out
	}
	for _, raw := range []bool{false, true} {
		want := conv(func(i int) float64 { return std[i] })
		if raw {
			want = conv(func(i int) float64 { return float64(w.data[i]) })
		}
		s, _, target := planted(t, precision.F32, []int{1, o, m, m}, want)
		v := s.fitStdConv2D(x, w, nil, target)
		if raw {
			if v != nil {
				t.Errorf("a plain convolution explained as a standardised one: %s", describe(v))
			}
			continue
		}
		explainedWithin(t, v, target)
		if v != nil && !strings.Contains(describe(v), "standardised") {
			t.Errorf("explained as %s", describe(v))
		}
	}
}
