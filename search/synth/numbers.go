package synth

import (
	"math"

	"github.com/zflow/zflow/search/internal/simple"
)

// fitScalar fits t ≈ c·v by least squares and snaps c to a simple number
// (√n, 1/√n, 1/n, 3 or 4 significant digits) that fits as well; ok is
// false when no single constant fits.
func fitScalar(v, t *val) (float64, bool) {
	var vv, vt float64
	for i := range v.data {
		x := float64(v.data[i])
		vv += x * x
		vt += x * float64(t.data[i])
	}
	if vv == 0 {
		return 0, false
	}
	c := vt / vv
	if c == 0 || math.IsNaN(c) {
		return 0, false
	}
	miss := func(x float64) float64 {
		fit := make([]float32, len(v.data))
		for i := range fit {
			fit[i] = float32(x * float64(v.data[i]))
		}
		return relRMS(t.format, fit, t.data)
	}
	// a simple number must fit as well as c itself: within the tolerance
	// 5.657 passes for √32, and an f32 run then misses by 3e-5
	at := miss(c)
	snapped := snap(c, func(x float64) bool { return miss(x) <= 1.01*at+1e-9 })
	return snapped, miss(snapped) <= 2*tolerance(t.format)
}

// snap is the simplest number near c that keep(x) accepts (simple.Snap).
func snap(c float64, keep func(float64) bool) float64 { return simple.Snap(c, keep) }
