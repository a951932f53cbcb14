package program

import "testing"

func TestSameLayout(t *testing.T) {
	for _, c := range []struct {
		a, b []int
		want bool
	}{
		{[]int{1, 36, 4, 16}, []int{1, 36, 64}, true},
		{[]int{1, 12, 16}, []int{12, 16}, true},
		{[]int{43, 16}, []int{43, 16}, true},
		{[]int{1, 2, 16, 16}, []int{1, 16, 32}, false},
		{[]int{6, 4}, []int{4, 6}, false},
		{[]int{2, 3}, []int{3, 2}, false},
		{[]int{24}, []int{2, 3, 4}, true},
		{[]int{2, 12}, []int{2, 3, 5}, false},
		{[]int{1}, []int{1, 1}, true},
		{[]int{}, []int{1}, true},
	} {
		if got := SameLayout(c.a, c.b); got != c.want {
			t.Errorf("SameLayout(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestHeadsFirstOrderInvertsRelayout: writing our value in the reference's
// heads-first layout and reading it back gives it unchanged.
func TestHeadsFirstOrderInvertsRelayout(t *testing.T) {
	ours, ref := []int{2, 3, 4 * 5}, []int{2, 4, 3, 5}
	v := make([]float32, 2*3*4*5)
	for i := range v {
		v[i] = float32(i)
	}
	back, ok := Relayout(headsFirstOrder(v, ref), ref, ours)
	if !ok {
		t.Fatal("shapes not recognised as heads first")
	}
	for i := range v {
		if back[i] != v[i] {
			t.Fatalf("element %d: %v, want %v", i, back[i], v[i])
		}
	}
}
