package precision

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBF16Exhaustive(t *testing.T) {
	if testing.Short() {
		t.Skip("all 2^32 f32 patterns; TestBF16Boundaries covers the edges in -short")
	}
	t.Parallel()
	bf16Format().checkAll(t)
}

func TestF16Exhaustive(t *testing.T) {
	if testing.Short() {
		t.Skip("all 2^32 f32 patterns; TestF16Boundaries covers the edges in -short")
	}
	t.Parallel()
	f16Format().checkAll(t)
}

// boundaryPatterns are the f32 patterns next to every lattice point and
// every midpoint of nf: each value, each tie, and the f32 neighbours of
// both, which covers subnormals, the largest finite value, the overflow
// threshold and zero. Midpoints of bf16 and f16 are f32 values.
func boundaryPatterns(nf narrowFormat) []uint32 {
	var us []uint32
	add := func(x float64) {
		u := math.Float32bits(float32(x))
		for _, v := range []uint32{u - 1, u, u + 1} {
			if v <= 0x7F800000 {
				us = append(us, v, v|1<<31)
			}
		}
	}
	for k, v := range nf.lat.vals {
		if k < len(nf.lat.vals)-1 || v <= math.MaxFloat32 {
			add(v)
		}
	}
	for _, m := range nf.lat.mids {
		if m <= math.MaxFloat32 {
			add(m)
		}
	}
	// Zero, Inf and NaN payloads: quiet, signalling, smallest, largest,
	// payloads that live only in the bits narrowing drops.
	us = append(us, 0, 1<<31, 0x7F800000, 0xFF800000,
		0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF,
		0x7F80FFFF, 0x7F801000, 0x7FA00000, 0x7F810000)
	return us
}

func TestBF16Boundaries(t *testing.T) {
	nf := bf16Format()
	if err := nf.checkPatterns(boundaryPatterns(nf)); err != nil {
		t.Fatal(err)
	}
}

func TestF16Boundaries(t *testing.T) {
	nf := f16Format()
	if err := nf.checkPatterns(boundaryPatterns(nf)); err != nil {
		t.Fatal(err)
	}
}

// TestSampled checks random f32 patterns against the reference, so -short
// still sees values away from the edges.
func TestSampled(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	us := make([]uint32, 1<<18)
	for i := range us {
		us[i] = rng.Uint32()
	}
	for _, nf := range []narrowFormat{bf16Format(), f16Format()} {
		if err := nf.checkPatterns(us); err != nil {
			t.Error(err)
		}
	}
}

// TestWidenAll checks every bf16 and f16 pattern: widening matches the
// format's definition, and narrowing the widened value gives the pattern
// back (NaNs come back as quiet NaNs of the same sign).
func TestWidenAll(t *testing.T) {
	for _, nf := range []narrowFormat{bf16Format(), f16Format()} {
		for h := range 1 << 16 {
			h := uint16(h)
			x := nf.widen(h)
			mag := h &^ 0x8000
			if mag > nf.expMask { // NaN
				if x == x {
					t.Fatalf("%s: NaN %#04x widened to %g", nf.name, h, x)
				}
				if err := nf.checkNaN(math.Float32bits(x), nf.bits(x)); err != nil {
					t.Fatalf("%s: round trip of %#04x: %v", nf.name, h, err)
				}
				continue
			}
			want := nf.lat.vals[mag]
			if mag == nf.expMask {
				want = math.Inf(1)
			}
			if h>>15 == 1 {
				want = -want
			}
			if float64(x) != want || math.Signbit(float64(x)) != (h>>15 == 1) {
				t.Fatalf("%s: %#04x widened to %g, want %g", nf.name, h, x, want)
			}
			if back := nf.bits(x); back != h {
				t.Fatalf("%s: %#04x -> %g -> %#04x", nf.name, h, x, back)
			}
		}
	}
}

// TestWidenSlices checks the slice widenings against the scalar ones on
// every pattern, at lengths that leave every possible unrolled tail.
func TestWidenSlices(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, nf := range []struct {
		name  string
		slice func([]float32, []uint16)
		one   func(uint16) float32
	}{{"bf16", BF16ToF32Slice, BF16ToF32}, {"f16", F16ToF32Slice, F16ToF32}} {
		for _, n := range []int{0, 1, 2, 3, 5, 7, len(src)} {
			dst := make([]float32, n+1)
			dst[n] = 42 // must survive: only len(src) elements are written
			nf.slice(dst, src[len(src)-n:])
			for i, h := range src[len(src)-n:] {
				if math.Float32bits(dst[i]) != math.Float32bits(nf.one(h)) {
					t.Fatalf("%s slice widening of %#04x = %#08x, want %#08x", nf.name, h, math.Float32bits(dst[i]), math.Float32bits(nf.one(h)))
				}
			}
			if dst[n] != 42 {
				t.Fatalf("%s slice widening wrote past len(src)", nf.name)
			}
		}
	}
}

func TestKnownValues(t *testing.T) {
	cases := []struct {
		name string
		got  uint16
		want uint16
	}{
		{"f16 1.0", F16Bits(1), 0x3C00},
		{"f16 max", F16Bits(65504), 0x7BFF},
		{"f16 65519 rounds down", F16Bits(65519), 0x7BFF},
		{"f16 65520 overflows", F16Bits(65520), 0x7C00},
		{"f16 -65520 overflows", F16Bits(-65520), 0xFC00},
		{"f16 2^-24", F16Bits(0x1p-24), 0x0001},
		{"f16 2^-25 ties to 0", F16Bits(0x1p-25), 0x0000},
		{"f16 3·2^-26 rounds up", F16Bits(0x3p-26), 0x0001},
		{"f16 2^-14 smallest normal", F16Bits(0x1p-14), 0x0400},
		{"f16 1+2^-11 ties to even 1", F16Bits(1 + 0x1p-11), 0x3C00},
		{"f16 1+3·2^-11 ties to even up", F16Bits(1 + 0x3p-11), 0x3C02},
		{"f16 -0", F16Bits(float32(math.Copysign(0, -1))), 0x8000},
		{"f16 1/3", F16Bits(1.0 / 3), 0x3555},
		{"bf16 1.0", BF16Bits(1), 0x3F80},
		{"bf16 1.00390625 ties to even 1", BF16Bits(1.00390625), 0x3F80},
		{"bf16 1.01171875 ties to even up", BF16Bits(1.01171875), 0x3F82},
		{"bf16 1.00390637 rounds up", BF16Bits(math.Float32frombits(0x3F808001)), 0x3F81},
		{"bf16 max finite", BF16Bits(math.Float32frombits(0x7F7F0000)), 0x7F7F},
		{"bf16 max f32 overflows", BF16Bits(math.MaxFloat32), 0x7F80},
		{"bf16 below overflow", BF16Bits(math.Float32frombits(0x7F7F7FFF)), 0x7F7F},
		{"bf16 smallest subnormal", BF16Bits(math.Float32frombits(0x00010000)), 0x0001},
		{"bf16 half smallest subnormal ties to 0", BF16Bits(math.Float32frombits(0x00008000)), 0x0000},
		{"bf16 -0", BF16Bits(float32(math.Copysign(0, -1))), 0x8000},
		{"bf16 -Inf", BF16Bits(float32(math.Inf(-1))), 0xFF80},
		{"bf16 quiet NaN", BF16Bits(float32(math.NaN())), 0x7FC0},
		{"bf16 signalling NaN quietened", BF16Bits(math.Float32frombits(0x7F800001)), 0x7FC0},
		{"bf16 -NaN keeps sign", BF16Bits(math.Float32frombits(0xFFC00000)), 0xFFC0},
		{"bf16 pi", BF16Bits(math.Pi), 0x4049},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %#04x, want %#04x", c.name, c.got, c.want)
		}
	}
	if F16ToF32(0x3C00) != 1 || F16ToF32(0x7BFF) != 65504 || F16ToF32(0x0001) != 0x1p-24 {
		t.Error("f16 widening of 1, 65504, 2^-24 wrong")
	}
	if BF16ToF32(0x3F80) != 1 || BF16ToF32(0xC000) != -2 {
		t.Error("bf16 widening of 1, -2 wrong")
	}
}

func TestRoundSliceInPlace(t *testing.T) {
	xs := []float32{1.00390625, 1.01171875, -3.14159, 70000}
	RoundSliceBF16(xs, xs)
	want := []float32{1, 1.015625, -3.140625, 70144}
	for i := range xs {
		if xs[i] != want[i] {
			t.Errorf("bf16 in place [%d] = %g, want %g", i, xs[i], want[i])
		}
	}
	ys := []float32{65519, 65520, 1.0 / 3}
	RoundSliceF16(ys, ys)
	if ys[0] != 65504 || !math.IsInf(float64(ys[1]), 1) || ys[2] != F16ToF32(0x3555) {
		t.Errorf("f16 in place: %v", ys)
	}
}
