package reports

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/precision"
)

// Accumulator computes Metrics in one streaming pass over chunks of a tensor
// pair, with float64 sums. Chunks are consecutive in row-major order and may
// split rows. The zero Accumulator is not usable: call NewAccumulator.
type Accumulator struct {
	format precision.Format
	rowLen int

	n, finite, exact, nanPairs int
	masked, maskMismatch       int
	lim                        uint32 // precision.MaskBits(format)
	ours, ref                  Side

	sumAbs, sumSqDiff, sumSqOurs, sumSqRef, dot float64
	maxAbs, maxRef                              float64
	maxAbsIndex                                 int

	row, col                int     // position of the next element
	rowMax                  float64 // largest |diff| so far in row
	worstRow                int
	worstMax                float64
	rowSeenFinite, anyWorst bool

	ulp ulpHist
}

// NewAccumulator starts a comparison against a reference stored in f, whose
// rows (last dimension) are rowLen long. f64 references are refused: they
// would have been narrowed to reach a []float32, and their bits are lost.
func NewAccumulator(f precision.Format, rowLen int) (*Accumulator, error) {
	switch {
	case f == precision.F64:
		return nil, fmt.Errorf("reports: cannot compare against an f64 reference through float32 values")
	case !f.Valid():
		return nil, fmt.Errorf("reports: invalid reference format %v", f)
	case rowLen <= 0:
		return nil, fmt.Errorf("reports: row length %d, want > 0", rowLen)
	}
	return &Accumulator{format: f, rowLen: rowLen, maxAbsIndex: -1, worstRow: -1, lim: precision.MaskBits(f)}, nil
}

// Add folds in the next chunk of the pair.
func (a *Accumulator) Add(ours, ref []float32) error {
	if len(ours) != len(ref) {
		return fmt.Errorf("reports: chunk of %d values against %d reference values", len(ours), len(ref))
	}
	f := a.format
	// Per-chunk partial sums, added to the totals once: shorter runs of
	// float64 additions, so less rounding error on long streams.
	var sumAbs, sumSqDiff, sumSqOurs, sumSqRef, dot float64
	for i, o32 := range ours {
		r32 := ref[i]
		if math.Float32bits(o32)&0x7FFFFFFF >= a.lim || math.Float32bits(r32)&0x7FFFFFFF >= a.lim {
			a.special(o32, r32) // NaN, Inf or mask-sized
		} else {
			if f.Round(o32) != o32 {
				a.ours.Inexact++
			}
			if f.Round(r32) != r32 {
				a.ref.Inexact++
			}
			d := precision.ULPDistance(f, o32, r32)
			if d == 0 {
				a.exact++
			}
			a.ulp.add(d)
			a.finite++
			o, r := float64(o32), float64(r32)
			diff := math.Abs(o - r)
			sumAbs += diff
			sumSqDiff += diff * diff
			sumSqOurs += o * o
			sumSqRef += r * r
			dot += o * r
			// plain comparisons: the builtin max orders NaN and -0, which
			// finite non-negative values do not need, at a cost here
			if ar := math.Abs(r); ar > a.maxRef {
				a.maxRef = ar
			}
			if diff > a.maxAbs || a.maxAbsIndex < 0 {
				a.maxAbs, a.maxAbsIndex = diff, a.n
			}
			if diff > a.rowMax {
				a.rowMax = diff
			}
			a.rowSeenFinite = true
		}
		a.n++
		if a.col++; a.col == a.rowLen {
			a.endRow()
		}
	}
	a.sumAbs += sumAbs
	a.sumSqDiff += sumSqDiff
	a.sumSqOurs += sumSqOurs
	a.sumSqRef += sumSqRef
	a.dot += dot
	return nil
}

// countMask counts a pair outside the ordinary ones (precision.Classify)
// into masked or, for finite values only (NaN and Inf pairs are the
// nonfinite counts'), maskMismatch.
func countMask(f precision.Format, o, r float32, masked, mismatch int) (int, int) {
	switch precision.Classify(f, o, r) {
	case precision.MaskMatch:
		masked++
	case precision.Mismatch:
		if finite32(o) && finite32(r) {
			mismatch++
		}
	}
	return masked, mismatch
}

// finite32 reports whether x is neither NaN nor ±Inf.
func finite32(x float32) bool { return math.Float32bits(x)&0x7FFFFFFF < 0x7F800000 }

// special handles a pair with a NaN, an Inf or a mask-sized value on at
// least one side: it is counted on each side, and on the lattice unless a
// NaN is involved.
func (a *Accumulator) special(o, r float32) {
	a.tally(&a.ours, o)
	a.tally(&a.ref, r)
	a.masked, a.maskMismatch = countMask(a.format, o, r, a.masked, a.maskMismatch)
	switch {
	case o != o && r != r:
		a.nanPairs++
	case o != o || r != r:
	default:
		d := precision.ULPDistance(a.format, o, r)
		if d == 0 {
			a.exact++
		}
		a.ulp.add(d)
	}
}

// tally counts x's special values on side s.
func (a *Accumulator) tally(s *Side, x float32) {
	switch {
	case x != x:
		s.NaN++
	case math.IsInf(float64(x), 1):
		s.PosInf++
	case math.IsInf(float64(x), -1):
		s.NegInf++
	case a.format.Round(x) != x:
		s.Inexact++
	}
}

// endRow closes the current row, keeping the first row with the largest
// |diff| among rows that had a finite pair.
func (a *Accumulator) endRow() {
	if a.rowSeenFinite && (!a.anyWorst || a.rowMax > a.worstMax) {
		a.worstRow, a.worstMax, a.anyWorst = a.row, a.rowMax, true
	}
	a.row++
	a.col = 0
	a.rowMax = 0
	a.rowSeenFinite = false
}

// Result returns the metrics of everything added so far. It fails if the
// elements added are not a whole number of rows. It does not change the
// Accumulator; more chunks may follow.
func (a *Accumulator) Result() (Metrics, error) {
	if a.col != 0 {
		return Metrics{}, fmt.Errorf("reports: %d elements are not whole rows of %d", a.n, a.rowLen)
	}
	m := Metrics{
		Format: a.format, Count: a.n, Finite: a.finite,
		MaxAbs: a.maxAbs, MaxAbsIndex: a.maxAbsIndex,
		Exact: a.exact, NaNPairs: a.nanPairs, Masked: a.masked, MaskMismatch: a.maskMismatch,
		Ours: a.ours, Ref: a.ref, ULP: a.ulp.stats(),
		RowLen: a.rowLen, Rows: a.row, WorstRow: a.worstRow, WorstRowMaxAbs: a.worstMax,
		RelRMS: precision.RelRMSFromSums(a.sumSqDiff, a.sumSqRef),
		Cosine: cosine(a.dot, a.sumSqOurs, a.sumSqRef),
		PSNR:   math.Inf(1),
	}
	if a.maskMismatch > 0 {
		m.RelRMS = math.Inf(1) // a mask where the reference has none, or none where it has one
	}
	m.ExactFraction = 1 // nothing compared, nothing differs
	if a.n > 0 {
		m.ExactFraction = float64(a.exact) / float64(a.n)
	}
	if a.finite > 0 {
		m.MeanAbs = a.sumAbs / float64(a.finite)
		if a.sumSqDiff > 0 {
			rms := math.Sqrt(a.sumSqDiff / float64(a.finite))
			m.PSNR = 20 * math.Log10(a.maxRef/rms)
		}
	}
	return m, nil
}

// cosine is dot/sqrt(ss1·ss2): 1 when both vectors are zero (identical), 0
// when exactly one is.
func cosine(dot, ss1, ss2 float64) float64 {
	switch {
	case ss1 == 0 && ss2 == 0:
		return 1
	case ss1 == 0 || ss2 == 0:
		return 0
	}
	// rounding can carry the quotient just past ±1
	return max(-1, min(1, dot/math.Sqrt(ss1*ss2)))
}
