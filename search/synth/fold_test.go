package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUnfoldByHand checks the host unfold against a 3×3 image unfolded by
// hand (2×2 windows, stride 1): each tap's four windows in a row.
func TestUnfoldByHand(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	got := unfoldHost(x, []int{1, 1, 3, 3}, window{k: 2, d: 1, p: 0, st: 1})
	want := []float32{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9}
	if !slices.Equal(got, want) {
		t.Fatalf("unfold = %v, want %v", got, want)
	}
	// padded by one, stride 2: the corners' windows read zeros
	got = unfoldHost(x, []int{1, 1, 3, 3}, window{k: 3, d: 1, p: 1, st: 2})
	if len(got) != 9*4 || got[0] != 0 || got[4*4] != 1 || got[8*4+3] != 0 {
		t.Fatalf("padded unfold = %v", got)
	}
}

// TestFoldIsUnfoldsAdjoint checks ⟨unfold(x), y⟩ = ⟨x, fold(y)⟩ over
// geometries with padding, dilation and strides that skip cells: fold
// sums each tap back onto the cell it read.
func TestFoldIsUnfoldsAdjoint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		h, w int
		win  window
	}{
		{5, 7, window{3, 1, 1, 2}}, {10, 12, window{3, 1, 1, 1}}, {9, 9, window{2, 2, 0, 3}}, {8, 6, window{4, 1, 2, 4}}, {7, 11, window{3, 3, 3, 2}},
	} {
		shape := []int{2, 3, c.h, c.w}
		x := make([]float32, 2*3*c.h*c.w)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		l := c.win.count(c.h) * c.win.count(c.w)
		y := make([]float32, 2*3*c.win.k*c.win.k*l)
		for i := range y {
			y[i] = float32(r.NormFloat64())
		}
		var a, b float64
		for i, u := range unfoldHost(x, shape, c.win) {
			a += float64(u) * float64(y[i])
		}
		for i, f := range foldHost(y, shape, c.win) {
			b += float64(f) * float64(x[i])
		}
		if math.Abs(a-b) > 1e-4*(1+math.Abs(a)) {
			t.Errorf("%dx%d %s: ⟨unfold x, y⟩ = %g, ⟨x, fold y⟩ = %g", c.h, c.w, c.win, a, b)
		}
		// the selection matrices say the same as the host unfold
		m := selection(c.h, c.win)
		o := c.win.count(c.h)
		for i := range c.win.k {
			for j := range o {
				src, in := c.win.source(j, i, c.h)
				row := m[(i*o+j)*c.h : (i*o+j+1)*c.h]
				if n := slices.Index(row, 1); in && n != src || !in && n != -1 {
					t.Errorf("%s: selection row (%d, %d) picks %d, want %d (inside %v)", c.win, i, j, n, src, in)
				}
			}
		}
	}
}

// TestAdaptiveWindows checks torch's adaptive windows of 11 cells to 5:
// [0,3) [2,5) [4,7) [6,9) [8,11), three taps each.
func TestAdaptiveWindows(t *testing.T) {
	taps, idx := adaptiveWindows(11, 5)
	want := []float32{0, 2, 4, 6, 8, 1, 3, 5, 7, 9, 2, 4, 6, 8, 10}
	if taps != 3 || !slices.Equal(idx, want) {
		t.Fatalf("adaptiveWindows(11, 5) = %d, %v; want 3, %v", taps, idx, want)
	}
	// 13 to 7: windows of 2 and 3 cells, a short one repeating its last cell
	taps, idx = adaptiveWindows(13, 7)
	if taps != 3 || idx[0] != 0 || idx[7] != 1 || idx[14] != 1 {
		t.Fatalf("adaptiveWindows(13, 7) = %d, %v", taps, idx)
	}
}
