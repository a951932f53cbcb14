package reports

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/precision"
)

// Signature is the kind of fault a failing boundary's error looks like.
type Signature uint8

// The signatures, in the order Diagnose tests for them after NoSignature.
const (
	NoSignature Signature = iota // the pair agrees to within CleanRelRMS
	Numerics                     // NaN/Inf where the other side is finite, f16 range, isolated outliers, or random error
	Topology                     // values in the wrong places: permuted rows, transposed grids, row blocks
	Magnitude                    // per-channel scale off, means matched or moved only with the scale
	Bias                         // per-channel mean off beyond what the scale explains
	Activation                   // a systematic, non-affine function of the reference
)

func (s Signature) String() string {
	switch s {
	case NoSignature:
		return "none"
	case Numerics:
		return "numerics"
	case Topology:
		return "topology"
	case Magnitude:
		return "magnitude"
	case Bias:
		return "bias"
	case Activation:
		return "activation"
	}
	return fmt.Sprintf("Signature(%d)", uint8(s))
}

// The thresholds Diagnose uses; the package doc explains each.
const (
	CleanRelRMS       = 1.0 / 256 // bf16's machine epsilon, 2^-8
	F16Max            = 65504     // largest finite binary16
	F16RangeShare     = 0.5       // share of error at f16-range mismatches that means numerics
	OutlierFraction   = 0.001     // the "top" elements for TopErrorShare
	OutlierShare      = 0.5       // TopErrorShare at or above which error is outliers...
	OutlierRowsFrac   = 0.5       // ...if they spread over at least this fraction of distinct rows
	MultisetTol       = 1.0 / 256 // value match tolerance, in units of the channel's reference RMS
	TopologyMultiset  = 0.95      // MultisetMatch at or above which values are all there...
	TopologyGain      = 0.25      // ...and this much more than PositionMatch: they moved
	RowConcentration  = 0.5       // RowFraction90 at or below which error is in row blocks
	MinStructureRows  = 8         // fewer rows than this say nothing about row blocks
	SmoothExplainedOK = 0.5       // error this much a function of the reference value is systematic
	AffineExplainedOK = 0.9       // ...and this much per-channel affine is scale and/or shift
	DominantShare     = 0.9       // share of the affine error one component needs to name it alone
	maxBins           = 16        // SmoothExplained's bins per channel at most
	maxPooledBins     = 64        // PooledExplained's bins at most
	rowsPerBin        = 32        // and at least this many rows in each
)

// Evidence holds the numbers Diagnose decided from; the package doc defines
// each one.
type Evidence struct {
	RelRMS float64 // over finite pairs that are not mask-sized
	Rows   int

	// Masked counts pairs mask-sized on both sides with one sign
	// (precision.MaskSized: finfo.min, ±Inf), left out of every statistic
	// below; MaskMismatch pairs where only one side is mask-sized (or the
	// signs differ), which no rounding explains.
	Masked, MaskMismatch int

	OursNaN, OursInf, RefNaN, RefInf int
	NonFiniteMismatch                int // positions where the sides' classes (finite, NaN, +Inf, -Inf) differ

	F16RangeMismatch int     // finite positions where exactly one side is beyond ±F16Max
	F16RangeShare    float64 // their share of Σdiff²

	TopErrorShare float64 // share of Σdiff² in the largest OutlierFraction of |diff|
	TopErrorCount int     // how many of those elements differ at all
	TopErrorRows  int     // distinct rows they lie in

	MultisetMatch float64 // fraction of finite pairs matched by per-channel sorted order
	PositionMatch float64 // fraction of finite pairs matching in place
	RowFraction90 float64 // fraction of rows holding 90% of Σdiff²

	StdRatio  Range   // ours std / ref std, over channels with ref std > 0
	MeanShift float64 // largest |Δmean| / ref std over channels
	Slope     Range   // per-channel least-squares slope of ours on ref

	SmoothExplained float64 // share of Σdiff² explained by a per-channel function of ref (binned)
	PooledExplained float64 // share of Σdiff² explained by one function of ref for all channels (binned)
	AffineExplained float64 // share of Σdiff² explained by a per-channel affine map of ref
	ScaleShare      float64 // scale energy / (scale + unexplained mean shift)
	MeanShare       float64 // mean-shift energy / (scale + mean shift)
}

// Diagnosis is a signature with the evidence for it.
type Diagnosis struct {
	Signature Signature
	Reason    string // one line naming the rule that fired and its numbers
	Evidence  Evidence
}

// Diagnose reads the signature of the error between ours and ref, both
// rows × channels (channels is the last dimension). It needs whole tensors:
// the topology tests sort each channel.
func Diagnose(ours, ref []float32, channels int) (Diagnosis, error) {
	return DiagnoseIn(ours, ref, channels, precision.BF16)
}

// DiagnoseIn is Diagnose for a reference stored in format f: rule 2 calls
// the pair clean only within CleanRelRMSFor(f), f's rounding, so an error
// far above f32's rounding but below bf16's is still read in an f32
// reference. Diagnose is DiagnoseIn with BF16.
func DiagnoseIn(ours, ref []float32, channels int, f precision.Format) (Diagnosis, error) {
	switch {
	case len(ours) != len(ref):
		return Diagnosis{}, fmt.Errorf("reports: diagnose %d values against %d reference values", len(ours), len(ref))
	case channels <= 0:
		return Diagnosis{}, fmt.Errorf("reports: diagnose with %d channels, want > 0", channels)
	case len(ref)%channels != 0:
		return Diagnosis{}, fmt.Errorf("reports: diagnose %d values, not whole rows of %d channels", len(ref), channels)
	}
	return diagnose(ours, ref, channels, f, true), nil
}

// diagnose measures and decides; tokenRows false says the rows are not
// token rows (a single-row tensor read as one channel), so the row-block
// rule does not apply: RowFraction90 is then reported as 1.
func diagnose(ours, ref []float32, channels int, f precision.Format, tokenRows bool) Diagnosis {
	ours, ref, masked, mismatched := unmask(ours, ref, f)
	ev := measure(ours, ref, channels)
	ev.Masked, ev.MaskMismatch = masked, mismatched
	if !tokenRows {
		ev.RowFraction90 = 1
	}
	sig, reason := decide(ev, CleanRelRMSFor(f))
	return Diagnosis{Signature: sig, Reason: reason, Evidence: ev}
}

// unmask takes the pairs mask-sized on both sides with one sign out of the
// statistics, as precision.Sums does for rel-RMS: they are set to zero on
// both sides (a zero difference of zero weight) in copies made only when
// there is one, so a mask's size neither hides an error elsewhere in the
// tensor nor makes one. It returns how many pairs were matched masks and
// how many finite pairs were mask-sized on one side only (left as they
// are; NaN and Inf are the non-finite counts' part).
func unmask(ours, ref []float32, f precision.Format) (o, r []float32, masked, mismatched int) {
	o, r = ours, ref
	for i, x := range ref {
		if !precision.MaskSized(f, x) && !precision.MaskSized(f, ours[i]) {
			continue
		}
		if precision.Classify(f, ours[i], x) != precision.MaskMatch {
			if isFinite(x) && isFinite(ours[i]) { // NaN and Inf: the non-finite counts' part
				mismatched++
			}
			continue
		}
		if masked == 0 {
			o, r = slices.Clone(ours), slices.Clone(ref)
		}
		masked++
		o[i], r[i] = 0, 0
	}
	return o, r, masked, mismatched
}

// CleanRelRMSFor is the rel-RMS within which DiagnoseIn calls a pair
// clean: the unit roundoff of f (bf16 2^-8 = CleanRelRMS, f16 2^-11, f32
// and f64 2^-24).
func CleanRelRMSFor(f precision.Format) float64 {
	switch f {
	case precision.BF16:
		return CleanRelRMS
	case precision.F16:
		return 1.0 / 2048
	}
	return 1.0 / (1 << 24)
}

// decide applies the rules in order; the first that holds names the
// signature.
func decide(e Evidence, clean float64) (Signature, string) {
	switch {
	case e.MaskMismatch > 0:
		return Numerics, fmt.Sprintf("%d positions are mask-sized on one side only (%d masked on both)", e.MaskMismatch, e.Masked)
	case e.NonFiniteMismatch > 0:
		return Numerics, fmt.Sprintf("%d positions are NaN/Inf on one side only (ours %d NaN %d Inf, ref %d NaN %d Inf)",
			e.NonFiniteMismatch, e.OursNaN, e.OursInf, e.RefNaN, e.RefInf)
	case e.RelRMS <= clean:
		return NoSignature, fmt.Sprintf("rel-RMS %.3g is within %.3g", e.RelRMS, clean)
	case e.F16RangeMismatch > 0 && e.F16RangeShare >= F16RangeShare:
		return Numerics, fmt.Sprintf("%d values cross the f16 range ±%d on one side only and carry %.0f%% of the error",
			e.F16RangeMismatch, F16Max, 100*e.F16RangeShare)
	case e.TopErrorShare >= OutlierShare && float64(e.TopErrorRows) >= OutlierRowsFrac*float64(min(e.TopErrorCount, e.Rows)):
		return Numerics, fmt.Sprintf("isolated outliers: the largest %d errors (%d rows) carry %.0f%% of the error",
			e.TopErrorCount, e.TopErrorRows, 100*e.TopErrorShare)
	case e.MultisetMatch >= TopologyMultiset && e.MultisetMatch-e.PositionMatch >= TopologyGain:
		return Topology, fmt.Sprintf("%.0f%% of values match per channel as multisets but only %.0f%% in place: values moved",
			100*e.MultisetMatch, 100*e.PositionMatch)
	case e.Rows >= MinStructureRows && e.RowFraction90 <= RowConcentration:
		return Topology, fmt.Sprintf("%.0f%% of rows hold 90%% of the error: row blocks", 100*e.RowFraction90)
	case e.Systematic() < SmoothExplainedOK:
		return Numerics, fmt.Sprintf("error is random: a function of the reference value explains only %.0f%% (per channel %.0f%%, pooled %.0f%%, affine %.0f%%)",
			100*e.Systematic(), 100*e.SmoothExplained, 100*e.PooledExplained, 100*e.AffineExplained)
	case e.AffineExplained < AffineExplainedOK:
		return Activation, fmt.Sprintf("error is a non-linear function of the reference value (%.0f%% explained, only %.0f%% by a per-channel affine map)",
			100*e.Systematic(), 100*e.AffineExplained)
	case e.ScaleShare >= DominantShare:
		return Magnitude, fmt.Sprintf("per-channel scale off (std ratio %.3g..%.3g, slope %.3g..%.3g, scale share %.2f); means match or follow the scale",
			e.StdRatio.Min, e.StdRatio.Max, e.Slope.Min, e.Slope.Max, e.ScaleShare)
	}
	return Bias, fmt.Sprintf("per-channel means off beyond what the scale explains (mean shift up to %.3g std, mean share %.2f, scale share %.2f, std ratio %.3g..%.3g): a shift, residual or chunk order",
		e.MeanShift, e.MeanShare, e.ScaleShare, e.StdRatio.Min, e.StdRatio.Max)
}

// Systematic is how much of the error a function of the reference value
// explains, by the best of the three estimates: per-channel bins, pooled
// bins, per-channel affine fit. Binning needs rows (rowsPerBin a bin); a
// boundary with few rows is read by the other two.
func (e Evidence) Systematic() float64 {
	return max(e.SmoothExplained, e.PooledExplained, e.AffineExplained)
}
