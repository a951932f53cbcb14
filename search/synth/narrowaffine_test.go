package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestNarrowAffine: in bf16 a computed value's x.add(1).div(2) and
// x.mul(2).sub(1) (TAESD's encoder input and decoder output) are read
// with their literal constants, bit for bit: the least squares fit lands
// near 1 and ½ (1.0000135, 0.4999958); and a map whose scale is no power
// of two in its own order ((x + b/k)·k rounds otherwise than x·k + b).
func TestNarrowAffine(t *testing.T) {
	r := precision.BF16.Round
	for _, tc := range []struct {
		name       string
		f          func(x float32) float32
		shiftFirst bool
		order      bool // the two orders round differently: check it
	}{
		{"x.add(1).div(2)", func(x float32) float32 { return r(r(x+1) / 2) }, true, false},
		{"x.mul(2).sub(1)", func(x float32) float32 { return r(r(x*2) - 1) }, false, false},
		{"x.mul(0.18215).add(0.3)", func(x float32) float32 { return r(r(x*0.18215) + 0.3) }, false, true},
		{"(x + 0.3).mul(0.18215)", func(x float32) float32 { return r(r(x+0.3) * 0.18215) }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 9))
			x := roundedVal(randVal(rng, 1, 4, 16, 16), precision.BF16)
			x.origin = "x"
			q := make([]float32, len(x.data))
			for i, v := range x.data {
				q[i] = tc.f(v)
			}
			s, sc, target := planted(t, precision.BF16, x.shape, q, x)
			got := s.channelAffine(target, sc.vals)
			if got == nil {
				t.Fatal("not read as an affine map")
			}
			bitExact(t, got, target)
			first := got.from.args[0].from
			if tc.order && (first == nil || (first.op == program.OpAdd) != tc.shiftFirst) {
				t.Errorf("first step %v: want the shift first %v", first, tc.shiftFirst)
			}
		})
	}
}

// TestNarrowSoftCap: 3·tanh(x/3) of small values in bf16 (TAESD's decoder
// input cap) lies within the format's tolerance of x itself; glue keeps x
// only while it tries the cap, which reproduces the values bit for bit
// with the literal 3 (a fit of c on values below ½ moves with the
// roundings).
func TestNarrowSoftCap(t *testing.T) {
	r := precision.BF16.Round
	rng := rand.New(rand.NewPCG(6, 2))
	x := roundedVal(randVal(rng, 1, 4, 16, 16), precision.BF16)
	for i := range x.data {
		x.data[i] = r(x.data[i] * 0.15)
	}
	x.origin = "x"
	q := make([]float32, len(x.data))
	for i, v := range x.data {
		q[i] = r(r(float32(math.Tanh(float64(r(v/3))))) * 3)
	}
	if e := relRMS(precision.BF16, x.data, q); e > tolerance(precision.BF16) || e <= looseFloor(precision.BF16) {
		t.Fatalf("x is %.3g from the target: want a loose near miss", e)
	}
	s, sc, target := planted(t, precision.BF16, x.shape, q, x)
	got := s.glue(target, sc)
	if got == nil || got.from == nil || got.from.op != program.OpMul {
		t.Fatalf("explained by %v, want the cap's product", got)
	}
	bitExact(t, got, target)
}
