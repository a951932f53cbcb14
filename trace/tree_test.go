package trace

import (
	"slices"
	"testing"
)

func TestTreeNavigation(t *testing.T) {
	calls := []Call{
		{ID: 0, Step: intp(0), Module: "net"},
		{ID: 1, Step: intp(0), Module: "net.block", Parent: intp(0)},
		{ID: 2, Step: intp(0), Module: "net.block.act", Parent: intp(1)},
		{ID: 3, Step: intp(0), Module: "net.block.act", Ordinal: 1, Parent: intp(1)},
		{ID: 4, Step: intp(1), Module: "net"},
		{ID: 5, Step: intp(1), Module: "net.block", Parent: intp(4)},
		{ID: 6, Step: nil, Module: "encoder"},
	}
	tr := newTree(calls)
	if got := tr.Steps(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("Steps = %v", got)
	}
	if got := tr.Roots(); !slices.Equal(got, []int{0, 4, 6}) {
		t.Errorf("Roots = %v", got)
	}
	if got := tr.Children(1); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("Children(1) = %v", got)
	}
	if p, ok := tr.Parent(3); !ok || p.ID != 1 {
		t.Errorf("Parent(3) = %v %v", p, ok)
	}
	if d := tr.Depth(3); d != 2 {
		t.Errorf("Depth(3) = %d", d)
	}
	ids := func(f Filter) []int {
		cs, err := tr.Select(f)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []int
	}{
		{"all", Filter{}, []int{0, 1, 2, 3, 4, 5, 6}},
		{"step 1", Filter{Step: intp(1)}, []int{4, 5}},
		{"glob crosses dots", Filter{Module: "net.*"}, []int{1, 2, 3, 5}},
		{"exact module", Filter{Module: "net.block.act"}, []int{2, 3}},
		{"depth 1", Filter{MaxDepth: 1}, []int{0, 4, 6}},
		{"step and glob", Filter{Step: intp(0), Module: "*.act"}, []int{2, 3}},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := tr.Select(Filter{Module: "net.["}); err == nil {
		t.Error("bad glob accepted")
	}
}
