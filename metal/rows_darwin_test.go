//go:build darwin

package metal

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// TestRowsAgainstCPU runs Norm, Linear and Attention on the Metal device
// and compares them with the CPU backend. Written for a Mac; it has not
// been run (README.md). Norm and Linear must be bit-exact: their kernels
// are f32 adds, multiplies and one division (and integer f64 emulation)
// in the CPU's order, checked on the host by package kernels. Attention
// goes through Metal's precise::exp (and tanh for a soft-cap), which are
// not correctly rounded, so it is compared within a bound and its exact
// fraction is logged.
func TestRowsAgainstCPU(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Skipf("no Metal device: %v", err)
	}
	ref := cpu.New(0)
	r := rand.New(rand.NewPCG(7, 8))
	data := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(1 + r.NormFloat64()*scale)
		}
		return v
	}
	type pair struct{ c, g exec.Tensor }
	up := func(v []float32, s []int, f precision.Format) pair {
		c, err := ref.Upload(v, s, f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := b.Upload(v, s, f)
		if err != nil {
			t.Fatal(err)
		}
		return pair{c, g}
	}
	none := pair{}
	bf, f32 := precision.BF16, precision.F32
	type op func(bk exec.Backend, args ...exec.Tensor) (exec.Tensor, error)
	type tc struct {
		name  string
		exact bool
		run   op
		args  []pair
		out   precision.Format
		vmax  float64 // attention: the largest |v|, for the bound
		flash bool    // the flash kernel: within kernels.FlashBound(spec)
		spec  exec.Spec
	}
	var cases []tc
	x := up(data(64*3072, 2), []int{64, 3072}, bf)
	gm, bt := up(data(3072, 0.1), []int{3072}, bf), up(data(3072, 0.1), []int{3072}, bf)
	for _, kind := range []exec.NormKind{exec.NormLayer, exec.NormRMS} {
		for _, s := range []exec.Spec{exec.Out(bf), exec.Out(f32), {Out: bf, Round: exec.RoundNormalized}, exec.Composed(bf)} {
			p := exec.NormParams{Kind: kind, Eps: 1e-6}
			cases = append(cases, tc{fmt.Sprintf("norm %v %v", kind, s), true, func(bk exec.Backend, a ...exec.Tensor) (exec.Tensor, error) {
				return bk.Norm(a[0], a[1], a[2], p, s)
			}, []pair{x, gm, bt}, s.Out, 0, false, s})
		}
	}
	for _, s := range []exec.Spec{{Out: bf, Math: exec.MathL2}, {Out: bf, Math: exec.MathL2 | exec.MathScalarF32}} {
		p := exec.NormParams{Kind: exec.NormRMS, Eps: 1e-12}
		cases = append(cases, tc{fmt.Sprintf("norm rms as F.normalize %v", s), true, func(bk exec.Backend, a ...exec.Tensor) (exec.Tensor, error) {
			return bk.Norm(a[0], a[1], a[2], p, s)
		}, []pair{x, gm, bt}, s.Out, 0, false, s})
	}
	w := up(data(1536*3072, 0.02), []int{1536, 3072}, bf)
	lb := up(data(1536, 0.1), []int{1536}, bf)
	for _, s := range []exec.Spec{exec.Out(bf), exec.Out(f32), {Out: bf, Round: exec.RoundBeforeBias}} {
		cases = append(cases, tc{"linear " + s.String(), true, func(bk exec.Backend, a ...exec.Tensor) (exec.Tensor, error) {
			return bk.Linear(a[0], a[1], a[2], s)
		}, []pair{x, w, lb}, s.Out, 0, false, s})
	}
	q := up(data(2*256*8*128, 1), []int{2, 256, 8 * 128}, bf)
	k := up(data(2*256*2*128, 1), []int{2, 256, 2 * 128}, bf)
	vd := data(2*256*2*128, 1)
	v := up(vd, []int{2, 256, 2 * 128}, bf)
	vmax := 0.0
	for _, e := range vd {
		vmax = max(vmax, math.Abs(float64(precision.BF16.Round(e))))
	}
	for _, c := range []struct {
		p exec.AttentionParams
		s exec.Spec
	}{
		{exec.AttentionParams{Heads: 8, KVHeads: 2}, exec.Out(bf)},
		{exec.AttentionParams{Heads: 8, KVHeads: 2, Mask: exec.MaskCausal}, exec.Out(f32)},
		{exec.AttentionParams{Heads: 8, KVHeads: 2, Mask: exec.MaskCausal, Window: 32, Softcap: 20}, exec.Composed(bf)},
		{exec.AttentionParams{Heads: 8, KVHeads: 2, ALiBi: true}, exec.Spec{Out: bf, Round: exec.RoundScores | exec.RoundWeights}},
	} {
		// The exact kernel, forced; then the backend's own choice, which is
		// the flash kernel where kernels.Flash allows it (bf16 inputs here).
		exact := func(bk exec.Backend, a ...exec.Tensor) (exec.Tensor, error) {
			if mb, ok := bk.(*Backend); ok {
				mb.SetExactAttention(true)
				defer mb.SetExactAttention(false)
			}
			return bk.Attention(a[0], a[1], a[2], nil, nil, nil, c.p, c.s)
		}
		cases = append(cases, tc{fmt.Sprintf("attention exact %+v %v", c.p, c.s), false, exact, []pair{q, k, v}, c.s.Out, vmax, false, c.s})
		if c.s.Round&(exec.RoundProbs|exec.RoundEach|exec.RoundAccum) == 0 && c.s.Math&exec.MathTensorCore == 0 {
			cases = append(cases, tc{fmt.Sprintf("attention flash %+v %v", c.p, c.s), false, func(bk exec.Backend, a ...exec.Tensor) (exec.Tensor, error) {
				return bk.Attention(a[0], a[1], a[2], nil, nil, nil, c.p, c.s)
			}, []pair{q, k, v}, c.s.Out, vmax, true, c.s})
		}
	}
	for _, c := range cases {
		ca, ga := make([]exec.Tensor, len(c.args)), make([]exec.Tensor, len(c.args))
		for i, a := range c.args {
			if a != none {
				ca[i], ga[i] = a.c, a.g
			}
		}
		ct, err := c.run(ref, ca...)
		if err != nil {
			t.Fatal(err)
		}
		gt, err := c.run(b, ga...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, _ := ref.Download(ct)
		got, err := b.Download(gt)
		if err != nil {
			t.Fatal(err)
		}
		if c.flash {
			rel, err := precision.RelRMS(c.out, got, want)
			if err != nil {
				t.Fatal(err)
			}
			ex, _ := precision.ExactFraction(c.out, got, want)
			t.Logf("%s: %d values, %.6f bit-exact, rel-RMS %.3e (bound %.0e)", c.name, len(want), ex, rel, kernels.FlashBound(c.spec))
			if !(rel <= kernels.FlashBound(c.spec)) {
				t.Errorf("%s: rel-RMS %.3e against the CPU, bound %.0e", c.name, rel, kernels.FlashBound(c.spec))
			}
			continue
		}
		// Attention's bound: exp a few f32 ulps off moves each output by a
		// few ulps of the largest |v| before the final rounding, so 4 f32
		// ulps of vmax plus one ulp of the output format.
		ulp := math.Ldexp(1, -7)
		if c.out == f32 {
			ulp = math.Ldexp(1, -23)
		}
		bad, exact := 0, 0
		for i := range want {
			if got[i] == want[i] || got[i] != got[i] && want[i] != want[i] {
				exact++
				continue
			}
			d := math.Abs(float64(got[i]) - float64(want[i]))
			if c.exact || !(d <= 4*math.Ldexp(c.vmax, -23)+ulp*math.Abs(float64(want[i]))) {
				if bad < 3 {
					t.Errorf("%s: [%d] = %v, CPU %v", c.name, i, got[i], want[i])
				}
				bad++
			}
		}
		t.Logf("%s: %d values, %.6f bit-exact, %d outside the bound", c.name, len(want), float64(exact)/float64(len(want)), bad)
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", c.name, bad, len(want))
		}
	}
}
