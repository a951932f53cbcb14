package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestStoredSumsConv: a bf16 convolution whose sums were stored one
// product at a time (PyTorch 1.13's CPU kernel: 10⁻² from one f32 sum
// over 144 taps, beyond bf16's tolerance) is read as that convolution,
// bit for bit, its sums stored; one summed in f32 and rounded once (a
// GPU's) is read as before, its sums not stored.
func TestStoredSumsConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	bf := precision.BF16
	x := roundedVal(randVal(rng, 1, 16, 6, 6), bf)
	x.origin = "x"
	w := roundedVal(randVal(rng, 8, 16, 3, 3), bf)
	for i := range w.data {
		w.data[i] = bf.Round(w.data[i] / 12)
	}
	w.param, w.origin = true, "w"
	bias := roundedVal(randVal(rng, 8), bf)
	bias.param, bias.origin = true, "b"
	b := cpu.New(1)
	conv := func(round exec.Round) []float32 {
		up := func(v *val) exec.Tensor {
			tn, err := b.Upload(v.data, v.shape, bf)
			if err != nil {
				t.Fatal(err)
			}
			return tn
		}
		n := program.Node{Op: program.OpConv2D, Attrs: program.Attrs{Conv: program.ConvParams{Pad: 1, Groups: 1}}, Spec: exec.Spec{Out: bf, Round: round}}
		outs, err := program.RunNode(b, &n, []exec.Tensor{up(x), up(w), up(bias)})
		if err != nil {
			t.Fatal(err)
		}
		d, err := b.Download(outs[0])
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name   string
		round  exec.Round
		stored bool
	}{
		{"sums stored one product at a time", exec.RoundAccum, true},
		{"one f32 sum", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, target := planted(t, bf, []int{1, 8, 6, 6}, conv(tc.round))
			got := s.fitConv2D(x, []*val{w, bias}, target)
			if got == nil {
				t.Fatal("not read as a convolution")
			}
			bitExact(t, got, target)
			if stored := got.from.round&exec.RoundAccum != 0; stored != tc.stored {
				t.Errorf("read with its sums stored %v, want %v", stored, tc.stored)
			}
		})
	}
}
