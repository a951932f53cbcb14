package reports

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// BenchmarkAccumulatorBF16 streams 4M bf16-valued pairs (16 MiB a side as
// f32) through one Accumulator.
func BenchmarkAccumulatorBF16(b *testing.B) {
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(1, 2))
	ref, ours := make([]float32, n), make([]float32, n)
	for i := range ref {
		x := rng.NormFloat64()
		ref[i] = precision.RoundBF16(float32(x))
		ours[i] = precision.RoundBF16(float32(x * (1 + 0.01*rng.NormFloat64())))
	}
	b.SetBytes(2 * 4 * n)
	for b.Loop() {
		acc, _ := NewAccumulator(precision.BF16, 1024)
		for from := 0; from < n; from += 1 << 16 {
			_ = acc.Add(ours[from:from+1<<16], ref[from:from+1<<16])
		}
		if _, err := acc.Result(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiagnose runs the full diagnosis on a 4096 × 256 pair.
func BenchmarkDiagnose(b *testing.B) {
	const rows, C = 4096, 256
	rng := rand.New(rand.NewPCG(1, 2))
	ref, ours := make([]float32, rows*C), make([]float32, rows*C)
	for i := range ref {
		x := rng.NormFloat64()
		ref[i] = float32(x)
		ours[i] = float32(1.3 * x)
	}
	for b.Loop() {
		if _, err := Diagnose(ours, ref, C); err != nil {
			b.Fatal(err)
		}
	}
}
