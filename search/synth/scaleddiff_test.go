package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestScaledUpdate: x + γ·(a − b) with γ [C, 1, 1] over a map [1, C, 1,
// S] (a RepMixer's x + γ·(mixer(x) − norm(x))) is explained exactly, the
// difference found among the pairs of the scope's values; a scope
// without b explains nothing.
func TestScaledUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 1))
	const c, n = 6, 5
	x, a, b, other := randVal(rng, 1, c, 1, n), randVal(rng, 1, c, 1, n), randVal(rng, 1, c, 1, n), randVal(rng, 1, c, 1, n)
	g := randVal(rng, c, 1, 1)
	g.param = true
	data := make([]float32, c*n)
	for i := range data {
		data[i] = x.data[i] + g.data[i/n]*(a.data[i]-b.data[i])
	}
	s, _, target := planted(t, precision.F32, []int{1, c, 1, n}, data)
	v := s.scaledUpdate(target, []*val{other, x, a, b, g})
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("explained to rel-RMS %g", e)
	}
	if v := s.scaledUpdate(target, []*val{other, x, a, g}); v != nil && relRMS(precision.F32, v.data, target.data) < 1e-3 {
		t.Errorf("explained without b, to %g", relRMS(precision.F32, v.data, target.data))
	}
}

// TestFitResizedRows: a position table [1, 1, L, C] resized to n rows by
// bilinear interpolation (corners not aligned), its columns kept, is the
// table resampled along its rows; rows of a table of another width are
// not read.
func TestFitResizedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 2))
	const l, c, n = 16, 4, 6
	table := randVal(rng, 1, 1, l, c)
	table.param = true
	data := make([]float32, n*c)
	for i := range n {
		src := max((float64(i)+0.5)*float64(l)/float64(n)-0.5, 0)
		i0 := min(int(src), l-1)
		i1 := min(i0+1, l-1)
		lam := float32(src - float64(i0))
		for j := range c {
			data[i*c+j] = (1-lam)*table.data[i0*c+j] + lam*table.data[i1*c+j]
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, n, c}, data)
	v := s.fitResizedRows(table, target)
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("explained to rel-RMS %g", e)
	}
	if v := s.fitResizedRows(randVal(rng, 1, 1, l, c+1), target); v != nil {
		t.Error("a table of another width read")
	}
}
