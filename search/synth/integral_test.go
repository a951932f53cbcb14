package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestIntegral checks which values read as whole numbers that mean it:
// ids, positions, counts and masks do; activations grown past the bound
// where their format holds only whole numbers do not.
func TestIntegral(t *testing.T) {
	many := func(x float32, n int) []float32 { return slices.Repeat([]float32{x}, n) }
	for _, c := range []struct {
		name   string
		data   []float32
		format precision.Format
		ints   bool
		want   bool
	}{
		{"ids", []float32{3, 17, 0, 42}, precision.F32, false, true},
		{"positions", []float32{0, 1, 2, 3, 4, 5, 6, 7}, precision.F32, false, true},
		{"zeros", many(0, 100), precision.BF16, false, true},
		{"a fraction", []float32{1, 2.5}, precision.F32, false, false},
		{"a mask", []float32{0, -3.4028235e38, 0, float32(math.Inf(-1))}, precision.F32, false, true},
		{"f32 past 2^24", append(many(3.2e9, 99), -1.7e7), precision.F32, false, false},
		{"one f32 past 2^24 among small", []float32{1, 2, 1 << 25}, precision.F32, false, false},
		{"bf16 activations past 256", append(many(1024, 80), -512, 768), precision.BF16, false, false},
		{"bf16 past 256 beside a small entry", append(many(1024, 80), 3), precision.BF16, false, true},
		{"bf16 timestep", []float32{1000}, precision.BF16, false, true},
		{"a bf16 causal mask of 0 and −∞ alone", append(many(0, 40), many(float32(math.Inf(-1)), 40)...), precision.BF16, false, true},
		// torch.finfo(bfloat16).min: a mask built in the run's format (HiDream-O1's token-type mask)
		{"a bf16 mask of 0 and bf16's lowest alone", append(many(0, 40), many(-3.3895314e38, 40)...), precision.BF16, false, true},
		{"f16 past 2048", many(4096, 70), precision.F16, false, false},
		{"integer-typed ids past 256 in a narrow run", many(300, 70), precision.BF16, true, true},
	} {
		v := &val{shape: []int{len(c.data)}, data: c.data, format: c.format, intType: c.ints}
		if got := v.integral(); got != c.want {
			t.Errorf("%s: integral = %v, want %v", c.name, got, c.want)
		}
	}
}
