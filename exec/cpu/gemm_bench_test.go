package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// gemmShapes are M×N×K: a large DiT-sized linear and conformance-sized ones.
var gemmShapes = [][3]int{
	{512, 3072, 3072},
	{43, 64, 64},  // flux joint attention projections
	{36, 256, 64}, // flux MLP up
	{36, 64, 256}, // flux MLP down
	{1, 384, 64},  // flux modulation linear
	{8, 96, 64},   // llama MLP
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// BenchmarkGEMM reports GFLOP/s for ours (cpu) and gonum's blas32 and
// blas64 (the baselines) on the same shapes, C = A·Bᵀ with B [N, K], and
// then the ratios ours/blas32 and ours/blas64 as "x-blas32", "x-blas64".
// -short skips the large shape.
func BenchmarkGEMM(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range gemmShapes {
		m, n, k := s[0], s[1], s[2]
		if testing.Short() && m*n*k > 1<<24 {
			continue
		}
		a, w, c := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
		flops := 2 * float64(m) * float64(n) * float64(k)
		var ours, g32, g64 float64 // the last (longest) run of each sets it
		report := func(b *testing.B, into *float64) {
			*into = flops * float64(b.N) / b.Elapsed().Seconds() / 1e9
			b.ReportMetric(*into, "GFLOP/s")
		}
		name := fmt.Sprintf("%dx%dx%d", m, n, k)
		b.Run(name+"/zflow", func(b *testing.B) {
			bk := New(0)
			for b.Loop() {
				bk.gemm(c, a, w, m, n, k)
			}
			report(b, &ours)
		})
		b.Run(name+"/gonum-blas32", func(b *testing.B) {
			A := blas32.General{Rows: m, Cols: k, Stride: k, Data: a}
			B := blas32.General{Rows: n, Cols: k, Stride: k, Data: w}
			C := blas32.General{Rows: m, Cols: n, Stride: n, Data: c}
			for b.Loop() {
				blas32.Gemm(blas.NoTrans, blas.Trans, 1, A, B, 0, C)
			}
			report(b, &g32)
		})
		b.Run(name+"/gonum-blas64", func(b *testing.B) {
			a64, w64, c64 := widen(a), widen(w), make([]float64, m*n)
			A := blas64.General{Rows: m, Cols: k, Stride: k, Data: a64}
			B := blas64.General{Rows: n, Cols: k, Stride: k, Data: w64}
			C := blas64.General{Rows: m, Cols: n, Stride: n, Data: c64}
			for b.Loop() {
				blas64.Gemm(blas.NoTrans, blas.Trans, 1, A, B, 0, C)
			}
			report(b, &g64)
		})
		// The ratio of ours to each baseline, measured in this same run.
		b.Run(name+"/ratio", func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(ours/g32, "x-blas32")
			b.ReportMetric(ours/g64, "x-blas64")
		})
	}
}

func widen(s []float32) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}
