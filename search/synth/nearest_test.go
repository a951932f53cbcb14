package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestNearestRows: ids that are, for each row of a value, its nearest row
// of a codebook (a vector quantizer's argmin over cdist) are read as
// such, the rows taken along the last axis or along the channels of a
// channels-first map; ids shuffled are not.
func TestNearestRows(t *testing.T) {
	const k, d = 16, 4
	rng := rand.New(rand.NewPCG(5, 12))
	book := randVal(rng, k, d)
	book.param = true
	// nearest by the distance itself, in f64: the reading's own formula
	// (‖e‖² − 2·x·eᵀ) is not what this checks against
	nearest := func(row []float32) float32 {
		best, bestD := 0, math.Inf(1)
		for j := range k {
			dist := 0.0
			for c := range d {
				diff := float64(row[c]) - float64(book.data[j*d+c])
				dist += diff * diff
			}
			if dist < bestD {
				best, bestD = j, dist
			}
		}
		return float32(best)
	}
	for _, tc := range []struct {
		name     string
		shape    []int
		idsShape []int
		row      func(x *val, i int) []float32 // row i of x, as the quantizer reads it
	}{
		{"rows last", []int{2, 6, d}, []int{12}, func(x *val, i int) []float32 { return x.data[i*d : (i+1)*d] }},
		{"channels first", []int{1, d, 3, 5}, []int{15}, func(x *val, i int) []float32 {
			row := make([]float32, d)
			for c := range d {
				row[c] = x.data[c*15+i]
			}
			return row
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := randVal(rng, tc.shape...)
			ids := make([]float32, tc.idsShape[0])
			for i := range ids {
				ids[i] = nearest(tc.row(x, i))
			}
			s, sc, target := planted(t, precision.F32, tc.idsShape, ids, x, book)
			got := s.nearestRows(target, sc, sc.vals)
			if got == nil || !slices.Equal(got.data, ids) {
				t.Fatalf("not read as the nearest rows: %v", got)
			}
			wrong := slices.Clone(ids)
			wrong[0], wrong[1] = wrong[1], wrong[0]+1
			s, sc, target = planted(t, precision.F32, tc.idsShape, wrong, x, book)
			if s.nearestRows(target, sc, sc.vals) != nil {
				t.Error("ids that are not the nearest rows read as them")
			}
		})
	}
}
