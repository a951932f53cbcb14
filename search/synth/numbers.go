package synth

import (
	"math"
	"math/big"
	"strconv"
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

// snapCandidates are simple numbers near c, simplest first: the square
// root or reciprocal square root of an integer, a reciprocal of an
// integer, then c to 3 and 4 significant digits.
func snapCandidates(c float64) []float64 {
	var out []float64
	if r := math.Round(c * c); r >= 1 {
		out = append(out, math.Copysign(math.Sqrt(r), c))
	}
	if r := math.Round(1 / (c * c)); r >= 1 {
		out = append(out, math.Copysign(rsqrt(r), c)) // as configs write it: d**-0.5
	}
	if r := math.Round(1 / c); r != 0 && math.Abs(r) >= 1 {
		out = append(out, 1/r)
	}
	for _, digits := range []float64{3, 4} {
		p := math.Pow(10, math.Floor(math.Log10(math.Abs(c)))-digits+1)
		out = append(out, math.Round(c/p)*p)
	}
	return out
}

// rsqrt is 1/√r correctly rounded (1/math.Sqrt(r) rounds twice; a
// config's d**-0.5 is rounded once).
func rsqrt(r float64) float64 {
	x := new(big.Float).SetPrec(200).SetFloat64(r)
	x.Sqrt(x)
	x.Quo(new(big.Float).SetPrec(200).SetFloat64(1), x)
	f, _ := x.Float64()
	return f
}

// snap is the simplest number near c that keep(x) accepts (the shortest
// decimal; among equals, the first of snapCandidates), else c.
func snap(c float64, keep func(float64) bool) float64 {
	best, bestLen := c, math.MaxInt
	for _, x := range snapCandidates(c) {
		if math.Abs(x-c) <= 1e-3*math.Abs(c) && keep(x) {
			if n := len(strconv.FormatFloat(x, 'g', -1, 64)); n < bestLen {
				best, bestLen = x, n
			}
		}
	}
	return best
}
