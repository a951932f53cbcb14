package reports

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// benchPairBF16 is 4M bf16 pairs a side, ours within a few ULPs of ref,
// like BenchmarkAccumulatorBF16's data.
func benchPairBF16() (ours, ref []uint16) {
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(1, 2))
	ours, ref = make([]uint16, n), make([]uint16, n)
	for i := range ref {
		x := rng.NormFloat64()
		ref[i] = precision.BF16Bits(float32(x))
		ours[i] = precision.BF16Bits(float32(x * (1 + 0.01*rng.NormFloat64())))
	}
	return ours, ref
}

// BenchmarkKernelBF16Bits is Diff's hot path on one core: the bits of two
// stored bf16 tensors. SetBytes counts the bf16 bytes of both sides (the
// trace bytes compared); BenchmarkAccumulatorBF16 counts f32 bytes.
func BenchmarkKernelBF16Bits(b *testing.B) {
	ours, ref := benchPairBF16()
	b.SetBytes(int64(2 * 2 * len(ref)))
	h := new(segHist)
	for b.Loop() {
		var u ulpHist
		total := newPartial()
		for from := 0; from < len(ref); from += 1 << 16 {
			p := newPartial()
			p.bf16Bits(h, ours[from:from+1<<16], ref[from:from+1<<16], from)
			h.flush(&u)
			total.merge(&p)
		}
		if _, err := total.metrics(precision.BF16, 1024, &u); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKernelF32 is the path for f32 references (and widened dtypes).
func BenchmarkKernelF32(b *testing.B) {
	ob, rb := benchPairBF16()
	ours, ref := widen(ob), widen(rb)
	b.SetBytes(int64(2 * 4 * len(ref)))
	h := new(segHist)
	for b.Loop() {
		var u ulpHist
		p := newPartial()
		for from := 0; from < len(ref); from += 1 << 16 {
			p.f32(h, ours[from:from+1<<16], ref[from:from+1<<16], from)
			h.flush(&u)
		}
	}
}
