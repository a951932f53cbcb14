package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestEmptyValues: a forward that calls its modules on a chunk of no
// frames (AnyFlow-FAR's embedders on an empty clean context) leaves empty
// values in the scope and empty targets; the forms divide by an axis's
// length, so glue must neither read an empty value nor explain an empty
// target (each panicked: a padded causal mask of a [0, 6] mask, an edge
// padding of a [1, 0, 8] target, Fourier features of a [0, 4] input).
func TestEmptyValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 7))
	empty := &val{shape: []int{0, 6}, format: precision.F32, origin: "empty mask"}
	scores := randVal(rng, 1, 2, 6, 6)
	s, sc, target := planted(t, precision.F32, scores.shape, scores.data, empty)
	if v := s.glue(target, sc); v != nil && errOf(v, target) > tolerance(precision.F32) {
		t.Errorf("explained to %.3g", errOf(v, target))
	}
	s, sc, target = planted(t, precision.F32, []int{1, 0, 8}, nil, randVal(rng, 1, 4, 8))
	if v := s.glue(target, sc); v != nil {
		t.Errorf("an empty target explained by %v", v.from)
	}
	x := &val{shape: []int{0, 4}, format: precision.F32, origin: "x"}
	if v := s.fitFourierFeatures(x, &val{shape: []int{0, 12}, format: precision.F32}); v != nil {
		t.Errorf("Fourier features of an empty value: %v", v.from)
	}
}
