package factors

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/search/structure"
	"github.com/zflow/zflow/trace"
)

func TestAxisSplits(t *testing.T) {
	for _, c := range []struct {
		pairs, n int
		read     []int
		count    int
		first    string
	}{
		{8, 3, []int{2, 3, 3}, 21, "[4 6 6]"},       // every composition of 8 pairs into 3
		{8, 1, []int{8}, 1, "[16]"},                 // one axis: the rotary width
		{64, 2, []int{32, 32}, 3, "[64 64]"},        // C(63, 1) = 63 > 24: the read split and its two neighbours
		{64, 3, []int{8, 28, 28}, 9, "[16 56 56]"},  // its 3 permutations and 6 neighbours (64 % 3 ≠ 0: no equal split)
		{48, 3, []int{16, 16, 16}, 7, "[32 32 32]"}, // the equal split, its own permutations, and 6 neighbours
		{8, 3, nil, 21, "[2 2 12]"},                 // no read split: compositions in order
	} {
		got := axisSplits(c.pairs, c.n, c.read)
		if len(got) != c.count || fmt.Sprint(got[0]) != c.first {
			t.Errorf("axisSplits(%d, %d, %v): %d splits, first %v; want %d, %s", c.pairs, c.n, c.read, len(got), got[0], c.count, c.first)
		}
	}
}

// TestReadAxes: tables of known axes and θ over a row-major grid (an
// axis that never moves first, as in Flux's time axis) read back as such.
func TestReadAxes(t *testing.T) {
	for _, theta := range []float64{10000, 256, 1e6} {
		axes := []int{4, 6, 6}
		var angles [][]float64
		var ids []float32
		for r := range 6 {
			for c := range 7 {
				id := []float64{0, float64(r), float64(c)}
				var row []float64
				for a, d := range axes {
					for i := range d / 2 {
						row = append(row, id[a]*math.Pow(theta, -float64(2*i)/float64(d)))
					}
				}
				angles = append(angles, row)
				ids = append(ids, 0, float32(r), float32(c))
			}
		}
		split, freq := readAxes(angles, ids, 3)
		if fmt.Sprint(split) != "[2 3 3]" {
			t.Errorf("θ %g: split %v, want [2 3 3]", theta, split)
		}
		if got := rotary.Theta(freq, channels(split)); got != theta {
			t.Errorf("θ %g: read %g (frequencies %v)", theta, got, freq)
		}
	}
}

// TestNormsAndPositionsDiT: the DiT fixture's norm roles (q/k norms per
// head) and RoPE tables, found as its README says.
func TestNormsAndPositionsDiT(t *testing.T) {
	tr, err := trace.Open("../../fixtures/dit/dit-f32.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st, _, err := structure.Discover(tr)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := Norms(tr, &st)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, nr := range roles {
		addrs = append(addrs, nr.Address)
		r, err := search.Run(context.Background(), nr.Factors, nr.Objective, nil, search.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"norm_kind": "layer", "norm_eps": 1e-6, "norm_offset": 0.0}
		if nr.PerHead {
			want["norm_kind"] = "rms"
		}
		for _, f := range r.Factors {
			if f.Value != want[f.Name] || !f.Decisive {
				t.Errorf("%s: %s = %v (decisive %v, margin %.3g), want %v", nr.Address, f.Name, f.Value, f.Decisive, float64(f.Margin), want[f.Name])
			}
		}
	}
	if got := strings.Join(addrs, " "); got != "blocks.0.k_norm blocks.0.norm1 blocks.0.norm2 blocks.0.q_norm blocks.1.k_norm blocks.1.norm1 blocks.1.norm2 blocks.1.q_norm final.norm" {
		t.Errorf("norm roles %s", got)
	}
	pf, err := Positions(tr, &st, "interleaved", "text_first")
	if err != nil {
		t.Fatal(err)
	}
	r, err := search.Run(context.Background(), pf.Factors, pf.Objective, nil, search.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rope_axes": "[8 8]", "rope_theta": "10000", RopeFreqFormat: "f32", RopeAngleFormat: "f32"}
	for _, f := range r.Factors {
		if fmt.Sprint(f.Value) != want[f.Name] {
			t.Errorf("%s = %v, want %s", f.Name, f.Value, want[f.Name])
		}
	}
	if fmt.Sprint(pf.Read) != "[8 8]" || pf.TableFormat.String() != "f32" {
		t.Errorf("read split %v, table format %v", pf.Read, pf.TableFormat)
	}
}
