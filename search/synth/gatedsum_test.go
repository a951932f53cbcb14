package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestGatedSum: a block adds three branches to its residual stream, each
// through tanh of its own gate vector (x + tanh(g₁)·y₁ + tanh(g₂)·y₂ +
// tanh(g₃)·y₃), beside a decoy of the same shape; with many rows and with
// fewer rows than values (a short text stream), gatedSum must explain it
// from the residual, the three branches and the three gates, which the
// one-branch form gated cannot.
func TestGatedSum(t *testing.T) {
	for _, rows := range []int{12, 4} {
		const c = 16
		rng := rand.New(rand.NewPCG(5, uint64(rows)))
		fill := func(n int, sd float64) []float32 {
			out := make([]float32, n)
			for i := range out {
				out[i] = float32(rng.NormFloat64() * sd)
			}
			return out
		}
		x := &val{shape: []int{1, rows, c}, data: fill(rows*c, 1), format: precision.F32, origin: "x"}
		var ys, gs []*val
		for i := range 3 {
			ys = append(ys, &val{shape: []int{1, rows, c}, data: fill(rows*c, 1), format: precision.F32, origin: "branch", seq: 10 + i})
			gs = append(gs, &val{shape: []int{1, c}, data: fill(c, 0.5), format: precision.F32, origin: "gate"})
		}
		decoy := &val{shape: []int{1, rows, c}, data: fill(rows*c, 1), format: precision.F32, origin: "decoy", seq: 20}
		want := slices.Clone(x.data)
		for i, y := range ys {
			for j := range want {
				want[j] += float32(math.Tanh(float64(gs[i].data[j%c]))) * y.data[j]
			}
		}
		vals := append(append([]*val{x}, gs...), append(ys, decoy)...)
		s, sc, target := planted(t, precision.F32, []int{1, rows, c}, want, vals...)
		sc.arg[x] = true // the residual comes in as the call's argument
		if got := s.gated(target, sc, recentFirst(sc.vals)); got != nil {
			t.Fatalf("rows %d: one gated branch explains it already (%s): the plant does not need several", rows, got.from.label)
		}
		got := s.gatedSum(target, sc, recentFirst(sc.vals))
		if got == nil {
			t.Fatalf("rows %d: not explained", rows)
		}
		if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
			t.Errorf("rows %d: rel-RMS %.3g (%s)", rows, e, got.from.label)
		}
	}
}

// TestSubsets: every k-subset once, in order.
func TestSubsets(t *testing.T) {
	got := subsets(4, 2)
	want := [][]int{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("subsets(4, 2) = %v, want %v", got, want)
	}
	if n := len(subsets(8, 5)); n != 56 {
		t.Errorf("subsets(8, 5) has %d, want 56", n)
	}
}
