package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// conv1dRef is torch's conv1d of x [1, C, L] by w [O, C/g, k] in g
// groups, stride and padding as given, the bias added, sums in f64.
func conv1dRef(x, w, b *val, groups, stride, pad int) ([]float32, int) {
	l, o, cg, k := x.shape[2], w.shape[0], w.shape[1], w.shape[2]
	lt := (l+2*pad-k)/stride + 1
	og := o / groups
	out := make([]float32, o*lt)
	for oc := range o {
		q := oc / og
		for j := range lt {
			acc := float64(b.data[oc])
			for ic := range cg {
				for tap := range k {
					if p := j*stride + tap - pad; p >= 0 && p < l {
						acc += float64(x.data[(q*cg+ic)*l+p]) * float64(w.data[(oc*cg+ic)*k+tap])
					}
				}
			}
			out[oc*lt+j] = float32(acc)
		}
	}
	return out, lt
}

// TestGroupedConv1D: 1-D convolutions in g groups that are neither 1 nor
// depthwise (a positional convolution of 4 groups with an even kernel,
// padded k/2 so the output is one longer; a strided one of 2 groups) are
// found with the group count read off the weight's shape.
func TestGroupedConv1D(t *testing.T) {
	cases := []struct {
		c, o, l, k, groups, stride, pad int
	}{
		{8, 8, 11, 4, 4, 1, 2},
		{6, 4, 20, 3, 2, 2, 1},
	}
	for _, tc := range cases {
		rng := rand.New(rand.NewPCG(3, uint64(tc.groups)))
		x, w, b := randomVal(rng, "x", 1, tc.c, tc.l), randomVal(rng, "w", tc.o, tc.c/tc.groups, tc.k), randomVal(rng, "b", tc.o)
		w.param, b.param = true, true
		want, lt := conv1dRef(x, w, b, tc.groups, tc.stride, tc.pad)
		s, _, target := planted(t, precision.F32, []int{1, tc.o, lt}, want)
		got := s.fitConv1D(x, []*val{w, b}, target)
		if got == nil {
			t.Errorf("%+v: not explained", tc)
			continue
		}
		if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
			t.Errorf("%+v: rel-RMS %.3g (%s)", tc, e, got.from.label)
		}
	}
}
