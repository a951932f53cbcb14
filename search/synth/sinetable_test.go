package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestReadPeriod: the period of a sinusoid table of positions added to a
// scaled value is read back from the values, under every layout, with
// the scale fitted at position 0.
func TestReadPeriod(t *testing.T) {
	const n, d = 8, 32
	rng := rand.New(rand.NewPCG(1, 2))
	a := &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.F32}
	for i := range a.data {
		a.data[i] = float32(rng.NormFloat64() * 0.2)
	}
	pos := make([]float32, n)
	for i := range pos {
		pos[i] = float32(i)
	}
	for _, period := range []float32{10000, 500, 1e5} {
		for _, l := range []sineLayout{{}, {flip: true}, {interleaved: true}, {flip: true, interleaved: true, shift: 1}} {
			tab, err := exec.TimestepEmbedding(pos, exec.TimestepParams{Dim: d, FlipSinToCos: l.flip, FreqShift: l.shift, Scale: 1, MaxPeriod: period}, exec.MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			if l.interleaved {
				in := make([]float32, len(tab))
				for r := range n {
					for j := range d / 2 {
						in[r*d+2*j], in[r*d+2*j+1] = tab[r*d+j], tab[r*d+d/2+j]
					}
				}
				tab = in
			}
			x := &val{shape: a.shape, data: make([]float32, n*d), format: precision.F32}
			for i := range x.data {
				x.data[i] = 5.656854*a.data[i] + tab[i]
			}
			c, ok := rowZeroScale(x, a, l)
			if !ok || c < 5.65 || c > 5.66 {
				t.Fatalf("period %g %s: scale %g at position 0", period, l, c)
			}
			p, ok := readPeriod(x, a, c, l)
			if !ok || p != period {
				t.Errorf("period %g %s: read %g (%v)", period, l, p, ok)
			}
		}
	}
}
