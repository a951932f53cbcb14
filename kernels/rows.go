package kernels

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// The row kernels (zf_norm_seq, zf_linear_seq, zf_attention_seq): their
// parameter blocks, and the one place an op's arguments and exec.Spec are
// turned into them, so every backend that launches them (metal; cuda's
// tests) asks for the same arithmetic, and refuses what they do not do.

// Codes shared with pointwise.zf (render_test.go checks them).
const (
	NormLayer = 1 // ZF_NORM_LAYER
	NormRMS   = 2 // ZF_NORM_RMS

	AttnDMax     = 256 // ZF_ATTN_DMAX: the widest head zf_attention_seq holds
	MaskCausal   = 1   // ZF_MASK_CAUSAL
	MaskExplicit = 2   // ZF_MASK_EXPLICIT
	AEach        = 1   // ZF_A_EACH
	AScores      = 2   // ZF_A_SCORES
	AProbs       = 4   // ZF_A_PROBS
	AWeights     = 8   // ZF_A_WEIGHTS
	AAccum       = 16  // ZF_A_ACCUM
	AQuery       = 32  // ZF_A_QUERY
)

// NormSeqP is zf_norm_seq_p.
type NormSeqP struct {
	Groups, G, Kind, Flags, FmtX, FmtG, FmtB, OutFmt, HasG, HasB int32
	Eps, Offset                                                  float32
}

// LinearSeqP is zf_linear_seq_p.
type LinearSeqP struct {
	M, N, K, FmtX, FmtW, FmtB, OutFmt, HasB, RoundBeforeBias, Vec, Mma, Pad1 int32
}

// AttentionSeqP is zf_attention_seq_p.
type AttentionSeqP struct {
	B, Sq, Sk, H, KV, D                  int32
	FmtQ, FmtK, FmtV, FmtM, FmtB, OutFmt int32
	Mask, Window, MSb, MSi, MSj          int32
	HasBias, BSb, BSh, BSi, BSj          int32
	Flags, Math, ALiBi                   int32
	Scale, Cap                           float32
	Pad                                  int32
}

// fits checks that every index a kernel computes stays in int32.
func fits(op string, counts ...int) error {
	for _, n := range counts {
		if n > MaxElems {
			return fmt.Errorf("kernels: %s: %d elements, more than one launch indexes (%d)", op, n, MaxElems)
		}
	}
	return nil
}

// NormSeq lays out zf_norm_seq for x of the given shape and format, γ and
// β in fg, fb (0: absent), as exec.Backend's Norm defines it. It refuses
// (exec.ErrUnsupported, naming backend) what the kernel does not compute:
// RoundStats and MathWelford (PyTorch kernels' own reductions).
func NormSeq(backend string, shape []int, fx, fg, fb precision.Format, p exec.NormParams, s exec.Spec) (NormSeqP, error) {
	var np NormSeqP
	if err := s.Check(); err != nil {
		return np, fmt.Errorf("norm: %w", err)
	}
	if s.Round&(exec.RoundStats|exec.RoundMoments) != 0 || s.Math&exec.MathWelford != 0 {
		return np, exec.Unsupported(backend, "norm", "%v: zf_norm_seq computes the f64 statistics only",
			exec.Spec{Out: s.Out, Round: s.Round & (exec.RoundStats | exec.RoundMoments), Math: s.Math & exec.MathWelford})
	}
	switch p.Kind {
	case exec.NormLayer:
		np.Kind = NormLayer
	case exec.NormRMS:
		np.Kind = NormRMS
	default:
		return np, exec.Unsupported(backend, "norm", "kind %v", p.Kind)
	}
	if len(shape) == 0 {
		return np, fmt.Errorf("exec: norm: x is a scalar")
	}
	last := shape[len(shape)-1]
	g := p.Group
	if g == 0 {
		g = last
	}
	if g <= 0 || last%g != 0 {
		return np, fmt.Errorf("exec: norm: group %d does not divide the last axis %d", p.Group, last)
	}
	if fg == 0 && p.Offset != 0 {
		return np, fmt.Errorf("exec: norm: offset %g without γ", p.Offset)
	}
	n := exec.Numel(shape)
	if err := fits("norm", n); err != nil {
		return np, exec.Unsupported(backend, "norm", "%v", err)
	}
	np = NormSeqP{Groups: int32(n / g), G: int32(g), Kind: np.Kind, FmtX: int32(fx), FmtG: int32(fg), FmtB: int32(fb),
		OutFmt: int32(s.Out), Eps: p.Eps, Offset: p.Offset}
	if fg != 0 {
		np.HasG = 1
	}
	if fb != 0 {
		np.HasB = 1
	}
	if s.Has(exec.RoundNormalized) {
		np.Flags |= RNormalized
	}
	if s.Has(exec.RoundScale) {
		np.Flags |= RScale
	}
	if s.Has(exec.RoundProduct) {
		np.Flags |= RProduct
	}
	l2, err := NormFlags(backend, p, s)
	if err != nil {
		return np, err
	}
	np.Flags |= l2
	return np, nil
}

// NormFlags are a norm's flags from its math variants (ZF_N_L2,
// ZF_N_L2_F32 and ZF_N_L2_UP for exec.MathL2), refusing MathL2 on a layer
// norm.
func NormFlags(backend string, p exec.NormParams, s exec.Spec) (int32, error) {
	if s.Math&exec.MathL2 == 0 {
		return 0, nil
	}
	if p.Kind != exec.NormRMS {
		return 0, exec.Unsupported(backend, "norm", "%v on a %v norm (F.normalize times √G: RMS norms)", exec.MathL2, p.Kind)
	}
	f := int32(NormL2)
	if s.Math&exec.MathScalarF32 != 0 {
		f |= NormL2F32
	}
	if s.Math&exec.MathNormalizeF32 != 0 {
		f |= NormL2Up
	}
	return f, nil
}

// LinearSeq lays out zf_linear_seq for x [..., in] and w [out, in], with a
// bias in fb (0: absent); it returns the output's shape.
func LinearSeq(backend string, xs, ws []int, fx, fw, fb precision.Format, s exec.Spec) (LinearSeqP, []int, error) {
	var lp LinearSeqP
	if err := s.Check(); err != nil {
		return lp, nil, fmt.Errorf("linear: %w", err)
	}
	if len(ws) != 2 || len(xs) == 0 || xs[len(xs)-1] != ws[1] {
		return lp, nil, fmt.Errorf("exec: linear: x %v and weight %v do not match ([..., in] and [out, in])", xs, ws)
	}
	nOut, nIn := ws[0], ws[1]
	out := append(append([]int(nil), xs[:len(xs)-1]...), nOut)
	m := exec.Numel(out) / max(nOut, 1)
	if err := fits("linear", exec.Numel(out), exec.Numel(xs), exec.Numel(ws)); err != nil {
		return lp, nil, exec.Unsupported(backend, "linear", "%v", err)
	}
	lp = LinearSeqP{M: int32(m), N: int32(nOut), K: int32(nIn), FmtX: int32(fx), FmtW: int32(fw), FmtB: int32(fb), OutFmt: int32(s.Out)}
	if fb != 0 {
		lp.HasB = 1
	}
	if s.Has(exec.RoundBeforeBias) {
		lp.RoundBeforeBias = 1
	}
	if s.Has(exec.RoundAccum) {
		return lp, nil, exec.Unsupported(backend, "linear", "%v (sums stored in %v one product at a time)", exec.RoundAccum, s.Out)
	}
	if nIn%8 == 0 {
		lp.Vec = 1 // every row starts on a 16-byte boundary
	}
	if exec.TensorCoreSums(s, fx, fw) {
		lp.Mma = 1
	}
	return lp, out, nil
}

// AttentionSeq lays out zf_attention_seq for a call exec.CheckAttention
// has accepted (a), with q, k, v, mask and bias in the given formats (0:
// absent); it returns the ALiBi slopes the kernel reads (f32, one a head;
// nil without ALiBi). Heads wider than AttnDMax are refused.
func AttentionSeq(backend string, a exec.AttentionArgs, p exec.AttentionParams, s exec.Spec, fq, fk, fv, fm, fb precision.Format) (AttentionSeqP, []float32, error) {
	var ap AttentionSeqP
	if err := s.Check(); err != nil {
		return ap, nil, fmt.Errorf("attention: %w", err)
	}
	g := a.AttentionDims
	if p.Window > 0 && p.Mask != exec.MaskCausal {
		return ap, nil, exec.Unsupported(backend, "attention", "a bidirectional window (band) of %d", p.Window)
	}
	if p.Block > 0 {
		return ap, nil, exec.Unsupported(backend, "attention", "block-local attention (blocks of %d)", p.Block)
	}
	if g.D > AttnDMax {
		return ap, nil, exec.Unsupported(backend, "attention", "head dim %d (zf_attention_seq holds at most %d)", g.D, AttnDMax)
	}
	if s.Math&exec.MathOnlineSoftmax != 0 {
		return ap, nil, exec.Unsupported(backend, "attention", "%v (zf_attention_seq keeps every key in one pass)", exec.MathOnlineSoftmax)
	}
	rprob, rw := s.Round&exec.RoundProbs != 0, s.Round&exec.RoundWeights != 0
	if rprob && rw {
		return ap, nil, fmt.Errorf("exec: attention: RoundProbs and RoundWeights both set")
	}
	if exec.TensorCoreSums(s, fq, fk, fv) && s.Round&exec.RoundAccum != 0 {
		return ap, nil, exec.Unsupported(backend, "attention", "%v with RoundAccum (a GPU's tensor-core sums and a CPU's storage-format ones)", exec.MathTensorCore)
	}
	counts := []int{g.B * g.Sq * g.H * g.D, g.B * g.Sk * g.KV * g.D, g.B * g.H * g.Sq}
	if st := a.MaskStrides; st != nil {
		counts = append(counts, (g.B-1)*st[0]+(g.Sq-1)*st[1]+(g.Sk-1)*st[2]+1)
	}
	if st := a.BiasStrides; st != nil {
		counts = append(counts, (g.B-1)*st[0]+(g.H-1)*st[1]+(g.Sq-1)*st[2]+(g.Sk-1)*st[3]+1)
	}
	if err := fits("attention", counts...); err != nil {
		return ap, nil, exec.Unsupported(backend, "attention", "%v", err)
	}
	ap = AttentionSeqP{B: int32(g.B), Sq: int32(g.Sq), Sk: int32(g.Sk), H: int32(g.H), KV: int32(g.KV), D: int32(g.D),
		FmtQ: int32(fq), FmtK: int32(fk), FmtV: int32(fv), FmtM: int32(fm), FmtB: int32(fb), OutFmt: int32(s.Out),
		Window: int32(p.Window), Math: int32(s.Math &^ exec.MathTensorCore), Scale: a.Scale, Cap: p.Softcap}
	if exec.TensorCoreSums(s, fq, fk, fv) {
		ap.Math |= int32(exec.MathTensorCore)
	}
	switch p.Mask {
	case exec.MaskCausal:
		ap.Mask = MaskCausal
	case exec.MaskExplicit:
		ap.Mask = MaskExplicit
		ap.MSb, ap.MSi, ap.MSj = int32(a.MaskStrides[0]), int32(a.MaskStrides[1]), int32(a.MaskStrides[2])
	}
	if a.BiasStrides != nil {
		ap.HasBias = 1
		ap.BSb, ap.BSh, ap.BSi, ap.BSj = int32(a.BiasStrides[0]), int32(a.BiasStrides[1]), int32(a.BiasStrides[2]), int32(a.BiasStrides[3])
	}
	each := s.Round&exec.RoundEach != 0
	switch {
	case each:
		ap.Flags |= AEach | AProbs // the math SDPA: every intermediate in the storage format
	case s.Round&exec.RoundScores != 0:
		ap.Flags |= AScores
	}
	if rprob {
		ap.Flags |= AProbs
	}
	if rw {
		ap.Flags |= AWeights
	}
	if s.Round&exec.RoundAccum != 0 {
		ap.Flags |= AAccum
	}
	if s.Round&exec.RoundQuery != 0 {
		ap.Flags |= AQuery
	}
	slopes := p.Slopes(g.H)
	if slopes != nil {
		ap.ALiBi = 1
	}
	return ap, slopes, nil
}
