package synth

import "math"

// relCoordsTable reports whether v [A, B, 2] (or [1, A, B, 2]) holds the relative
// coordinates of a window's offsets, as a model builds them at init for
// a position MLP (Swin V2's and timm's continuous position bias): channel
// c a function of one axis alone (the row offset in one, the column
// offset in the other), each of an odd number of places, zero at the
// centre, odd about it (f(−d) = −f(d)) and rising, whatever the function
// (linear, log-spaced, scaled). Such a table is made from the grid's
// shape and the model's constants: no request value reaches it.
func relCoordsTable(v *val) bool {
	n := len(v.shape)
	if n < 3 || v.shape[n-1] != 2 || v.integral() || v.numel() != v.shape[n-3]*v.shape[n-2]*2 {
		return false // leading axes of one only ([1, A, B, 2])
	}
	a, b := v.shape[n-3], v.shape[n-2]
	if a < 3 || b < 3 || a%2 == 0 || b%2 == 0 {
		return false
	}
	at := func(i, j, c int) float32 { return v.data[(i*b+j)*2+c] }
	// along reads channel c as a function of axis ax (0: rows, 1: columns),
	// checking it is constant along the other axis
	along := func(c, ax int) ([]float32, bool) {
		n, m := a, b
		if ax == 1 {
			n, m = b, a
		}
		f := make([]float32, n)
		for i := range n {
			for j := range m {
				x := at(i, j, c)
				if ax == 1 {
					x = at(j, i, c)
				}
				if j == 0 {
					f[i] = x
				} else if x != f[i] {
					return nil, false
				}
			}
		}
		return f, true
	}
	odd := func(f []float32) bool {
		mid := len(f) / 2
		if f[mid] != 0 {
			return false
		}
		for d := 1; d <= mid; d++ {
			hi, lo := f[mid+d], f[mid-d]
			if !(hi > f[mid+d-1]) || math.Abs(float64(hi+lo)) > 1e-6*math.Abs(float64(hi)) {
				return false
			}
		}
		return true
	}
	for _, axes := range [][2]int{{0, 1}, {1, 0}} {
		f0, ok0 := along(0, axes[0])
		f1, ok1 := along(1, axes[1])
		if ok0 && ok1 && odd(f0) && odd(f1) {
			return true
		}
	}
	return false
}
