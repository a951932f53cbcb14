package precision

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestMaskSized(t *testing.T) {
	inf := float32(math.Inf(1))
	f32min := -math.MaxFloat32
	cases := []struct {
		f    Format
		x    float32
		want bool
	}{
		{F32, float32(f32min), true},
		{F32, 0x1p127, true},
		{F32, -0x1p127, true},
		{F32, math.Nextafter32(0x1p127, 0), false},
		{F32, float32(f32min / 2), false}, // just under 2^127
		{F32, -1e30, false},
		{F32, -1e9, false},
		{F32, inf, true},
		{F32, -inf, true},
		{F32, float32(math.NaN()), false},
		{F64, float32(f32min), true},
		{BF16, RoundBF16(float32(f32min)), true}, // bf16's finfo.min
		{BF16, -1e4, false},
		{F16, -65504, true}, // f16's finfo.min
		{F16, 32768, true},
		{F16, 32752, false},
		{F16, -1e4, false},
	}
	for _, c := range cases {
		if got := MaskSized(c.f, c.x); got != c.want {
			t.Errorf("MaskSized(%v, %g) = %v, want %v", c.f, c.x, got, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	fmin := float32(-math.MaxFloat32)
	cases := []struct {
		name string
		f    Format
		a, b float32
		want Pair
	}{
		{"ordinary", F32, 1, 2, Ordinary},
		{"large but ordinary", F32, 1e30, -1e30, Ordinary},
		{"both finfo.min", F32, fmin, fmin, MaskMatch},
		{"finfo.min against -Inf", F32, fmin, -inf, MaskMatch},
		{"f32 finfo.min against bf16's", BF16, fmin, RoundBF16(fmin), MaskMatch},
		{"masks of opposite sign", F32, fmin, inf, Mismatch},
		{"mask against an ordinary value", F32, fmin, 0.25, Mismatch},
		{"ordinary value against a mask", F32, 0, fmin, Mismatch},
		{"+Inf against a finite value", F32, inf, 1, Mismatch},
		{"both NaN", F32, nan, nan, BothNaN},
		{"NaN against a mask", F32, nan, fmin, Mismatch},
		{"NaN against a value", F32, 1, nan, Mismatch},
		{"f16 finfo.min", F16, -65504, -65504, MaskMatch},
		{"f16 mask against zero", F16, -65504, 0, Mismatch},
	}
	for _, c := range cases {
		if got := Classify(c.f, c.a, c.b); got != c.want {
			t.Errorf("%s: Classify(%v, %g, %g) = %v, want %v", c.name, c.f, c.a, c.b, got, c.want)
		}
	}
}

// TestRelRMSMaskHidesNothing is the planted case: an attention bias whose
// masked entries are finfo.min on both sides and whose small entries are
// wrong. Over all entries the rel-RMS would be about 1e-39.
func TestRelRMSMaskHidesNothing(t *testing.T) {
	fmin := float32(-math.MaxFloat32)
	ref := []float32{0.25, 0, 0, fmin, fmin, 0.6, 0, fmin}
	ours := []float32{0, 0, 0, fmin, fmin, 0, 0, fmin}
	// ordinary pairs: differences 0.25 and 0.6 against references 0.25 and 0.6
	want := 1.0
	for _, f := range []Format{F32, BF16} {
		got, err := RelRMS(f, ours, ref)
		if err != nil || math.Abs(got-want) > 1e-15 {
			t.Errorf("%v: RelRMS = %v, %v; want %v", f, got, err, want)
		}
		var s Sums
		s.Add(f, ours, ref)
		if s.Masked != 3 || s.Mismatched != 0 || s.NaNs != 0 {
			t.Errorf("%v: Sums counts %+v, want 3 masked", f, s)
		}
	}
	// A mask where the reference has a value fails whatever the rest.
	ours[0] = fmin
	if got, _ := RelRMS(F32, ours, ref); !math.IsInf(got, 1) {
		t.Errorf("RelRMS with a misplaced mask = %v, want +Inf", got)
	}
	// The right values with masks written another way (-Inf) match.
	fixed := []float32{0.25, 0, 0, float32(math.Inf(-1)), fmin, 0.6, 0, fmin}
	if got, _ := RelRMS(F32, fixed, ref); got != 0 {
		t.Errorf("RelRMS with -Inf for finfo.min = %v, want 0", got)
	}
}

// TestSumsUnchangedWithoutMasks: a tensor with no mask-sized value gets
// the plain formula, bit for bit.
func TestSumsUnchangedWithoutMasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ours, ref := make([]float32, 10007), make([]float32, 10007)
	var sd, sr float64
	for i := range ref {
		ref[i] = float32(rng.NormFloat64() * 1e3)
		ours[i] = ref[i] + float32(rng.NormFloat64())
		d := float64(ours[i]) - float64(ref[i])
		sd += d * d
		sr += float64(ref[i]) * float64(ref[i])
	}
	var s Sums
	s.Add(F32, ours, ref)
	if s.D2 != sd || s.R2 != sr || s.Masked != 0 || s.Mismatched != 0 {
		t.Errorf("Sums = %+v, want D2 %v R2 %v", s, sd, sr)
	}
}

func BenchmarkSumsF32(b *testing.B) {
	n := benchBytes / 8
	ours, ref := make([]float32, n), make([]float32, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range ref {
		ref[i] = float32(rng.NormFloat64())
		ours[i] = ref[i] + float32(rng.NormFloat64())*1e-3
	}
	b.SetBytes(int64(8 * n))
	for b.Loop() {
		var s Sums
		s.Add(F32, ours, ref)
	}
}

// AddRounded rounds the wide side to the format before comparing, and
// compares masks apart as Add does.
func TestAddRounded(t *testing.T) {
	min32 := -math.MaxFloat32
	cases := []struct {
		name       string
		f          Format
		ours       []float64
		ref        []float32
		d2, r2     float64
		masked     int
		mismatched int
	}{
		// 1 + 2^-10 rounds to 1 in bf16: no difference left.
		{"rounded first", BF16, []float64{1 + 0x1p-10, 2}, []float32{1, 2}, 0, 5, 0, 0},
		{"f32 keeps it", F32, []float64{1 + 0x1p-10, 2}, []float32{1, 2}, 0x1p-20, 5, 0, 0},
		{"mask matched", F32, []float64{min32, 3}, []float32{float32(min32), 4}, 1, 16, 1, 0},
		{"mask against a small value", F32, []float64{0.25, 3}, []float32{float32(min32), 3}, 0, 9, 0, 1},
		{"NaN on one side", F32, []float64{math.NaN(), 3}, []float32{1, 3}, 0, 9, 0, 1},
	}
	for _, c := range cases {
		var s Sums
		s.AddRounded(c.f, c.ours, c.ref)
		if s.D2 != c.d2 || s.R2 != c.r2 || s.Masked != c.masked || s.Mismatched != c.mismatched {
			t.Errorf("%s: got D2 %g R2 %g masked %d mismatched %d, want %g %g %d %d",
				c.name, s.D2, s.R2, s.Masked, s.Mismatched, c.d2, c.r2, c.masked, c.mismatched)
		}
	}
}
