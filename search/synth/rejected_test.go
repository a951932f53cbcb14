package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestRejected: exclusive self-attention's output, a − c_h·(a·v̂)v̂, is
// explained from the attention output a [B, L, H, D] and the values v
// (heads first, [B, Hkv, L, D], each kv head serving H/Hkv query heads):
// with c = tanh of a parameter of H strengths, and with c = 1 and no
// parameter. Without v in the scope nothing explains it.
func TestRejected(t *testing.T) {
	const bs, l, h, hk, d = 1, 8, 4, 2, 16
	rng := rand.New(rand.NewPCG(11, 13))
	randn := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	a, v := randn(bs*l*h*d), randn(bs*hk*l*d)
	alpha := []float32{0.3, -0.7, 1.1, 0.05}
	xsa := func(strength func(int) float64) []float32 {
		out := make([]float32, len(a))
		for li := range l {
			for hi := range h {
				row := (li*h + hi) * d
				vrow := ((hi/(h/hk))*l + li) * d // v is [B, Hkv, L, D]
				var n2, p float64
				for i := range d {
					n2 += float64(v[vrow+i]) * float64(v[vrow+i])
				}
				n := math.Sqrt(n2)
				for i := range d {
					p += float64(a[row+i]) * float64(v[vrow+i]) / n
				}
				for i := range d {
					out[row+i] = float32(float64(a[row+i]) - strength(hi)*p*float64(v[vrow+i])/n)
				}
			}
		}
		return out
	}
	shape := []int{bs, l, h, d}
	for _, tc := range []struct {
		name     string
		strength func(int) float64
		param    bool
		withV    bool
		want     bool
	}{
		{"tanh of learned strengths", func(i int) float64 { return math.Tanh(float64(alpha[i])) }, true, true, true},
		{"full strength", func(int) float64 { return 1 }, false, true, true},
		{"no values in the scope", func(int) float64 { return 1 }, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := xsa(tc.strength)
			vals := []*val{{shape: shape, data: a, format: precision.F32, origin: "a"}}
			if tc.withV {
				vals = append(vals, &val{shape: []int{bs, hk, l, d}, data: v, format: precision.F32, origin: "v"})
			}
			if tc.param {
				vals = append(vals, &val{shape: []int{h}, data: alpha, format: precision.F32, origin: "alpha", param: true})
			}
			s, sc, tv := planted(t, precision.F32, shape, target, vals...)
			got := s.rejected(tv, sc.vals)
			if !tc.want {
				if got != nil {
					t.Errorf("explained by %v without the values", got.from.label)
				}
				return
			}
			if got == nil {
				t.Fatal("not explained")
			}
			if got.from == nil || got.from.op != program.OpSub {
				t.Errorf("explained by %v, want a − c·(a·v̂)v̂", got.from)
			}
			if e := relRMS(precision.F32, got.data, target); e > 1e-6 {
				t.Errorf("rel-RMS %.3g", e)
			}
		})
	}
}
