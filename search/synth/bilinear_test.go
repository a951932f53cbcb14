package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestBilinearCorners: a 2×2 table resampled to a 3×3 grid (points 0,
// ½, 1 per axis) reads, per cell, the corner rows and weights worked out
// by hand; ids of a 3×3 table at a 4×4 grid in 2×2 tiles are read back
// with their grid and tiles; ids with the first and last cells swapped
// are not.
func TestBilinearCorners(t *testing.T) {
	b := bilinearGrid{g: 2, h: 3, w: 3}
	ids := b.corners()
	if got := ids[:4]; !slices.Equal(got, []float32{0, 1, 2, 3}) {
		t.Errorf("cell (0, 0) reads %v, want 0 1 2 3", got)
	}
	if got := ids[32:36]; !slices.Equal(got, []float32{3, 3, 3, 3}) {
		t.Errorf("cell (2, 2) reads %v, want 3 3 3 3", got)
	}
	w := b.weights(precision.F32)
	if got := w[4:8]; !slices.Equal(got, []float32{0.5, 0.5, 0, 0}) {
		t.Errorf("cell (0, 1) weighs %v, want ½ ½ 0 0", got)
	}
	if got := w[16:20]; !slices.Equal(got, []float32{0.25, 0.25, 0.25, 0.25}) {
		t.Errorf("cell (1, 1) weighs %v, want ¼ each", got)
	}
	tiled := bilinearGrid{g: 3, h: 4, w: 4, tiles: []int{2}}
	v := &val{shape: []int{16, 4}, data: tiled.corners(), format: precision.F32, intType: true}
	got := bilinearCornersOf(v)
	if got == nil || got.g != 3 || got.h != 4 || got.w != 4 || !slices.Equal(got.tiles, []int{2}) {
		t.Errorf("read %+v, want a 3×3 table at 4×4 in tiles of 2", got)
	}
	swapped := slices.Clone(v.data) // the first and last cells, which read other rows
	copy(swapped[0:4], v.data[60:64])
	copy(swapped[60:64], v.data[0:4])
	if got := bilinearCornersOf(&val{shape: []int{16, 4}, data: swapped, format: precision.F32, intType: true}); got != nil {
		t.Errorf("two cells swapped read as %+v", got)
	}
}

// TestBilinearSum: patches plus the table's corner rows, gathered at the
// recognised ids, times the bilinear weights and summed: explained by
// bilinearSum from the gathered rows and the patches alone.
func TestBilinearSum(t *testing.T) {
	const d = 8
	grid := bilinearGrid{g: 3, h: 4, w: 4, tiles: []int{2}}
	n := grid.h * grid.w
	rng := rand.New(rand.NewPCG(6, 1))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	table := &val{shape: []int{grid.g * grid.g, d}, data: fill(grid.g * grid.g * d), format: precision.F32, origin: "table", param: true}
	ids := &val{shape: []int{n, 4}, data: grid.corners(), format: precision.F32, intType: true, origin: "ids"}
	patches := &val{shape: []int{n, d}, data: fill(n * d), format: precision.F32, origin: "patches", seq: 1}
	w := grid.weights(precision.F32)
	want := slices.Clone(patches.data)
	for r := range n {
		for c := range d {
			var acc float32
			for k := range 4 {
				acc += table.data[int(ids.data[r*4+k])*d+c] * w[r*4+k]
			}
			want[r*d+c] += acc
		}
	}
	s, _, target := planted(t, precision.F32, []int{n, d}, want, patches)
	e := s.reshape(s.derive(&expr{op: program.OpGather, args: []*val{table, ids}, out: precision.F32}), []int{n, 4, d})
	s.bilinear = []bilinearRecord{{ids: ids, grid: grid}}
	got := s.bilinearSum(target, []*val{patches, e})
	if got == nil {
		t.Fatal("not explained")
	}
	if r := relRMS(precision.F32, got.data, want); r > 1e-6 {
		t.Errorf("rel-RMS %.3g (%s)", r, got.from.label)
	}
}
