package precision

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRefBeyond: Beyond answers RelRMS(f, ours, ref) > bound as RelRMS
// does, for values near and far from the reference, masks, NaN and
// infinities among them, and bounds on both sides of the rel-RMS.
func TestRefBeyond(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, f := range []Format{F32, BF16, F16} {
		for _, n := range []int{0, 1, 255, 256, 257, 1000, 4096} {
			for trial := range 20 {
				ref := make([]float32, n)
				ours := make([]float32, n)
				noise := math.Pow(10, -float64(trial%8))
				for i := range ref {
					ref[i] = float32(rng.NormFloat64())
					ours[i] = ref[i] + float32(noise*rng.NormFloat64())
					switch rng.IntN(200) {
					case 0:
						ref[i], ours[i] = float32(math.Inf(-1)), float32(math.Inf(-1)) // a mask on both sides
					case 1:
						ref[i], ours[i] = float32(math.NaN()), float32(math.NaN())
					case 2:
						if trial%3 == 0 {
							ours[i] = float32(math.NaN()) // a mismatch
						}
					case 3:
						ref[i] = 0
					}
				}
				if trial%5 == 4 {
					clear(ref) // a zero reference
				}
				want, err := RelRMS(f, ours, ref)
				if err != nil {
					t.Fatal(err)
				}
				r := NewRef(f, ref)
				for _, bound := range []float64{0, want / 2, want, math.Nextafter(want, 0), math.Nextafter(want, math.Inf(1)), 2 * want, 1e-3, 1, math.Inf(1), math.NaN()} {
					if got := r.Beyond(ours, bound); got != (want > bound) {
						t.Fatalf("%v n=%d trial %d: Beyond(%g) = %v, rel-RMS %g", f, n, trial, bound, got, want)
					}
				}
			}
		}
	}
	if !NewRef(F32, []float32{1, 2}).Beyond([]float32{1}, 1) {
		t.Error("a shorter candidate is not beyond a finite bound")
	}
}

// BenchmarkRefBeyond: one target against candidates far from it (the
// common case of a search's comparisons), answered by Ref.Beyond and by
// RelRMS then a comparison, the baseline it replaces; compare the two
// lines' ns/op.
func BenchmarkRefBeyond(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	ref, far := make([]float32, 4096), make([]float32, 4096)
	for i := range ref {
		ref[i], far[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	const bound = 1e-4
	held := NewRef(F32, ref)
	b.Run("Beyond", func(b *testing.B) {
		for b.Loop() {
			if !held.Beyond(far, bound) {
				b.Fatal("a far candidate within the bound")
			}
		}
	})
	b.Run("RelRMS", func(b *testing.B) {
		for b.Loop() {
			if e, _ := RelRMS(F32, far, ref); !(e > bound) {
				b.Fatal("a far candidate within the bound")
			}
		}
	})
}
