package synth

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestModulatedOneRow: a stream of one row (a one-token caption's)
// modulated by chunks of a conditioning projection, x·(1 + chunk 2) +
// chunk 1, is read as that modulation although one row shows no slope per
// channel; a gated residual of one row, r + chunk 3·y, is not read as a
// modulation of y shifted by the residual r (that is gated's reading).
func TestModulatedOneRow(t *testing.T) {
	const c = 8
	rng := rand.New(rand.NewPCG(5, 1))
	x := randVal(rng, 1, 1, c)
	x.origin = "norm/out"
	cond := randVal(rng, 1, 4*c)
	cond.origin, cond.fit = "ada/out", &leafFit{kind: "linear"}
	chunk := func(k, i int) float32 { return cond.data[k*c+i] }

	want := make([]float32, c)
	for i := range want {
		want[i] = x.data[i]*(1+chunk(2, i)) + chunk(1, i)
	}
	s, sc, target := planted(t, precision.F32, []int{1, 1, c}, want)
	sc.add(cond, true)
	sc.add(x, true)
	got := s.modulated(target, sc, recentFirst(sc.vals))
	explainedWithin(t, got, target)
	if got != nil && got.from != nil {
		if l := got.from.label; !strings.Contains(l, "plus_one=true") || !strings.Contains(l, "chunk 2/4") || !strings.Contains(l, "chunk 1/4") {
			t.Errorf("read as %q, want plus_one=true, scale chunk 2/4, shift chunk 1/4", l)
		}
	}

	r, y := randVal(rng, 1, 1, c), randVal(rng, 1, 1, c)
	r.origin, y.origin = "residual", "branch/out"
	gated := make([]float32, c)
	for i := range gated {
		gated[i] = r.data[i] + chunk(3, i)*y.data[i]
	}
	s, sc, target = planted(t, precision.F32, []int{1, 1, c}, gated)
	sc.add(cond, true)
	sc.add(r, true)
	sc.add(y, true)
	if got := s.modulated(target, sc, recentFirst(sc.vals)); got != nil {
		t.Errorf("a gated residual read as a modulation: %s", got.from.label)
	}
}

// TestBySource: a joint attention's operands of two streams of as many
// rows are told apart by the input their projections read, through a norm
// after the projection; operands no projection made are left out.
func TestBySource(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 8))
	img, txt := randVal(rng, 1, 4, 8), randVal(rng, 1, 4, 8)
	proj := func(in *val) *val {
		v := randVal(rng, 1, 4, 8)
		v.fit, v.from = &leafFit{kind: "linear"}, &expr{op: program.OpLinear, args: []*val{in, randVal(rng, 8, 8)}}
		return v
	}
	normed := func(in *val) *val {
		v := randVal(rng, 1, 4, 8)
		v.from = &expr{op: program.OpNorm, args: []*val{in}}
		return v
	}
	qi, ki, vi := proj(img), proj(img), proj(img)
	qt, kt, vt := proj(txt), proj(txt), proj(txt)
	nqi, nqt := normed(qi), normed(qt)
	loose := randVal(rng, 1, 4, 8)
	groups := bySource([]*val{nqt, qt, kt, loose, vt, nqi, qi, ki, vi})
	if len(groups) != 2 {
		t.Fatalf("%d groups, want 2 (text, image)", len(groups))
	}
	for i, want := range [][]*val{{nqt, qt, kt, vt}, {nqi, qi, ki, vi}} {
		if !slices.Equal(groups[i], want) {
			t.Errorf("group %d holds %d operands, want the %d of one stream in order", i, len(groups[i]), len(want))
		}
	}
}
