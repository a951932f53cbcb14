package reports

import "github.com/zflow/zflow/precision"

// Metrics compares one boundary's tensor from the port ("ours") with the
// reference's. The package doc defines every field precisely.
type Metrics struct {
	Format precision.Format // the reference's stored format
	Count  int              // elements compared
	Finite int              // pairs with both sides finite and neither mask-sized: the population of the difference metrics
	// Masked counts the pairs mask-sized on both sides with one sign
	// (precision.MaskSized: finfo.min, ±Inf), a match; MaskMismatch the
	// pairs of finite values where one side is mask-sized and the other is
	// not, or the signs differ. Both are left out of the difference
	// metrics; a MaskMismatch makes RelRMS +Inf.
	Masked, MaskMismatch int

	MaxAbs      float64 // largest |ours-ref|
	MaxAbsIndex int     // element index of the first pair reaching MaxAbs; -1 if Finite == 0
	MeanAbs     float64 // mean |ours-ref|
	RelRMS      float64 // sqrt(Σ(ours-ref)² / Σref²); +Inf when MaskMismatch > 0
	Cosine      float64 // Σ ours·ref / sqrt(Σours² · Σref²)
	PSNR        float64 // 20·log10(max|ref| / RMS(ours-ref)) in dB

	Exact         int     // pairs bit-exact in Format (+0 == -0; NaN never)
	ExactFraction float64 // Exact / Count
	NaNPairs      int     // pairs where both sides are NaN (not exact)

	Ours, Ref Side     // each side's special values
	ULP       ULPStats // distances on Format's lattice

	RowLen         int     // elements in a row (the last dimension)
	Rows           int     // Count / RowLen
	WorstRow       int     // first row holding the largest |ours-ref|; -1 if Finite == 0
	WorstRowMaxAbs float64 // that row's largest |ours-ref|
}

// Side counts one side's values that the difference metrics leave out or
// that do not fit the format.
type Side struct {
	NaN    int
	PosInf int
	NegInf int
	// Inexact counts values not representable in the reference's format;
	// rounding moves them before bits and ULPs are compared. Non-zero on the
	// reference side means the format given for it is wrong.
	Inexact int
}

// ULPStats summarises ULP distances on the format's lattice over the pairs
// where neither side is NaN.
type ULPStats struct {
	Count  int    // pairs measured
	Median uint64 // nearest-rank median (the lower median for even Count)
	P99    uint64 // nearest-rank 99th percentile
	Max    uint64 // exact
	// Resolution is 1 when Median and P99 are exact, which is always the
	// case below 65536 ULPs (so always for bf16 and f16). Otherwise an f32
	// comparison had so many distinct large distances that they were
	// bucketed, and Median or P99 is the lower edge of a bucket this wide.
	Resolution uint64
	Hist       [NumULPBuckets]int // see ULPBucketLabel
}

// Compare computes the metrics of one whole tensor pair; rowLen is its last
// dimension. Use an Accumulator to stream a large tensor in chunks.
func Compare(ours, ref []float32, f precision.Format, rowLen int) (Metrics, error) {
	a, err := NewAccumulator(f, rowLen)
	if err != nil {
		return Metrics{}, err
	}
	if err := a.Add(ours, ref); err != nil {
		return Metrics{}, err
	}
	return a.Result()
}
