package precision

import (
	"errors"
	"math"
	"testing"
)

func TestULPDistance(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	bf := BF16ToF32
	hf := F16ToF32
	f32 := math.Float32frombits
	cases := []struct {
		name string
		f    Format
		a, b float32
		want uint64
	}{
		{"bf16 equal", BF16, 1, 1, 0},
		{"bf16 +0 -0", BF16, 0, negZero, 0},
		{"bf16 adjacent", BF16, 1, bf(0x3F81), 1},
		{"bf16 across binade", BF16, bf(0x3F7F), bf(0x3F81), 2},
		{"bf16 symmetric", BF16, bf(0x3F81), 1, 1},
		{"bf16 smallest subnormals across zero", BF16, bf(0x0001), bf(0x8001), 2},
		{"bf16 max to Inf", BF16, bf(0x7F7F), inf, 1},
		{"bf16 -1 to 1", BF16, -1, 1, 2 * 0x3F80},
		{"bf16 -Inf to Inf", BF16, -inf, inf, 2 * 0x7F80},
		{"bf16 NaN", BF16, nan, 1, ULPNaN},
		{"bf16 NaN both", BF16, nan, nan, ULPNaN},
		{"f16 adjacent", F16, 1, hf(0x3C01), 1},
		{"f16 max to Inf", F16, 65504, inf, 1},
		{"f16 subnormal to zero", F16, hf(0x0003), negZero, 3},
		{"f16 -2^-24 to 2^-24", F16, -0x1p-24, 0x1p-24, 2},
		{"f32 adjacent", F32, 1, f32(0x3F800001), 1},
		{"f32 +0 -0", F32, negZero, 0, 0},
		{"f32 bf16 step", F32, 1, bf(0x3F81), 1 << 16},
		{"f32 NaN", F32, 1, nan, ULPNaN},
		{"f32 -max to max", F32, -math.MaxFloat32, math.MaxFloat32, 2 * 0x7F7FFFFF},
		{"f64 f32 step", F64, 1, f32(0x3F800001), 1 << 29},
		{"f64 -Inf to Inf", F64, -inf, inf, 2 * 0x7FF0000000000000},
		// Not representable: rounded first, so 1 and 1+2^-10 are one bf16.
		{"bf16 rounds first", BF16, 1, 1 + 0x1p-10, 0},
	}
	for _, c := range cases {
		if got := ULPDistance(c.f, c.a, c.b); got != c.want {
			t.Errorf("%s: ULPDistance(%v, %g, %g) = %d, want %d", c.name, c.f, c.a, c.b, got, c.want)
		}
	}
}

// TestULPAdjacentEverywhere walks every bf16 and f16 value upward: each
// step is exactly one ULP, including through zero and into Inf.
func TestULPAdjacentEverywhere(t *testing.T) {
	for _, nf := range []struct {
		f     Format
		widen func(uint16) float32
		inf   uint16
	}{{BF16, BF16ToF32, 0x7F80}, {F16, F16ToF32, 0x7C00}} {
		// -Inf, ..., -min, -0 (skipped: same point as +0), +0, +min, ..., +Inf
		var seq []float32
		for h := 0x8000 | nf.inf; h > 0x8000; h-- {
			seq = append(seq, nf.widen(h))
		}
		for h := uint16(0); h <= nf.inf; h++ {
			seq = append(seq, nf.widen(h))
		}
		for i := 1; i < len(seq); i++ {
			if d := ULPDistance(nf.f, seq[i-1], seq[i]); d != 1 {
				t.Fatalf("%v: %g to %g is %d ULPs, want 1", nf.f, seq[i-1], seq[i], d)
			}
		}
		if d := ULPDistance(nf.f, seq[0], seq[len(seq)-1]); d != uint64(len(seq)-1) {
			t.Fatalf("%v: -Inf to Inf is %d, want %d", nf.f, d, len(seq)-1)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Format
	}{{"bf16", BF16}, {"bfloat16", BF16}, {"F16", F16}, {"half", F16}, {"float32", F32}, {"fp32", F32}, {"double", F64}, {" f64 ", F64}} {
		got, err := ParseFormat(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if back, err := ParseFormat(got.String()); err != nil || back != got {
			t.Errorf("ParseFormat(%v.String()) = %v, %v", got, back, err)
		}
	}
	if _, err := ParseFormat("int8"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("ParseFormat(int8) error = %v, want ErrUnknownFormat", err)
	}
	if Format(0).Valid() || Format(0).String() != "Format(0)" {
		t.Error("zero Format should be invalid")
	}
	if BF16.Round(1.00390625) != 1 || F16.Round(65520) != float32(math.Inf(1)) || F32.Round(0.1) != 0.1 || F64.Round(0.1) != 0.1 {
		t.Error("Format.Round disagrees with the per-format functions")
	}
	if !BF16.Representable(1.5) || BF16.Representable(1+0x1p-10) || !F16.Representable(float32(math.NaN())) {
		t.Error("Representable wrong")
	}
}

func TestBitExactAndScores(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	if !BitExact(BF16, 0, negZero) || BitExact(BF16, nan, nan) || !BitExact(BF16, 1, 1+0x1p-10) || BitExact(F32, 1, 1+0x1p-10) {
		t.Error("BitExact wrong")
	}
	ours := []float32{1, 2, 3, nan}
	ref := []float32{1, 2, 4, nan}
	if got, err := ExactFraction(F32, ours, ref); err != nil || got != 0.5 {
		t.Errorf("ExactFraction = %v, %v; want 0.5", got, err)
	}
	// sqrt(1 / (1+4+16)): the NaN pair adds nothing.
	if got, err := RelRMS(F32, ours, ref); err != nil || math.Abs(got-math.Sqrt(1.0/21)) > 1e-15 {
		t.Errorf("RelRMS = %v, %v", got, err)
	}
	if got, _ := RelRMS(F32, []float32{1, nan}, []float32{1, 2}); !math.IsInf(got, 1) {
		t.Errorf("RelRMS with a one-sided NaN = %v, want +Inf", got)
	}
	if got, _ := RelRMS(F32, []float32{0, 0}, []float32{0, 0}); got != 0 {
		t.Errorf("RelRMS of zeros = %v, want 0", got)
	}
	if got, _ := RelRMS(F32, []float32{1, 0}, []float32{0, 0}); !math.IsInf(got, 1) {
		t.Errorf("RelRMS against zero reference = %v, want +Inf", got)
	}
	if _, err := RelRMS(F32, []float32{1}, nil); err == nil {
		t.Error("RelRMS of mismatched lengths should fail")
	}
	if _, err := ExactFraction(Format(9), ours, ref); err == nil {
		t.Error("ExactFraction in an invalid format should fail")
	}
}
