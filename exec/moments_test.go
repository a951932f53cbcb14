package exec

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// fmaBig is a·b + c rounded once to f32, by math/big.
func fmaBig(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(a, b, c float32) {
		if got, want := FMA32(a, b, c), fmaBig(a, b, c); got != want && !(got == 0 && want == 0) {
			t.Fatalf("FMA32(%v, %v, %v) = %v, want %v", a, b, c, got, want)
		}
	}
	for range 200000 {
		a := float32(r.NormFloat64())
		b := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10)))
		c := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(60)-30)))
		check(a, b, c)
		check(a, b, -float32(float64(a)*float64(b))) // cancellation
	}
	// A product whose f64 sum with c lands on an f32 midpoint while the
	// exact sum does not: rounding the f64 sum alone would tie wrongly.
	for range 100000 {
		c := float32(r.Float64() + 1)
		half := float32(math.Nextafter32(c, 2)-c) / 2 // half an ulp of c
		a := half * float32(1+r.IntN(3))
		check(a, 1+float32(r.IntN(2))*math.Float32frombits(0x34000000), c)
	}
}

// TestWelfordMoments: the CUDA-order Welford moments agree with the f64
// mean and variance to a few f32 ulps on random rows of several widths.
func TestWelfordMoments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{4, 64, 128, 3072, 4100} {
		x := make([]float32, n)
		for i := range x {
			x[i] = precision.RoundBF16(float32(r.NormFloat64()*1.5 + 0.3))
		}
		var s, s2 float64
		for _, v := range x {
			s += float64(v)
		}
		mu := s / float64(n)
		for _, v := range x {
			s2 += (float64(v) - mu) * (float64(v) - mu)
		}
		mean, v := WelfordMoments(x)
		if math.Abs(float64(mean)-mu) > 1e-5 || math.Abs(float64(v)/(s2/float64(n))-1) > 1e-5 {
			t.Errorf("N %d: mean %v var %v, want %v %v", n, mean, v, mu, s2/float64(n))
		}
	}
}

// TestNormMomentsF32: in f32 the CPU kernel's moments are the Welford
// estimates of the mean and variance.
func TestNormMomentsF32(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	mean, v := NormMoments(x, precision.F32)
	if math.Abs(float64(mean)-6) > 1e-6 || math.Abs(float64(v)-10) > 1e-5 {
		t.Errorf("mean %v var %v, want 6 10", mean, v)
	}
}
