package precision

import (
	"math/rand/v2"
	"testing"
)

// benchBytes is the size of the bf16 source in the widening benchmarks:
// large enough that both loops run from memory, not cache.
const benchBytes = 64 << 20

func BenchmarkBF16ToF32(b *testing.B) {
	src := make([]uint16, benchBytes/2)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = uint16(rng.Uint32())
	}
	dst := make([]float32, len(src))
	b.SetBytes(benchBytes)
	for b.Loop() {
		BF16ToF32Slice(dst, src)
	}
}

func BenchmarkF16ToF32(b *testing.B) {
	src := make([]uint16, benchBytes/2)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = F16Bits(float32(rng.NormFloat64())) // typical activations
	}
	dst := make([]float32, len(src))
	b.SetBytes(benchBytes)
	for b.Loop() {
		F16ToF32Slice(dst, src)
	}
}

func BenchmarkRoundSliceBF16(b *testing.B) {
	src := make([]float32, benchBytes/4)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, len(src))
	b.SetBytes(benchBytes)
	for b.Loop() {
		RoundSliceBF16(dst, src)
	}
}

// BenchmarkCopyBaseline copies the same 64 MiB the widening reads: the
// floor any conversion that touches every byte can approach.
func BenchmarkCopyBaseline(b *testing.B) {
	src := make([]byte, benchBytes)
	dst := make([]byte, benchBytes)
	b.SetBytes(benchBytes)
	for b.Loop() {
		copy(dst, src)
	}
}

// BenchmarkCopyBaselineOut copies 128 MiB, the size the widening writes.
func BenchmarkCopyBaselineOut(b *testing.B) {
	src := make([]byte, 2*benchBytes)
	dst := make([]byte, 2*benchBytes)
	b.SetBytes(benchBytes) // same unit as BenchmarkBF16ToF32: source bytes
	for b.Loop() {
		copy(dst, src)
	}
}
