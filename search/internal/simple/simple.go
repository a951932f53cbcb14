// Package simple finds the simple number a fitted or stored one stands
// for: 1/√24 for the f32 0.20412414, 1000 for 999.99994. Configs write
// such numbers; reports and documents should too.
package simple

import (
	"math"
	"math/big"
	"strconv"
)

// Candidates are simple numbers near c, simplest first: the square
// root or reciprocal square root of an integer, a reciprocal of an
// integer, then c to 3 and 4 significant digits.
func Candidates(c float64) []float64 {
	var out []float64
	if r := math.Round(c * c); r >= 1 {
		out = append(out, math.Copysign(math.Sqrt(r), c))
	}
	if r := math.Round(1 / (c * c)); r >= 1 {
		out = append(out, math.Copysign(Rsqrt(r), c)) // as configs write it: d**-0.5
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

// Rsqrt is 1/√r correctly rounded (1/math.Sqrt(r) rounds twice; a
// config's d**-0.5 is rounded once).
func Rsqrt(r float64) float64 {
	x := new(big.Float).SetPrec(200).SetFloat64(r)
	x.Sqrt(x)
	x.Quo(new(big.Float).SetPrec(200).SetFloat64(1), x)
	f, _ := x.Float64()
	return f
}

// Snap is the simplest number near c that keep(x) accepts (the shortest
// decimal; among equals, the first of Candidates), else c.
func Snap(c float64, keep func(float64) bool) float64 {
	best, bestLen := c, math.MaxInt
	for _, x := range Candidates(c) {
		if math.Abs(x-c) <= 1e-3*math.Abs(c) && keep(x) {
			if n := len(strconv.FormatFloat(x, 'g', -1, 64)); n < bestLen {
				best, bestLen = x, n
			}
		}
	}
	return best
}
