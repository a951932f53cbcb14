package synth

import (
	"slices"
	"testing"
)

// TestRollData checks rollData against torch.roll's answers, written by hand.
func TestRollData(t *testing.T) {
	v := &val{shape: []int{2, 3, 2}, data: []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}
	for _, c := range []struct {
		ax, k int
		want  []float32
	}{
		{1, 1, []float32{4, 5, 0, 1, 2, 3, 10, 11, 6, 7, 8, 9}}, // the last row first
		{1, 2, []float32{2, 3, 4, 5, 0, 1, 8, 9, 10, 11, 6, 7}},
		{0, 1, []float32{6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5}},
		{2, 1, []float32{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10}},
		{1, 3, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}, // a whole turn
	} {
		if got := rollData(v, c.ax, c.k); !slices.Equal(got, c.want) {
			t.Errorf("roll axis %d by %d: %v, want %v", c.ax, c.k, got, c.want)
		}
	}
}
