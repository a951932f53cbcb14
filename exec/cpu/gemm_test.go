package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// seqDot is the order gemm promises: Σ_k a·b in k order, products rounded.
func seqDot(a, b []float32) float32 {
	var s float32
	for k := range a {
		s += float32(a[k] * b[k])
	}
	return s
}

// TestGEMMOrder: every output equals the sequential f32 dot product bit for
// bit, for the packed path (both kernels), the few-rows path and edge tiles,
// with one worker or several; and it is within f32 error of float64.
func TestGEMMOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 16, 256}, {5, 17, 300}, {37, 70, 513}, {64, 128, 256}, {130, 33, 64}, {9, 1, 1000}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		a, b := randSlice(r, m*k), randSlice(r, n*k)
		want := make([]float32, m*n)
		for i := range m {
			for j := range n {
				want[i*n+j] = seqDot(a[i*k:(i+1)*k], b[j*k:(j+1)*k])
			}
		}
		for _, workers := range []int{1, 3} {
			for kn, kern := range map[string]microKernel{"fast": microFast(), "go": microGo} {
				bk := New(workers)
				bk.micro = kern
				c := make([]float32, m*n)
				for i := range c {
					c[i] = float32(math.NaN()) // gemm must overwrite
				}
				bk.gemm(c, a, b, m, n, k)
				same(t, fmt.Sprintf("%dx%dx%d/%d workers/%s", m, n, k, workers, kn), c, want)
			}
		}
		// Against float64: the f32 sum's error bound, loosely.
		for i := range m {
			for j := range n {
				var ref, mag float64
				for p := range k {
					ref += float64(a[i*k+p]) * float64(b[j*k+p])
					mag += math.Abs(float64(a[i*k+p]) * float64(b[j*k+p]))
				}
				if d := math.Abs(float64(want[i*n+j]) - ref); d > float64(k)*0x1p-24*mag {
					t.Fatalf("%dx%dx%d [%d,%d]: %g vs float64 %g", m, n, k, i, j, want[i*n+j], ref)
				}
			}
		}
	}
}
