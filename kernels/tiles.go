package kernels

import (
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// The cooperative kernels of tiles.zf take the row kernels' parameter
// blocks (LinearSeqP, AttentionSeqP, laid out by LinearSeq and
// AttentionSeq); what is theirs is the launch: a fixed number of threads a
// group, and how many groups.

// Launch geometry shared with tiles.zf (render_test.go checks the codes).
const (
	GemmBM      = 64  // ZF_GEMM_BM: output rows a group
	GemmBN      = 64  // ZF_GEMM_BN: output columns a group
	GemmBK      = 16  // ZF_GEMM_BK: the k tile
	GemmThreads = 256 // ZF_GEMM_THREADS

	AttnRows    = 32   // ZF_AT_ROWS: query rows a group
	AttnThreads = 256  // ZF_AT_THREADS
	AttnKV      = 4352 // ZF_AT_KV: floats of a K or V tile
	AttnKeys    = 64   // ZF_AT_KEYS: the most keys a tile holds
)

// LinearTiledGroups is the number of groups zf_linear_tiled is launched
// with (GemmThreads threads each) for lp.
func LinearTiledGroups(lp LinearSeqP) int {
	return ceil(int(lp.M), GemmBM) * ceil(int(lp.N), GemmBN)
}

// AttentionGroups is the number of groups zf_attention_tiled and
// zf_attention_flash are launched with (AttnThreads threads each) for ap.
func AttentionGroups(ap AttentionSeqP) int {
	return int(ap.B) * int(ap.H) * ceil(int(ap.Sq), AttnRows)
}

// AttentionTile is the number of keys a tile of zf_attention_tiled and
// zf_attention_flash holds for head dim d (zf_at_tile).
func AttentionTile(d int) int {
	return min(AttnKeys, AttnKV/(d+1)/16*16)
}

// Flash reports whether zf_attention_flash may compute an attention that
// AttentionSeq laid out as ap for Spec s with inputs in fq, fk, fv, and
// if not, why. As the CUDA backend chooses its flash kernel: bf16 or f16
// inputs, and no rounding point that needs the final maximum or sum
// (RoundProbs, RoundEach) or a summation of its own (RoundAccum, the
// tensor-core sums), and q as stored (not RoundQuery's scaled q); the flash kernel's own arithmetic (running maximum,
// rescaled sums) is not bit-exact, which such a Spec has not asked for.
func Flash(ap AttentionSeqP, s exec.Spec, fq, fk, fv precision.Format) (bool, string) {
	switch {
	case fq != fk || fq != fv || (fq != precision.BF16 && fq != precision.F16):
		return false, "inputs not all bf16 or all f16"
	case ap.Flags&(AEach|AProbs|AAccum) != 0:
		return false, "the Spec rounds the probabilities or the accumulation"
	case ap.Flags&AQuery != 0:
		return false, "the Spec scales q first"
	case ap.Math&int32(exec.MathTensorCore) != 0:
		return false, "tensor-core sums"
	}
	return true, ""
}

// FlashBound is the rel-RMS against the CPU backend (the same Spec) that
// zf_attention_flash is held to: its running maximum and rescaled sums
// change f32 roundings before the final one, which moves a few outputs by
// an ulp of a 16-bit format (1e-3 is a quarter of bf16's half-ulp); an
// f32 output shows the f32 differences themselves (1e-5). Under
// RoundWeights the weights are rounded against the running maximum, not
// the final one, so whole weights move by an ulp of their format: 1e-2,
// the bound the CUDA backend's flash kernels are held to.
func FlashBound(s exec.Spec) float64 {
	switch {
	case s.Round&exec.RoundWeights != 0:
		return 1e-2
	case s.Out == precision.F32:
		return 1e-5
	}
	return 1e-3
}

func ceil(n, d int) int { return (n + d - 1) / d }
