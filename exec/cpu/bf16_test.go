package cpu

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Bit-exact bf16 emulation: each case is built so that where the rounding
// happens changes the answer, and the answer is worked out by hand.
// bf16 keeps 8 significant bits: between 1 and 2 its ulp is 2^-7.

const bf16 = precision.BF16

func TestBF16RoundingPoints(t *testing.T) {
	bk := New(2)
	one := func(v float32) exec.Tensor { return up(t, bk, bf16, []int{1}, v) }
	cases := []struct {
		name string
		run  func(s exec.Spec) (exec.Tensor, error)
		spec exec.Spec
		want float32
	}{
		// 1 + 2^-8 is a tie between 1 and 1 + 2^-7: ties to even gives 1,
		// so x·(1+s) = x when 1+s is rounded, else x·(1 + 2^-8).
		// x = 1 + 2^-6: fused: (1+2^-6)(1+2^-8) = 1 + 2^-6 + 2^-8 + 2^-14 → 1 + 2^-6 + 2^-7 (above the tie).
		{"modulate fused", func(s exec.Spec) (exec.Tensor, error) {
			return bk.Modulate(one(1+1.0/64), nil, one(1.0/256), exec.ModulateParams{PlusOne: true}, s)
		}, exec.Out(bf16), 1 + 1.0/64 + 1.0/128},
		{"modulate 1+scale rounded", func(s exec.Spec) (exec.Tensor, error) {
			return bk.Modulate(one(1+1.0/64), nil, one(1.0/256), exec.ModulateParams{PlusOne: true}, s)
		}, exec.Spec{Out: bf16, Round: exec.RoundScale}, 1 + 1.0/64},
		// x·s + shift with x = 1.5, s = 1 + 2^-7, shift = 2^-7: the product
		// 1.51171875 is a tie between 1.5078125 and 1.515625 (even), so
		// rounded it is 1.515625, + 2^-7 = 1.5234375 exactly. Fused:
		// 1.51171875 + 2^-7 = 1.51953125, a tie between 1.515625 (even) and
		// 1.5234375: 1.515625.
		{"modulate product rounded", func(s exec.Spec) (exec.Tensor, error) {
			return bk.Modulate(one(1.5), one(1.0/128), one(1+1.0/128), exec.ModulateParams{}, s)
		}, exec.Spec{Out: bf16, Round: exec.RoundProduct}, 1.5234375},
		{"modulate product fused", func(s exec.Spec) (exec.Tensor, error) {
			return bk.Modulate(one(1.5), one(1.0/128), one(1+1.0/128), exec.ModulateParams{}, s)
		}, exec.Out(bf16), 1.515625},
		// The same numbers as a gated residual x + g·y.
		{"gated composed", func(s exec.Spec) (exec.Tensor, error) {
			return bk.GatedResidual(one(1.0/128), one(1.5), one(1+1.0/128), exec.ActIdentity, s)
		}, exec.Composed(bf16), 1.5234375},
		{"gated fused", func(s exec.Spec) (exec.Tensor, error) {
			return bk.GatedResidual(one(1.0/128), one(1.5), one(1+1.0/128), exec.ActIdentity, s)
		}, exec.Out(bf16), 1.515625},
		// Linear with bias: x·w = 1 + 2^-8 (a tie → 1 when rounded first),
		// + 2^-8 → 1 + 2^-7 fused, 1 + 2^-8 → tie → 1 when rounded before bias.
		{"linear fused bias", func(s exec.Spec) (exec.Tensor, error) {
			return bk.Linear(up(t, bk, f32, []int{1, 1}, 1+1.0/256), up(t, bk, f32, []int{1, 1}, 1), up(t, bk, f32, []int{1}, 1.0/256), s)
		}, exec.Out(bf16), 1 + 1.0/128},
		{"linear rounded before bias", func(s exec.Spec) (exec.Tensor, error) {
			return bk.Linear(up(t, bk, f32, []int{1, 1}, 1+1.0/256), up(t, bk, f32, []int{1, 1}, 1), up(t, bk, f32, []int{1}, 1.0/256), s)
		}, exec.Spec{Out: bf16, Round: exec.RoundBeforeBias}, 1},
	}
	for _, c := range cases {
		got := vals(t, bk)(c.run(c.spec))
		if got[0] != c.want {
			t.Errorf("%s: %.9g, want %.9g", c.name, got[0], c.want)
		}
	}
}

// TestBF16OneRounding: a bf16 op is the f32 op rounded once, on every
// input: silu on all 65536 bf16 patterns, against exec.Activate rounded.
func TestBF16OneRounding(t *testing.T) {
	bk := New(2)
	v := make([]float32, 1<<16)
	for i := range v {
		v[i] = precision.BF16ToF32(uint16(i))
	}
	x := up(t, bk, bf16, []int{len(v)}, v...)
	for _, f := range []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActSigmoid} {
		got := vals(t, bk)(bk.Act(x, f, exec.Out(bf16)))
		want := make([]float32, len(v))
		for i, e := range v {
			want[i] = precision.RoundBF16(exec.Activate(f, e, 0))
		}
		same(t, f.String(), got, want)
	}
}

// TestRMSNormRoundNormalized: HF Llama's order. x = [1, 1, 1, 2^-7·...]:
// pick x̂ values whose rounding before ·γ changes the result.
func TestRMSNormRoundNormalized(t *testing.T) {
	bk := New(2)
	// x = [3, 4]: mean square 12.5, x̂ = [3, 4]/√12.5 = [0.848528…, 1.131370…].
	// bf16(0.848528) = 0.84765625, bf16(1.13137) = 1.1328125; γ = 3:
	// rounded first: 2.54296875 → 2.546875 (ulp 2^-6), 3.3984375 → 3.40625
	// fused: 2.545584 → 2.546875, 3.394113 → 3.390625.
	x := up(t, bk, bf16, []int{1, 2}, 3, 4)
	g := up(t, bk, bf16, []int{2}, 3, 3)
	p := exec.NormParams{Kind: exec.NormRMS}
	got := vals(t, bk)(bk.Norm(x, g, nil, p, exec.Spec{Out: bf16, Round: exec.RoundNormalized}))
	same(t, "round x̂", got, []float32{2.546875, 3.40625})
	got = vals(t, bk)(bk.Norm(x, g, nil, p, exec.Out(bf16)))
	same(t, "fused", got, []float32{2.546875, 3.390625})
}

// TestSubDivRoundOnce: Sub and Div round a − b and a / b once, which their
// compositions from Add and Mul on bf16 tensors do not.
func TestSubDivRoundOnce(t *testing.T) {
	bk := New(2)
	v := vals(t, bk)
	s := exec.Out(bf16)
	// a − b with a = 2 (bf16), b = 2^-8 + 2^-20 (f32): 2 − 2^-8 − 2^-20 is
	// just below the tie between 2 − 2^-7 and 2, so it rounds to 2 − 2^-7.
	// Add(a, Mul(b, −1)) stores −b in bf16 first (−2^-8), and 2 − 2^-8 is
	// the tie itself, which goes to 2 (even).
	a := up(t, bk, bf16, []int{1}, 2)
	b := up(t, bk, f32, []int{1}, 1.0/256+1.0/(1<<20))
	same(t, "sub", v(bk.Sub(a, b, s)), []float32{2 - 1.0/128})
	neg := up(t, bk, f32, []int{1}, -1)
	nb, err := bk.Mul(b, neg, s)
	same(t, "add(a, mul(b, −1))", v(bk.Add(a, nb, s)), []float32{2})
	if err != nil {
		t.Fatal(err)
	}
	// 7 / 3 = 2.333…, between 2.328125 and 2.34375 (ulp 2^-6): nearer the
	// first. Mul(7, Div(1, 3)) rounds 1/3 to 0.333984375 first, and
	// 7 · 0.333984375 = 2.337890625 rounds up to 2.34375.
	seven, three := up(t, bk, bf16, []int{1}, 7), up(t, bk, bf16, []int{1}, 3)
	same(t, "div", v(bk.Div(seven, three, s)), []float32{2.328125})
	third, err := bk.Div(up(t, bk, bf16, []int{1}, 1), three, s)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "1/3", v(third, nil), []float32{0.333984375})
	same(t, "mul(7, div(1, 3))", v(bk.Mul(seven, third, s)), []float32{2.34375})
	// MathRecipDiv in f32: 7 · f32(1/3) = 7 · 0x3EAAAAAB rounds to
	// 0x40155556, one ulp above the correctly rounded 7/3 (0x40155555).
	same(t, "div f32", v(bk.Div(seven, three, exec.Out(f32))), []float32{math.Float32frombits(0x40155555)})
	same(t, "div recip f32", v(bk.Div(seven, three, exec.Spec{Out: f32, Math: exec.MathRecipDiv})), []float32{math.Float32frombits(0x40155556)})
	// Broadcasting as Add's: [2, 2] − [2] and [2, 1] / [2, 2].
	m := up(t, bk, f32, []int{2, 2}, 1, 2, 3, 4)
	same(t, "sub bcast", v(bk.Sub(m, up(t, bk, f32, []int{2}, 1, 10), exec.Out(f32))), []float32{0, -8, 2, -6})
	same(t, "div bcast", v(bk.Div(up(t, bk, f32, []int{2, 1}, 12, 24), m, exec.Out(f32))), []float32{12, 6, 8, 6})
}
