package synth

import "math"

// goldenMin is the minimum of f over [lo, hi] found by golden-section
// search in the given number of steps (one evaluation each), for f
// unimodal there: the middle of the last bracket.
func goldenMin(f func(float64) float64, lo, hi float64, steps int) float64 {
	g := (math.Sqrt(5) - 1) / 2
	a, b := hi-g*(hi-lo), lo+g*(hi-lo)
	fa, fb := f(a), f(b)
	for range steps {
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - g*(hi-lo)
			fa = f(a)
		} else {
			lo, a, fa = a, b, fb
			b = lo + g*(hi-lo)
			fb = f(b)
		}
	}
	return (lo + hi) / 2
}
