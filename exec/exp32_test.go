package exec

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// TestExpNear: expNear gives float32(math.Exp(float64(x))) wherever it
// answers, on a strided sweep of every f32 bit pattern and on random
// values of the range; it declines few of the range (those near a
// rounding midpoint) and everything outside it, NaN included.
func TestExpNear(t *testing.T) {
	inRange, declined := 0, 0
	check := func(x float32) {
		y, ok := expNear(x)
		if x >= expLo && x <= expHi {
			inRange++
			if !ok {
				declined++
			}
		} else if ok {
			t.Fatalf("expNear(%v) answered outside its range", x)
		}
		if want := float32(math.Exp(float64(x))); ok && y != want {
			t.Fatalf("expNear(%v) = %v, math.Exp gives %v", x, y, want)
		}
	}
	for u := uint64(0); u < 1<<32; u += 997 {
		check(math.Float32frombits(uint32(u)))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1 << 20 {
		check(float32(expLo + (expHi-expLo)*r.Float64()))
	}
	for _, x := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -88, 89, -100} {
		check(x)
	}
	if declined*1000 > inRange {
		t.Errorf("declined %d of %d in range", declined, inRange)
	}
	if Exp32(float32(math.Inf(-1)), 0) != 0 || Exp32(0, 0) != 1 || !math.IsNaN(float64(Exp32(float32(math.NaN()), 0))) {
		t.Error("Exp32 at −∞, 0, NaN")
	}
}

// TestExpNearExhaustive compares every f32 of expNear's range with
// math.Exp (two billion values, about a minute on two cores): run with
// ZFLOW_EXHAUSTIVE=1.
func TestExpNearExhaustive(t *testing.T) {
	if os.Getenv("ZFLOW_EXHAUSTIVE") == "" {
		t.Skip("ZFLOW_EXHAUSTIVE=1 compares every f32 of the range")
	}
	declined := 0
	for _, sign := range []uint32{0, 1 << 31} {
		// magnitudes upward from 0 until x leaves the range
		for u := uint32(0); ; u++ {
			x := math.Float32frombits(sign | u)
			if !(x >= expLo && x <= expHi) {
				break
			}
			y, ok := expNear(x)
			if !ok {
				declined++
				continue
			}
			if want := float32(math.Exp(float64(x))); y != want {
				t.Fatalf("expNear(%v) = %v, math.Exp gives %v", x, y, want)
			}
		}
	}
	t.Logf("every f32 in [%d, %d] agrees; %d declined (near a midpoint)", expLo, expHi, declined)
}

// BenchmarkExp32: softmax-sized arguments (x − max ≤ 0) through Exp32,
// and the same through float32(math.Exp(float64(x))), the baseline it
// replaces; compare the two lines' ns/op.
func BenchmarkExp32(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	xs := make([]float32, 4096)
	for i := range xs {
		xs[i] = -float32(r.ExpFloat64() * 4)
	}
	for _, bc := range []struct {
		name string
		exp  func(float32) float32
	}{
		{"Exp32", func(x float32) float32 { return Exp32(x, 0) }},
		{"math.Exp", func(x float32) float32 { return float32(math.Exp(float64(x))) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var s float32
			for b.Loop() {
				for _, x := range xs {
					s += bc.exp(x)
				}
			}
			_ = s
		})
	}
}
