package reports

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// specialBits16 are bf16/f16 patterns the kernels must treat like the
// Accumulator: zeros of both signs, infinities, NaNs, subnormals, the
// largest finite values.
var specialBits16 = []uint16{0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x8001, 0x7F7F, 0xFF7F, 0x7C00, 0xFC00, 0x7BFF}

// randomPair returns n bf16 patterns a side: mostly nearby values, some
// far apart, some special.
func randomPair(rng *rand.Rand, n int) (ours, ref []uint16) {
	ours, ref = make([]uint16, n), make([]uint16, n)
	for i := range ref {
		r := precision.BF16Bits(float32(rng.NormFloat64() * 3))
		o := r
		switch k := rng.IntN(100); {
		case k < 40: // exact
		case k < 80:
			o = r + uint16(rng.IntN(5)) - 2
		case k < 90:
			o = precision.BF16Bits(float32(rng.NormFloat64()))
		case k < 95:
			o = specialBits16[rng.IntN(len(specialBits16))]
		default:
			r = specialBits16[rng.IntN(len(specialBits16))]
		}
		ours[i], ref[i] = o, r
	}
	return ours, ref
}

func widen(bits []uint16) []float32 {
	out := make([]float32, len(bits))
	precision.BF16ToF32Slice(out, bits)
	return out
}

// runSegments feeds a pair to a kernel in segments cut at random places,
// merging the segments in order as Diff does, and returns the metrics.
func runSegments(t *testing.T, rng *rand.Rand, n, rowLen int, f precision.Format,
	kernel func(p *partial, h *segHist, from, to int)) Metrics {
	t.Helper()
	total := newPartial()
	var u ulpHist
	h := new(segHist)
	for from := 0; from < n; {
		to := min(n, from+1+rng.IntN(257))
		p := newPartial()
		kernel(&p, h, from, to)
		h.flush(&u)
		total.merge(&p)
		from = to
	}
	m, err := total.metrics(f, rowLen, &u)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameMetrics(t *testing.T, name string, got, want Metrics) {
	t.Helper()
	floats := []struct {
		name string
		g, w float64
	}{
		{"MaxAbs", got.MaxAbs, want.MaxAbs}, {"MeanAbs", got.MeanAbs, want.MeanAbs},
		{"RelRMS", got.RelRMS, want.RelRMS}, {"Cosine", got.Cosine, want.Cosine},
		{"PSNR", got.PSNR, want.PSNR}, {"ExactFraction", got.ExactFraction, want.ExactFraction},
		{"WorstRowMaxAbs", got.WorstRowMaxAbs, want.WorstRowMaxAbs},
	}
	for _, c := range floats {
		if !near(c.g, c.w) && math.Abs(c.g-c.w) > 1e-12*max(1, math.Abs(c.w)) {
			t.Errorf("%s: %s = %v, Accumulator says %v", name, c.name, c.g, c.w)
		}
	}
	got.MaxAbs, got.MeanAbs, got.RelRMS, got.Cosine, got.PSNR, got.ExactFraction, got.WorstRowMaxAbs =
		want.MaxAbs, want.MeanAbs, want.RelRMS, want.Cosine, want.PSNR, want.ExactFraction, want.WorstRowMaxAbs
	if sprint(got) != sprint(want) {
		t.Errorf("%s:\n got %s\nwant %s", name, sprint(got), sprint(want))
	}
}

// TestKernelsMatchAccumulator holds every kernel, run in random segments,
// to the Accumulator's definitions.
func TestKernelsMatchAccumulator(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		n := 1 + rng.IntN(3000)
		rowLen := []int{1, 3, 7, 16}[trial%4]
		n = (n + rowLen - 1) / rowLen * rowLen
		ob, rb := randomPair(rng, n)
		o, r := widen(ob), widen(rb)

		want, err := Compare(o, r, precision.BF16, rowLen)
		if err != nil {
			t.Fatal(err)
		}
		got := runSegments(t, rng, n, rowLen, precision.BF16, func(p *partial, h *segHist, from, to int) {
			p.bf16Bits(h, ob[from:to], rb[from:to], from)
		})
		sameMetrics(t, "bf16Bits", got, want)

		got = runSegments(t, rng, n, rowLen, precision.BF16, func(p *partial, h *segHist, from, to int) {
			p.rounded(h, precision.BF16, o[from:to], r[from:to], from)
		})
		sameMetrics(t, "rounded bf16", got, want)

		// f32 values that are not bf16, compared in f32, bf16 and f16
		// (f16 overflows for |x| > 65504: values up to 1e5 reach it).
		of, rf := make([]float32, n), make([]float32, n)
		for i := range rf {
			x := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(11)-5))
			rf[i] = float32(x)
			of[i] = float32(x * (1 + 1e-3*rng.NormFloat64()))
			if rng.IntN(50) == 0 {
				of[i] = widen(specialBits16[rng.IntN(len(specialBits16)):][:1])[0]
			}
			if rng.IntN(80) == 0 {
				rf[i] = o[i]
			}
		}
		for _, f := range []precision.Format{precision.F32, precision.BF16, precision.F16} {
			want, err := Compare(of, rf, f, rowLen)
			if err != nil {
				t.Fatal(err)
			}
			got := runSegments(t, rng, n, rowLen, f, func(p *partial, h *segHist, from, to int) {
				if f == precision.F32 {
					p.f32(h, of[from:to], rf[from:to], from)
				} else {
					p.rounded(h, f, of[from:to], rf[from:to], from)
				}
			})
			sameMetrics(t, "f32 values in "+f.String(), got, want)
		}
	}
}
