package program

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestSegmentMaskHost: bounds [0, 2, 2, 5] over 5 rows give segments
// {0, 1} and {2, 3, 4} (the empty one between contributes no row); bounds
// that do not run from 0 to the rows, fall, or are not integers are
// refused.
func TestSegmentMaskHost(t *testing.T) {
	b := cpu.New(1)
	inf := float32(math.Inf(-1))
	for _, c := range []struct {
		name   string
		bounds []float32
		n      int
		want   []float32 // nil: refused
	}{
		{"two segments and an empty one", []float32{0, 2, 2, 5}, 5, []float32{
			0, 0, inf, inf, inf,
			0, 0, inf, inf, inf,
			inf, inf, 0, 0, 0,
			inf, inf, 0, 0, 0,
			inf, inf, 0, 0, 0,
		}},
		{"one segment", []float32{0, 3}, 3, make([]float32, 9)},
		{"not to the rows", []float32{0, 2, 4}, 5, nil},
		{"not from 0", []float32{1, 5}, 5, nil},
		{"falling", []float32{0, 3, 2, 5}, 5, nil},
		{"fractional", []float32{0, 2.5, 5}, 5, nil},
	} {
		x, err := b.Upload(c.bounds, []int{len(c.bounds)}, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		y, err := segmentMaskHost(b, x, c.n)
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: bounds %v over %d rows accepted", c.name, c.bounds, c.n)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got, _ := b.Download(y)
		if !slices.Equal(got, c.want) || !slices.Equal(y.Shape(), []int{1, 1, c.n, c.n}) {
			t.Errorf("%s: mask %v %v, want %v", c.name, y.Shape(), got, c.want)
		}
	}
}
