package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

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
	for _, axes := range [][2]int{{0, 1}, {1, 0}} {
		f0, ok0 := along(0, axes[0])
		f1, ok1 := along(1, axes[1])
		if ok0 && ok1 && oddRising(f0) && oddRising(f1) {
			return true
		}
	}
	return false
}

// oddRising reports whether f, the values at offsets −m…m (len 2m+1), is
// zero at the centre, odd about it and rising.
func oddRising(f []float32) bool {
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

// pairCoordsTable reports whether v [N·N, 2] (or [N, N, 2], leading axes
// of one) holds, for every (query, key) pair of a window of N cells
// row-major, a function of the pair's row offset in one channel and of
// its column offset in the other, odd about zero and rising, whatever the
// function (SwinV2-CR's log-spaced pair coordinates, the input of its
// position MLP): relCoordsTable per pair, made from the window's shape.
func pairCoordsTable(v *val) bool {
	n := len(v.shape)
	if n < 2 || v.shape[n-1] != 2 || v.integral() {
		return false
	}
	pairs := v.numel() / 2
	cells := int(math.Round(math.Sqrt(float64(pairs))))
	if cells < 4 || cells*cells != pairs {
		return false
	}
	for _, grid := range factorizations(cells, 2) {
		if len(grid) != 2 || grid[0] < 2 || grid[1] < 2 {
			continue
		}
		w := grid[1]
		for _, sign := range []int{1, -1} { // query minus key, or key minus query
			for _, ch := range [][2]int{{0, 1}, {1, 0}} { // the channel of the row offset, of the column one
				fr, fc := readPairs(v.data, cells, w, sign, ch[0], true), readPairs(v.data, cells, w, sign, ch[1], false)
				if fr != nil && fc != nil && oddRising(fr) && oddRising(fc) {
					return true
				}
			}
		}
	}
	return false
}

// readPairs reads channel ch of a pair table over cells cells of rows of
// w as a function of the pairs' row (rows) or column offset, sign·(query
// − key): its values at offsets −m…m, nil where one offset has two values.
func readPairs(d []float32, cells, w, sign, ch int, rows bool) []float32 {
	m := w - 1
	if rows {
		m = cells/w - 1
	}
	f := make([]float32, 2*m+1)
	seen := make([]bool, 2*m+1)
	for i := range cells {
		for j := range cells {
			off := i%w - j%w
			if rows {
				off = i/w - j/w
			}
			k := sign*off + m
			x := d[(i*cells+j)*2+ch]
			if !seen[k] {
				f[k], seen[k] = x, true
			} else if f[k] != x {
				return nil
			}
		}
	}
	return f
}

// pairOffsetsTable reads v [N, N, c] (leading axes of one) as a table of
// every (query, key) pair's relative offset on a grid of N cells,
// row-major: each channel one of the key-minus-query column offset, row
// offset, their negatives, or the squared distance Δrow² + Δcol², as a
// model builds it from the grid's shape for a position projection
// (ConViT's rel_indices). It returns what each channel is, or "".
func pairOffsetsTable(v *val) string {
	n := len(v.shape)
	if n < 3 || v.integral() && v.intType {
		return ""
	}
	cells, c := v.shape[n-2], v.shape[n-1]
	if v.shape[n-3] != cells || c < 1 || c > 4 || cells < 4 || v.numel() != cells*cells*c {
		return ""
	}
	forms := []struct {
		name string
		f    func(dr, dc int) int
	}{
		{"Δcol", func(_, dc int) int { return dc }},
		{"Δrow", func(dr, _ int) int { return dr }},
		{"−Δcol", func(_, dc int) int { return -dc }},
		{"−Δrow", func(dr, _ int) int { return -dr }},
		{"Δrow² + Δcol²", func(dr, dc int) int { return dr*dr + dc*dc }},
	}
	for _, grid := range factorizations(cells, 2) {
		if len(grid) != 2 {
			continue
		}
		w := grid[1]
		names := make([]string, c)
		for ch := range c {
			for _, f := range forms {
				ok := true
				for i := 0; i < cells && ok; i++ {
					for j := range cells {
						if v.data[(i*cells+j)*c+ch] != float32(f.f(j/w-i/w, j%w-i%w)) {
							ok = false
							break
						}
					}
				}
				if ok {
					names[ch] = f.name
					break
				}
			}
			if names[ch] == "" {
				break
			}
		}
		if names[c-1] != "" && slices.ContainsFunc(v.data, func(x float32) bool { return x != 0 }) {
			return fmt.Sprintf("each (query, key) pair's offset on the %v grid, key minus query: channels %s (a table the model makes from its grid's shape)", grid, strings.Join(names, ", "))
		}
	}
	return ""
}
