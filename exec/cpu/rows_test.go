package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestRowIndependent: what RowIndependent claims. A block of rows given
// alone to a linear, or a block of query rows to an attention (every key;
// a causal one's first rows, whose keys are the same), gives the bits the
// whole call gives those rows, at every worker count and in every rounding.
func TestRowIndependent(t *testing.T) {
	bf16, f32 := precision.BF16, precision.F32
	for _, tc := range []struct {
		name      string
		op        string
		rows      int // rows of x, query rows of q
		lo, hi    int // the block
		f         precision.Format
		s         exec.Spec
		mask      exec.MaskKind
		heads, kv int
		workers   int
	}{
		{"linear bf16", "linear", 300, 100, 116, bf16, exec.Out(bf16), exec.MaskNone, 0, 0, 2},
		{"linear bf16 before bias", "linear", 300, 0, 16, bf16, exec.Spec{Out: bf16, Round: exec.RoundBeforeBias}, exec.MaskNone, 0, 0, 3},
		{"linear f32", "linear", 257, 241, 257, f32, exec.Out(f32), exec.MaskNone, 0, 0, 1},
		{"attention bf16", "attention", 300, 140, 156, bf16, exec.Out(bf16), exec.MaskNone, 4, 4, 2},
		{"attention bf16 flash weights", "attention", 300, 284, 300, bf16, exec.Spec{Out: bf16, Round: exec.RoundWeights}, exec.MaskNone, 4, 2, 3},
		{"attention bf16 math", "attention", 300, 16, 32, bf16, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundProbs | exec.RoundAccum}, exec.MaskNone, 4, 4, 2},
		{"attention f32 causal prefix", "attention", 300, 0, 64, f32, exec.Out(f32), exec.MaskCausal, 4, 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bk := New(tc.workers)
			if !bk.RowIndependent(tc.op) {
				t.Fatalf("RowIndependent(%q) is false", tc.op)
			}
			r := rand.New(rand.NewPCG(7, uint64(tc.rows)))
			const d = 32
			var whole, part []float32
			switch tc.op {
			case "linear":
				x := rnd(t, bk, r, tc.f, 1, 1, tc.rows, 3*d)
				w := rnd(t, bk, r, tc.f, 0.2, 2*d, 3*d)
				b := rnd(t, bk, r, tc.f, 0.5, 2*d)
				xs, err := bk.Slice(x, 1, tc.lo, tc.hi)
				if err != nil {
					t.Fatal(err)
				}
				whole = vals(t, bk)(bk.Linear(x, w, b, tc.s))
				part = vals(t, bk)(bk.Linear(xs, w, b, tc.s))
				whole = whole[tc.lo*2*d : tc.hi*2*d]
			case "attention":
				q := rnd(t, bk, r, tc.f, 1, 2, tc.rows, tc.heads*d)
				k := rnd(t, bk, r, tc.f, 1, 2, tc.rows, tc.kv*d)
				v := rnd(t, bk, r, tc.f, 1, 2, tc.rows, tc.kv*d)
				p := exec.AttentionParams{Heads: tc.heads, KVHeads: tc.kv, Mask: tc.mask}
				qs, err := bk.Slice(q, 1, tc.lo, tc.hi)
				if err != nil {
					t.Fatal(err)
				}
				all := vals(t, bk)(bk.Attention(q, k, v, nil, nil, nil, p, tc.s))
				part = vals(t, bk)(bk.Attention(qs, k, v, nil, nil, nil, p, tc.s))
				w := tc.heads * d
				for b := range 2 { // the block's rows of each batch
					whole = append(whole, all[(b*tc.rows+tc.lo)*w:(b*tc.rows+tc.hi)*w]...)
				}
			}
			same(t, fmt.Sprintf("rows [%d, %d) alone", tc.lo, tc.hi), part, whole)
		})
	}
}
