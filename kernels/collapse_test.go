package kernels

import (
	"slices"
	"testing"
)

// TestCollapseAxes: a copy's axes merged where both sides step over them
// as one run, axes of one dropped; every case copies the same elements in
// the same order as before (checked by enumerating both).
func TestCollapseAxes(t *testing.T) {
	for _, c := range []struct {
		name           string
		dims, sst, dst []int
		want           []int
	}{
		{"contiguous", []int{2, 3, 4}, []int{12, 4, 1}, []int{12, 4, 1}, []int{24}},
		{"transpose of two blocks", []int{3, 2, 4, 5}, []int{5, 60, 15, 1}, []int{40, 20, 5, 1}, []int{3, 8, 5}},
		{"ones dropped", []int{1, 4, 1, 2}, []int{8, 1, 8, 4}, []int{8, 2, 2, 1}, []int{4, 2}},
		{"all ones", []int{1, 1}, []int{1, 1}, []int{1, 1}, []int{1}},
		{"rank 8 to 3", []int{2, 2, 2, 2, 2, 2, 2, 2}, []int{1, 128, 64, 32, 16, 8, 4, 2}, []int{128, 64, 32, 16, 8, 4, 2, 1}, []int{2, 128}},
	} {
		d, s, o := CollapseAxes(c.dims, c.sst, c.dst)
		if !slices.Equal(d, c.want) {
			t.Errorf("%s: dims %v, want %v", c.name, d, c.want)
		}
		if a, b := offsets(c.dims, c.sst, c.dst), offsets(d, s, o); !slices.Equal(a, b) {
			t.Errorf("%s: the copy changed: %v, was %v", c.name, b, a)
		}
	}
}

// offsets enumerates a copy's (source, destination) offsets in order.
func offsets(dims, sst, dst []int) [][2]int {
	var out [][2]int
	idx := make([]int, len(dims))
	for {
		var s, d int
		for i, x := range idx {
			s += x * sst[i]
			d += x * dst[i]
		}
		out = append(out, [2]int{s, d})
		i := len(idx) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < dims[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}
