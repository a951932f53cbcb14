package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// refMaxPool is torch's max_pool2d written out: each output the largest
// input inside its window, cells outside the image skipped.
func refMaxPool(x []float32, xs, ys []int, p ConvParams) []float32 {
	st := max(p.Stride, 1)
	out := make([]float32, 0, exec.Numel(ys))
	for bc := range xs[0] * xs[1] {
		plane := x[bc*xs[2]*xs[3]:]
		for i := range ys[2] {
			for j := range ys[3] {
				best := float32(math.Inf(-1))
				for di := range p.Kernel {
					for dj := range p.Kernel {
						r, c := i*st-p.Pad+di, j*st-p.Pad+dj
						if r >= 0 && r < xs[2] && c >= 0 && c < xs[3] {
							best = max(best, plane[r*xs[3]+c])
						}
					}
				}
				out = append(out, best)
			}
		}
	}
	return out
}

// TestMaxPool2D: the pool's output sizes are torch's (floor and ceil
// mode, values printed by torch 1.13 for the same arguments), its values
// the largest of each window in f32 and bf16 alike (nothing rounds), and
// a padding beyond half the window is refused.
func TestMaxPool2D(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		h, k, st, pad int
		ceil          bool
		side          int // torch's output side for an h×h input
	}{
		{5, 2, 2, 0, false, 2},
		{5, 2, 2, 0, true, 3},
		{6, 3, 2, 1, false, 3},
		{6, 3, 2, 1, true, 4},
		{7, 3, 2, 1, true, 4},
		{4, 2, 2, 1, true, 3},
		{8, 3, 3, 1, true, 3},
		{5, 3, 1, 1, false, 5},
		{4, 1, 1, 0, false, 4},
	}
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		for _, c := range cases {
			p := ConvParams{Kernel: c.k, Stride: c.st, Pad: c.pad, Ceil: c.ceil}
			name := fmt.Sprintf("%v %dx%d window %d stride %d pad %d ceil %v", f, c.h, c.h, c.k, c.st, c.pad, c.ceil)
			xs := []int{2, 3, c.h, c.h}
			x := make([]float32, exec.Numel(xs))
			for i := range x {
				x[i] = f.Round(float32(rng.NormFloat64()))
			}
			got, shape := runOne(t, Node{Op: OpMaxPool2D, In: []string{"x"}, Attrs: Attrs{Conv: p}}, map[string]*Value{"x": in("x", Input, f, xs, x...)})
			if want := []int{2, 3, c.side, c.side}; fmt.Sprint(shape) != fmt.Sprint(want) {
				t.Fatalf("%s: shape %v, want %v", name, shape, want)
			}
			want := refMaxPool(x, xs, shape, p)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: [%d] = %v, want %v", name, i, got[i], want[i])
				}
			}
		}
	}
	if _, err := PoolShape([]int{1, 1, 8, 8}, ConvParams{Kernel: 3, Pad: 2}); err == nil {
		t.Error("padding 2 of a 3-cell window: no error")
	}
}
