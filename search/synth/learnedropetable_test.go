package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// TestLearnedRopeTable plants timm's mixed RoPE table as a block is
// handed it: learned frequencies freqs [2, depth 2, H 2, F 4] of an
// uncalled sub-module, positions of a 3×4 grid indexed 'xy' (t_x the
// column, fastest; t_y the row), angles t_x·W_x + t_y·W_y with W =
// freqs[:, 1] (the second block's), cat(sin, cos) each column repeated
// twice, heads first: [2, 12, 16]. It is explained from the parameter;
// the same table with its halves swapped at one head is not; and the
// attention search reads it as per-head (cos, sin) tables [12, 2, 8].
func TestLearnedRopeTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 14))
	const depth, h, f, gh, gw = 2, 2, 4, 3, 4
	n := gh * gw
	freqs := make([]float32, 2*depth*h*f)
	for i := range freqs {
		freqs[i] = float32(rng.Float64())
	}
	table := make([]float32, h*n*4*f)
	for hh := range h {
		for p := range n {
			tx, ty := float64(p%gw), float64(p/gw)
			for c := range f {
				a := tx*float64(freqs[((0*depth+1)*h+hh)*f+c]) + ty*float64(freqs[((1*depth+1)*h+hh)*f+c])
				row := table[(hh*n+p)*4*f:]
				sn, cs := float32(math.Sin(a)), float32(math.Cos(a))
				row[2*c], row[2*c+1], row[2*f+2*c], row[2*f+2*c+1] = sn, sn, cs, cs
			}
		}
	}
	swapped := slices.Clone(table)
	for p := range n {
		row := swapped[p*4*f : (p+1)*4*f]
		first := slices.Clone(row[:2*f])
		copy(row, row[2*f:])
		copy(row[2*f:], first)
	}
	for _, c := range []struct {
		name string
		data []float32
		ok   bool
	}{{"the table", table, true}, {"halves swapped at one head", swapped, false}} {
		pt := newPlanted(t, "rope")
		pt.f32("s0/m/arg0", []int{h, n, 4 * f}, c.data)
		pt.f32("p/m.rope.freqs", []int{2, depth, h, f}, freqs)
		step := 0
		m := &trace.Manifest{Format: "zflow-trace", Version: 1, Producer: map[string]any{"framework": "test", "dtype": "float32"},
			Params: map[string]string{"m.rope.freqs": "p/m.rope.freqs"},
			Calls:  []trace.Call{{ID: 0, Step: &step, Module: "m", Type: "T", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}}}}}
		s, sc := testSearch(pt.open(m), precision.F32)
		target, err := s.capture("s0/m/arg0")
		if err != nil {
			t.Fatal(err)
		}
		got := s.learnedRopeTable(target, sc)
		if !c.ok {
			if got != nil {
				t.Errorf("%s explained as a learned RoPE table", c.name)
			}
			continue
		}
		explainedWithin(t, got, target)
		pairs := s.packedPerHeadTables(target)
		if len(pairs) != 2 || pairs[0][0].perHead != h || !slices.Equal(pairs[0][0].shape, []int{n, h, 2 * f}) {
			t.Fatalf("per-head tables %d, want 2 of [%d %d %d] for %d heads", len(pairs), n, h, 2*f, h)
		}
		if e := relRMS(precision.F32, pairs[0][0].data, sliceAt(target, 2*f, 4*f)); e > 1e-6 {
			t.Errorf("the first pair's cos is not the table's second half (rel-RMS %.3g)", e)
		}
	}
}

// sliceAt is t [H, S, W]'s columns [lo, hi) laid out positions first.
func sliceAt(t *val, lo, hi int) []float32 {
	part := &val{shape: []int{t.shape[0], t.shape[1], hi - lo}, data: sliceData(t, 2, lo, hi)}
	return permuteData(part, []int{1, 0, 2})
}
