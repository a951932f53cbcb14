package kernels

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestFlashChoice: which attentions kernels.Flash gives the flash kernel,
// as the CUDA backend chooses (bf16/f16 inputs, no rounding of the
// probabilities or the accumulation), and the launch geometry.
func TestFlashChoice(t *testing.T) {
	bf, f16, f32 := precision.BF16, precision.F16, precision.F32
	a := exec.AttentionArgs{AttentionDims: exec.AttentionDims{B: 2, Sq: 33, Sk: 70, H: 4, KV: 2, D: 64}, Scale: 0.125}
	p := exec.AttentionParams{Heads: 4, KVHeads: 2}
	for _, c := range []struct {
		s          exec.Spec
		fq, fk, fv precision.Format
		flash      bool
	}{
		{exec.Out(bf), bf, bf, bf, true},
		{exec.Out(f32), f16, f16, f16, true},
		{exec.Spec{Out: bf, Round: exec.RoundScores | exec.RoundWeights}, bf, bf, bf, true},
		{exec.Out(f32), f32, f32, f32, false},
		{exec.Out(bf), bf, bf, f16, false},
		{exec.Composed(bf), bf, bf, bf, false},
		{exec.Spec{Out: bf, Round: exec.RoundProbs}, bf, bf, bf, false},
		{exec.Spec{Out: bf, Round: exec.RoundProbs | exec.RoundAccum}, bf, bf, bf, false},
		{exec.Spec{Out: bf, Math: exec.MathTensorCore}, bf, bf, bf, false},
	} {
		ap, _, err := AttentionSeq("host", a, p, c.s, c.fq, c.fk, c.fv, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, why := Flash(ap, c.s, c.fq, c.fk, c.fv); got != c.flash || got == (why != "") {
			t.Errorf("%v on %v/%v/%v: flash %v (%q), want %v", c.s, c.fq, c.fk, c.fv, got, why, c.flash)
		}
		if g := AttentionGroups(ap); g != 2*4*2 {
			t.Errorf("%v: %d groups, want 16 (2 batches × 4 heads × 2 blocks of 32 rows)", c.s, g)
		}
	}
	for d, want := range map[int]int{40: 64, 64: 64, 128: 32, 256: 16} {
		if got := AttentionTile(d); got != want {
			t.Errorf("AttentionTile(%d) = %d, want %d", d, got, want)
		}
	}
	if g := LinearTiledGroups(LinearSeqP{M: 65, N: 130, K: 7}); g != 2*3 {
		t.Errorf("LinearTiledGroups(65 × 130) = %d, want 6", g)
	}
}
