package reports

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

func near(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-12*max(1, math.Abs(b))
}

// TestMetricsHand checks small pairs whose answers are worked out by hand
// in the comments.
func TestMetricsHand(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	fmin := float32(-math.MaxFloat32) // finfo.min, a mask
	cases := []struct {
		name      string
		ours, ref []float32
		f         precision.Format
		rowLen    int
		want      Metrics
	}{{
		// diffs 0 0 0 1; Σref² = 39; dot = 34; Σours² = 30; RMS(diff) = 1/2.
		// f32 ULPs of 4→5: 0x40A00000-0x40800000 = 2^21.
		name: "f32 one off", f: precision.F32, rowLen: 2,
		ours: []float32{1, 2, 3, 4}, ref: []float32{1, 2, 3, 5},
		want: Metrics{Count: 4, Finite: 4, MaxAbs: 1, MaxAbsIndex: 3, MeanAbs: 0.25,
			RelRMS: math.Sqrt(1.0 / 39), Cosine: 34 / math.Sqrt(30*39), PSNR: 20,
			Exact: 3, ExactFraction: 0.75,
			ULP:    ULPStats{Count: 4, Median: 0, P99: 1 << 21, Max: 1 << 21, Resolution: 1, Hist: hist(0, 3, 12, 1)},
			RowLen: 2, Rows: 2, WorstRow: 1, WorstRowMaxAbs: 1},
	}, {
		// Pairs: (1,1) exact; (1+2^-7,1) 1 ULP; (-0,+0) exact; (NaN,NaN) a
		// NaN pair; (Inf,Inf) exact; (2,NaN) off the lattice and not finite;
		// (1+2^-10,1): ours is not a bf16, rounds to 1: exact.
		// Finite pairs: 4, diffs 0, 2^-7, 0, 2^-10; Σref² = 3. (Inf,Inf)
		// is a matching mask.
		name: "bf16 specials", f: precision.BF16, rowLen: 7,
		ours: []float32{1, 1 + 0x1p-7, negZero, nan, inf, 2, 1 + 0x1p-10},
		ref:  []float32{1, 1, 0, nan, inf, nan, 1},
		want: Metrics{Count: 7, Finite: 4, MaxAbs: 0x1p-7, MaxAbsIndex: 1,
			MeanAbs: (0x1p-7 + 0x1p-10) / 4, RelRMS: math.Sqrt((0x1p-14 + 0x1p-20) / 3),
			Cosine: (1 + (1 + 0x1p-7) + (1 + 0x1p-10)) / math.Sqrt((1+(1+0x1p-7)*(1+0x1p-7)+(1+0x1p-10)*(1+0x1p-10))*3),
			PSNR:   20 * math.Log10(1/math.Sqrt((0x1p-14+0x1p-20)/4)),
			Exact:  4, ExactFraction: 4.0 / 7, NaNPairs: 1, Masked: 1,
			Ours: Side{NaN: 1, PosInf: 1, Inexact: 1}, Ref: Side{NaN: 2, PosInf: 1},
			ULP:    ULPStats{Count: 5, Median: 0, P99: 1, Max: 1, Resolution: 1, Hist: hist(0, 4, 1, 1)},
			RowLen: 7, Rows: 1, WorstRow: 0, WorstRowMaxAbs: 0x1p-7},
	}, {
		// An attention bias: finfo.min on both sides (masks that match,
		// left out), and a small entry wrong. Over all entries the rel-RMS
		// would be 1e-39; over the ordinary ones it is 0.25/0.25 = 1.
		// (-finfo.min, -Inf) match too: both mask-sized, one sign.
		name: "masks apart", f: precision.F32, rowLen: 4,
		ours: []float32{0, fmin, fmin, 0},
		ref:  []float32{0.25, fmin, float32(math.Inf(-1)), 0},
		want: Metrics{Count: 4, Finite: 2, Masked: 2, MaxAbs: 0.25, MaxAbsIndex: 0,
			MeanAbs: 0.125, RelRMS: 1, Cosine: 0, PSNR: 20 * math.Log10(0.25/math.Sqrt(0.0625/2)),
			Exact: 2, ExactFraction: 0.5, Ref: Side{NegInf: 1},
			ULP:    ULPStats{Count: 4, Median: 0, P99: 0x3E800000, Max: 0x3E800000, Resolution: 1, Hist: hist(0, 2, 1, 1, NumULPBuckets-1, 1)},
			RowLen: 4, Rows: 1, WorstRow: 0, WorstRowMaxAbs: 0.25},
	}, {
		// A mask where the reference has an ordinary value: rel-RMS +Inf.
		name: "misplaced mask", f: precision.F32, rowLen: 2,
		ours: []float32{fmin, 1},
		ref:  []float32{0, 1},
		want: Metrics{Count: 2, Finite: 1, MaskMismatch: 1, MaxAbs: 0, MaxAbsIndex: 1,
			RelRMS: math.Inf(1), Cosine: 1, PSNR: math.Inf(1), Exact: 1, ExactFraction: 0.5,
			ULP:    ULPStats{Count: 2, Median: 0, P99: 0x7F7FFFFF, Max: 0x7F7FFFFF, Resolution: 1, Hist: hist(0, 1, NumULPBuckets-1, 1)},
			RowLen: 2, Rows: 1, WorstRow: 0, WorstRowMaxAbs: 0},
	}, {
		name: "zeros", f: precision.F16, rowLen: 1,
		ours: []float32{0, 0}, ref: []float32{0, negZero},
		want: Metrics{Count: 2, Finite: 2, MaxAbs: 0, MaxAbsIndex: 0, RelRMS: 0, Cosine: 1, PSNR: math.Inf(1),
			Exact: 2, ExactFraction: 1,
			ULP:    ULPStats{Count: 2, Resolution: 1, Hist: hist(0, 2)},
			RowLen: 1, Rows: 2, WorstRow: 0},
	}, {
		// Zero reference, non-zero ours: rel-RMS +Inf, cosine 0, PSNR -Inf
		// (max|ref| = 0). f16 ULPs from 0 to 1: 0x3C00.
		name: "zero reference", f: precision.F16, rowLen: 2,
		ours: []float32{1, 0}, ref: []float32{0, 0},
		want: Metrics{Count: 2, Finite: 2, MaxAbs: 1, MaxAbsIndex: 0, MeanAbs: 0.5,
			RelRMS: math.Inf(1), Cosine: 0, PSNR: math.Inf(-1), Exact: 1, ExactFraction: 0.5,
			ULP:    ULPStats{Count: 2, Median: 0, P99: 0x3C00, Max: 0x3C00, Resolution: 1, Hist: hist(0, 1, 12, 1)},
			RowLen: 2, Rows: 1, WorstRow: 0, WorstRowMaxAbs: 1},
	}, {
		name: "empty", f: precision.BF16, rowLen: 4,
		want: Metrics{MaxAbsIndex: -1, Cosine: 1, PSNR: math.Inf(1), ExactFraction: 1,
			ULP: ULPStats{Resolution: 1}, RowLen: 4, WorstRow: -1},
	}}
	for _, c := range cases {
		c.want.Format = c.f
		got, err := Compare(c.ours, c.ref, c.f, c.rowLen)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if msg := diffMetrics(got, c.want); msg != "" {
			t.Errorf("%s: %s", c.name, msg)
		}
	}
}

// hist builds a ULP histogram from bucket, count pairs.
func hist(kv ...int) (h [NumULPBuckets]int) {
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// diffMetrics names the first field that differs, floats compared to 1e-12.
func diffMetrics(got, want Metrics) string {
	floats := []struct {
		name string
		g, w float64
	}{
		{"MaxAbs", got.MaxAbs, want.MaxAbs}, {"MeanAbs", got.MeanAbs, want.MeanAbs},
		{"RelRMS", got.RelRMS, want.RelRMS}, {"Cosine", got.Cosine, want.Cosine},
		{"PSNR", got.PSNR, want.PSNR}, {"ExactFraction", got.ExactFraction, want.ExactFraction},
		{"WorstRowMaxAbs", got.WorstRowMaxAbs, want.WorstRowMaxAbs},
	}
	for _, f := range floats {
		if !near(f.g, f.w) {
			return f.name + ": got " + ftoa(f.g) + ", want " + ftoa(f.w)
		}
	}
	got.MaxAbs, got.MeanAbs, got.RelRMS, got.Cosine, got.PSNR, got.ExactFraction, got.WorstRowMaxAbs = 0, 0, 0, 0, 0, 0, 0
	want.MaxAbs, want.MeanAbs, want.RelRMS, want.Cosine, want.PSNR, want.ExactFraction, want.WorstRowMaxAbs = 0, 0, 0, 0, 0, 0, 0
	if got != want {
		return "got\n" + sprint(got) + "\nwant\n" + sprint(want)
	}
	return ""
}

// TestMetricsRandom checks the streamed metrics, fed in uneven chunks,
// against a direct float64 computation on random data.
func TestMetricsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, f := range []precision.Format{precision.BF16, precision.F16, precision.F32} {
		const rowLen, rows = 64, 300
		ref := make([]float32, rowLen*rows)
		ours := make([]float32, len(ref))
		for i := range ref {
			x := rng.NormFloat64()
			ref[i] = f.Round(float32(x))
			ours[i] = f.Round(float32(x * (1 + 0.01*rng.NormFloat64())))
		}
		acc, err := NewAccumulator(f, rowLen)
		if err != nil {
			t.Fatal(err)
		}
		for from := 0; from < len(ref); {
			to := min(len(ref), from+1+rng.IntN(5000)) // chunks split rows
			if err := acc.Add(ours[from:to], ref[from:to]); err != nil {
				t.Fatal(err)
			}
			from = to
		}
		got, err := acc.Result()
		if err != nil {
			t.Fatal(err)
		}
		if msg := diffMetrics(got, directMetrics(ours, ref, f, rowLen)); msg != "" {
			t.Errorf("%v: %s", f, msg)
		}
	}
}

// directMetrics is the plain computation: every sum over all pairs at once,
// quantiles by sorting every distance.
func directMetrics(ours, ref []float32, f precision.Format, rowLen int) Metrics {
	m := Metrics{Format: f, Count: len(ref), Finite: len(ref), RowLen: rowLen, Rows: len(ref) / rowLen}
	var sd, so, sr, dot, maxRef float64
	var ulps []uint64
	rowMax := make([]float64, m.Rows)
	for i := range ref {
		o, r := float64(ours[i]), float64(ref[i])
		d := math.Abs(o - r)
		if d > m.MaxAbs || i == 0 {
			m.MaxAbs, m.MaxAbsIndex = d, i
		}
		rowMax[i/rowLen] = max(rowMax[i/rowLen], d)
		m.MeanAbs += d / float64(len(ref))
		sd, so, sr, dot = sd+d*d, so+o*o, sr+r*r, dot+o*r
		maxRef = max(maxRef, math.Abs(r))
		u := precision.ULPDistance(f, ours[i], ref[i])
		ulps = append(ulps, u)
		if u == 0 {
			m.Exact++
		}
		m.ULP.Hist[ulpBucket(u)]++
	}
	m.RelRMS = math.Sqrt(sd / sr)
	m.Cosine = dot / math.Sqrt(so*sr)
	m.PSNR = 20 * math.Log10(maxRef/math.Sqrt(sd/float64(len(ref))))
	m.ExactFraction = float64(m.Exact) / float64(len(ref))
	m.WorstRow = slices.Index(rowMax, slices.Max(rowMax))
	m.WorstRowMaxAbs = rowMax[m.WorstRow]
	slices.Sort(ulps)
	n := len(ulps)
	m.ULP.Count, m.ULP.Resolution = n, 1
	m.ULP.Median = ulps[int(math.Ceil(0.5*float64(n)))-1]
	m.ULP.P99 = ulps[int(math.Ceil(0.99*float64(n)))-1]
	m.ULP.Max = ulps[n-1]
	return m
}

func TestAccumulatorErrors(t *testing.T) {
	if _, err := NewAccumulator(precision.F64, 4); err == nil {
		t.Error("f64 reference accepted")
	}
	if _, err := NewAccumulator(precision.Format(0), 4); err == nil {
		t.Error("invalid format accepted")
	}
	if _, err := NewAccumulator(precision.BF16, 0); err == nil {
		t.Error("row length 0 accepted")
	}
	acc, _ := NewAccumulator(precision.BF16, 4)
	if err := acc.Add([]float32{1, 2}, []float32{1}); err == nil {
		t.Error("chunk length mismatch accepted")
	}
	if err := acc.Add([]float32{1, 2, 3}, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Result(); err == nil {
		t.Error("3 elements of 4-long rows accepted")
	}
	if err := acc.Add([]float32{4}, []float32{4}); err != nil {
		t.Fatal(err)
	}
	if m, err := acc.Result(); err != nil || m.Rows != 1 || m.Exact != 4 {
		t.Errorf("after completing the row: %+v, %v", m, err)
	}
}
