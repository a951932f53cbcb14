// Package reports compares a port's tensors with the reference's and says
// what the difference looks like: metrics per boundary, statistics per
// channel, and a diagnosis. Bit-exact, ULP distance and rel-RMS are defined
// in package precision; this package uses those definitions unchanged.
//
// # Metrics of one boundary
//
// Compare, or an Accumulator fed chunk by chunk, takes ours and the
// reference as float32 (already widened) and the format the reference was
// stored in. An f64 reference is refused: narrowing it to reach float32
// would lose the bits being compared. Every sum is a float64, one pass.
//
// Difference metrics use the finite pairs only (both sides neither NaN nor
// Inf, nor mask-sized); Finite says how many. A pair with a NaN or Inf is
// counted in the sides' NaN/PosInf/NegInf counts instead, so a gate must
// look at those too. A pair with a mask-sized value (precision.MaskSized:
// at least 2^127 in f32 and bf16, 2^15 in f16, ±Inf included, as
// finfo.min in an attention mask) is compared apart and exactly: Masked
// counts the pairs mask-sized on both sides with one sign (a match);
// MaskMismatch the pairs of finite values where only one side is
// mask-sized or the signs differ, and makes RelRMS +Inf so the default
// rel_rms gate fails. One mask squared outweighs every ordinary entry: left
// in, it would make the rel-RMS about 1e-39 whatever the rest is.
// With d = ours - ref over the finite pairs:
//
//   - MaxAbs: max |d|; MaxAbsIndex is the first element reaching it.
//   - MeanAbs: Σ|d| / Finite.
//   - RelRMS: sqrt(Σd² / Σref²); 0 if both sums are 0, +Inf if only Σref² is.
//   - Cosine: Σ ours·ref / sqrt(Σours² · Σref²), clamped to [-1, 1]; 1 when
//     both sides are all zeros, 0 when exactly one is.
//   - PSNR: 20·log10(max|ref| / sqrt(Σd²/Finite)) dB; +Inf when d is all
//     zeros (identical, or nothing finite to compare), -Inf when the
//     reference is all zeros and ours is not.
//
// Exactness and ULPs are read in the reference's format, after rounding
// ours to it (a no-op for a port that stores in that format; Side.Inexact
// counts values the rounding moved, and a non-zero count on the reference
// side means the format given for it is wrong):
//
//   - Exact: pairs bit-exact in the format. +0 equals -0 and equal
//     infinities are exact; a NaN is never exact. NaNPairs counts pairs with
//     both sides NaN. ExactFraction = Exact / Count (1 for an empty pair).
//   - ULP: distances on the format's lattice over every pair with no NaN
//     (so Inf vs the largest finite value is 1 ULP). Median and P99 are
//     nearest-rank: the smallest d such that at least ceil(q·Count)
//     distances are <= d (the median of an even count is the lower one).
//     They are exact from a histogram: distances below 65536 are counted one
//     by one, which covers every bf16 and f16 distance; larger ones (f32
//     only) go in a map which, if it would pass 65536 distinct values,
//     halves its resolution as often as needed. Resolution reports this: 1
//     means exact, otherwise Median or P99, if at or above 65536, is the
//     lower edge of a bucket Resolution ULPs wide. Max is always exact.
//   - ULP.Hist: fixed buckets of distance 0, 1, 2, 3-4, 5-8, 9-16, ...,
//     513-1024, >1024 (ULPBucketLabel names them).
//
// Rows are RowLen consecutive elements (the last dimension). WorstRow is
// the first row holding the largest |d| among its finite pairs, and
// WorstRowMaxAbs that value; -1 when no pair is finite. Result refuses a
// stream that stopped inside a row.
//
// # Per-channel statistics
//
// A tensor read as rows × channels (channels = the last dimension) has, for
// each channel, the mean and the population standard deviation (divided by
// n, as NumPy's default; PyTorch's std divides by n-1) of its finite values.
// ChannelStats gives them with the range of the means and of the stds over
// the channels; ChannelAccumulator streams whole rows (two passes per
// chunk, merged with Chan et al.'s update). CompareChannels gives both
// sides and, per channel, mean and std differences (ours - ref) and the std
// ratio ours/ref (1 when both stds are 0, +Inf when only the reference's
// is).
//
// # Signature
//
// Diagnose reads a failing pair's error and names one signature, with the
// numbers it used (Evidence) and a one-line Reason. The rules are tried in
// this order and the first that holds wins; all thresholds are the named
// constants in signature.go.
//
//  0. Before any rule, mask-sized pairs matching on both sides (Masked) are
//     left out of every statistic, as they are of the metrics; finite pairs
//     mask-sized on one side only (MaskMismatch > 0) name numerics first.
//  1. numerics, if any position is NaN or Inf on one side and not the same
//     on the other (NonFiniteMismatch > 0). Matching NaN/Inf, such as a
//     -Inf attention mask on both sides, are not faults.
//  2. none, if RelRMS over the finite pairs is at most CleanRelRMS = 2^-8,
//     bf16's unit roundoff: what remains is rounding. DiagnoseIn takes the
//     reference's format and uses its unit roundoff instead
//     (CleanRelRMSFor: f16 2^-11, f32 2^-24), so an f32 reference's error
//     far above f32 rounding is read even when it is below bf16's.
//  3. numerics, if values beyond the f16 range (|x| > 65504) on one side
//     only carry at least F16RangeShare (half) of Σd².
//  4. numerics, if the largest OutlierFraction (0.1%, at least one) of the
//     errors carry at least OutlierShare (half) of Σd² and lie in at least
//     OutlierRowsFrac (half) as many distinct rows as there are of them:
//     isolated outliers, not one bad row.
//  5. topology, if sorting each channel makes at least TopologyMultiset
//     (95%) of the finite pairs match (MultisetMatch) and that is at least
//     TopologyGain (25 points) more than match in place (PositionMatch): the
//     values are all there but moved (permuted tokens, a transposed
//     unpatchify). "Match" is within MultisetTol = 2^-8 of the channel's
//     reference RMS.
//  6. topology, if there are at least MinStructureRows rows and at most
//     RowConcentration (half) of them hold 90% of Σd² (RowFraction90): the
//     error sits in row blocks (one stream of a joint sequence, RoPE on
//     some axes).
//  7. numerics, if the error is not a function of the reference value:
//     Systematic, the best of three estimates of the share of Σd² such a
//     function removes, is below SmoothExplainedOK (0.5). The estimates:
//     SmoothExplained subtracts, within each channel, the mean d of pairs
//     with similar reference values (up to 16 equal-count bins of the
//     sorted reference, at least 32 rows a bin); PooledExplained does the
//     same over all channels at once (up to 64 bins of at least 32 pairs),
//     which sees an element-wise function with few rows per channel;
//     AffineExplained is the per-channel affine fit of rule 8. Random
//     error scores near the fits' chance level (about 2·channels/pairs for
//     the affine fit). The threshold is not higher because a wrong
//     activation cannot score near 1: GELU is not one-to-one below zero,
//     so two inputs with one reference value carry different errors (the
//     planted SiLU-for-GELU fault at 16 rows scores 0.80, erf-for-tanh
//     GELU 0.75).
//  8. activation, if the error is systematic but a per-channel affine fit
//     ours ≈ α·ref + β removes less than AffineExplainedOK (0.9) of Σd²
//     (AffineExplained): a non-linear function, such as SiLU for GELU.
//  9. Otherwise the error is affine per channel: a modulation-like fault.
//     It splits, per channel, into a scale part n(α-1)²·var(ref) (std off)
//     and a mean part n·Δmean² (mean off), and the mean part that the
//     scale does not explain is n·(Δmean - (α-1)·mean(ref))². magnitude if
//     the scale part is at least DominantShare (0.9) of scale + the
//     smaller of the two mean parts (ScaleShare): std off with means
//     matched, or moved only as the scale moves them (a missing 1 + scale,
//     a norm's scale).
//  10. bias otherwise: the means are off beyond what the scale explains,
//     with or without the std (a shift, a residual, a chunk order: reading
//     [shift, scale] as [scale, shift] moves the means and the stds about
//     equally, MeanShare about 0.6, and is affine).
//
// Evidence also carries StdRatio (range over channels of ours std / ref
// std), MeanShift (largest |Δmean| in units of the reference std) and Slope
// (range of α), for people reading the report. Diagnose cannot separate a
// wrong norm kind (statistics per row, not per channel) from random error:
// it reports such a fault as numerics or activation.
package reports
