package exec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// dotMMABlocks is DotMMA with every block summed by mmaBlock (the form
// kernels' zf_mma_block mirrors), the reference for mmaBlockNormal.
func dotMMABlocks(x, w []float32) float32 {
	var acc float32
	var pr [MMABlock]float32
	for k0 := 0; k0 < len(x); k0 += MMABlock {
		n := min(MMABlock, len(x)-k0)
		for i := range n {
			pr[i] = x[k0+i] * w[k0+i]
		}
		acc = mmaBlock(acc, pr[:n])
	}
	return acc
}

// TestMMABlockNormal: DotMMA (mmaBlockNormal where a block's terms are
// normal or zero) gives mmaBlock's bits on every draw: bf16 and f16
// operands of GEMM-like spreads, sums that cancel, products that leave
// f32's normal range (subnormal, overflowing to ±Inf), zeros of both
// signs, infinities and NaNs.
func TestMMABlockNormal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), 0x1p-149, -0x1p-140, 0x1p-126, -0x1.fffffcp-127,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, 0x1p100, 0x1p-100}
	draws := []struct {
		name string
		gen  func() float32
	}{
		{"bf16 N(0,1)", func() float32 { return precision.BF16.Round(float32(r.NormFloat64())) }},
		{"f16 N(0,1)", func() float32 { return precision.F16.Round(float32(r.NormFloat64())) }},
		{"f32 wide exponents", func() float32 {
			return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(60)-30)))
		}},
		{"cancelling", func() float32 { return float32(r.IntN(5)-2) * (1 + 0x1p-20*float32(r.IntN(3))) }},
		{"edge of range", func() float32 {
			return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(120)-60)*float64(1-2*r.IntN(2))+float64(r.IntN(2)*60)))
		}},
		{"with specials", func() float32 {
			if r.IntN(40) == 0 {
				return special[r.IntN(len(special))]
			}
			return precision.BF16.Round(float32(r.NormFloat64()))
		}},
	}
	normal, total := 0, 0
	for _, d := range draws {
		for trial := range 3000 {
			k := 1 + r.IntN(70)
			x, w := make([]float32, k), make([]float32, k)
			for i := range x {
				x[i], w[i] = d.gen(), d.gen()
			}
			got, want := DotMMA(x, w), dotMMABlocks(x, w)
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("%s, draw %d (k %d): DotMMA %v (%#08x), mmaBlock's %v (%#08x)\nx %v\nw %v", d.name, trial, k,
					got, math.Float32bits(got), want, math.Float32bits(want), x, w)
			}
			// and block by block, counting what the fast path took
			var acc float32
			for k0 := 0; k0 < k; k0 += MMABlock {
				n := min(MMABlock, k-k0)
				pr := make([]float32, n)
				for i := range pr {
					pr[i] = x[k0+i] * w[k0+i]
				}
				total++
				if v, ok := mmaBlockNormal(acc, x[k0:k0+n], w[k0:k0+n]); ok {
					normal++
					if ref := mmaBlock(acc, pr); math.Float32bits(v) != math.Float32bits(ref) {
						t.Fatalf("%s: block %v on %v: %v, mmaBlock %v", d.name, pr, acc, v, ref)
					}
				}
				acc = mmaBlock(acc, pr)
			}
		}
	}
	if normal == 0 || normal == total {
		t.Errorf("the fast path took %d of %d blocks: the draws do not exercise both paths", normal, total)
	}
	t.Logf("the fast path summed %d of %d blocks", normal, total)
}

// BenchmarkDotMMA: one k = 3072 product of bf16 operands, the way a real
// width's MLP projection sums.
func BenchmarkDotMMA(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	x, w := make([]float32, 3072), make([]float32, 3072)
	for i := range x {
		x[i], w[i] = precision.BF16.Round(float32(r.NormFloat64())), precision.BF16.Round(float32(r.NormFloat64()*0.02))
	}
	b.SetBytes(int64(len(x)))
	var s float32
	for b.Loop() {
		s += DotMMA(x, w)
	}
	_ = s
}
