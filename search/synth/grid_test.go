package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestGridQuantised: latents stored as bytes and read back (TAESD's
// forward: x/6 + ½ clamped to [0, 1], ×255, rounded, /255, −½, ×6, each
// step rounded to f32 as torch computes it) are read as x brought to a
// grid, the clamp included where entries lie past it; a value that only
// lies near a grid is not.
func TestGridQuantised(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 3))
	for _, tc := range []struct {
		name    string
		scale   float64 // x's spread: 1 stays inside the clamp, 5 goes past it
		clamped bool
	}{
		{"inside the clamp", 1, false},
		{"clamped", 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := randVal(rng, 1, 4, 8, 8)
			for i := range x.data {
				x.data[i] *= float32(tc.scale)
			}
			q := make([]float32, len(x.data))
			for i, v := range x.data {
				u := float32(v/6) + 0.5
				u = min(max(u, 0), 1)
				k := float32(math.RoundToEven(float64(u * 255)))
				q[i] = (k/255 - 0.5) * 6
			}
			s, sc, target := planted(t, precision.F32, x.shape, q, x)
			got := s.gridQuantised(target, sc.vals)
			explainedWithin(t, got, target)
			ops := map[program.Op]bool{}
			for v := got; v != nil && v.from != nil; v = v.from.args[0] {
				ops[v.from.op] = true
			}
			if ops[program.OpMaximum] != tc.clamped || ops[program.OpMinimum] != tc.clamped || !ops[program.OpRound] {
				t.Errorf("ops %v: want a rounding, clamped %v", ops, tc.clamped)
			}
		})
	}
	x := randVal(rng, 1, 4, 8, 8)
	near := make([]float32, len(x.data))
	for i, v := range x.data {
		near[i] = float32(math.Round(float64(v)*40)/40) + float32(rng.NormFloat64()*1e-3)
	}
	s, sc, target := planted(t, precision.F32, x.shape, near, x)
	if s.gridQuantised(target, sc.vals) != nil {
		t.Error("values near a grid, not on it, read as quantised")
	}
}

// TestGridRoundTrip: the same round trip in bf16, every step rounded to
// bf16 as torch computes it (TAESD's bf16 forward), is read as x stored on
// a byte's grid and read back, bit for bit; the f32 reading's lattice is
// blurred there. A value only near x rounded to a grid is not read so.
func TestGridRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 4))
	r := precision.BF16.Round
	for _, spread := range []float32{1, 5} {
		x := roundedVal(randVal(rng, 1, 4, 8, 8), precision.BF16)
		for i := range x.data {
			x.data[i] = r(x.data[i] * spread)
		}
		q := make([]float32, len(x.data))
		for i, v := range x.data {
			u := r(r(v/6) + 0.5)
			u = min(max(u, 0), 1)
			k := float32(math.RoundToEven(float64(r(u * 255))))
			q[i] = r(r(r(k/255)-0.5) * 6)
		}
		s, sc, target := planted(t, precision.BF16, x.shape, q, x)
		got := s.gridQuantised(target, sc.vals)
		if got == nil {
			t.Fatalf("spread %g: not read as a round trip through a grid", spread)
		}
		bitExact(t, got, target)
	}
	x := roundedVal(randVal(rng, 1, 4, 8, 8), precision.BF16)
	near := make([]float32, len(x.data))
	for i, v := range x.data {
		near[i] = r(float32(math.Round(float64(v)*255/6)*6/255) + float32(rng.NormFloat64()*3e-3))
	}
	s, sc, target := planted(t, precision.BF16, x.shape, near, x)
	if s.gridQuantised(target, sc.vals) != nil {
		t.Error("values near a grid, not on it, read as a round trip")
	}
}
