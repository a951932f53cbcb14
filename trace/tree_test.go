package trace

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
	// Each walks the selection in place (issue 12, item 10: inspect of
	// 10^6 calls holds no copy) and stops at fn's first error.
	var seen []int
	stop := errors.New("stop")
	err := tr.Each(Filter{Module: "net.*"}, func(c *Call) error {
		if i, _ := tr.index.find(c.ID); c != &tr.calls[i] {
			t.Errorf("call %d: a copy, not the tree's", c.ID)
		}
		seen = append(seen, c.ID)
		if len(seen) == 2 {
			return stop
		}
		return nil
	})
	if err != stop || !slices.Equal(seen, []int{1, 2}) {
		t.Errorf("Each stopped with %v after %v, want stop after [1 2]", err, seen)
	}
	if err := tr.Each(Filter{Module: "net.["}, func(*Call) error { return nil }); err == nil {
		t.Error("Each: bad glob accepted")
	}
}

// TestDeepTreeIsLinear: issue 12, item 7. 3·10^4 nested calls (2 minutes
// to validate before, walking every parent chain with a fresh map) open
// and give every depth in time linear in the calls; the errors of a bad
// chain are still named.
func TestDeepTreeIsLinear(t *testing.T) {
	const n = 30000
	m := smallManifest()
	for i := 1; i < n; i++ {
		m.Calls = append(m.Calls, Call{ID: i, Step: intp(0), Module: fmt.Sprintf("m%d", i), Parent: intp(i - 1)})
	}
	p := writeZip(t, t.TempDir(), []zipEntry{
		npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2)),
		npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)),
		manifestEntry(t, m),
	})
	start := time.Now()
	tr, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tree := tr.Tree()
	for i := range n {
		if d := tree.Depth(i); d != i {
			t.Fatalf("depth of call %d: %d", i, d)
		}
	}
	if sel, err := tree.Select(Filter{Module: "*", MaxDepth: n}); err != nil || len(sel) != n {
		t.Errorf("select: %d of %d calls, %v", len(sel), n, err)
	}
	// Linear is a few milliseconds; quadratic was minutes. 5 s leaves room
	// for a slow, shared machine without letting n² through.
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("%d nested calls took %v", n, el)
	}
	for _, c := range []struct {
		name string
		edit func(calls []Call)
		want string
	}{
		{"a cycle deep in the chain", func(calls []Call) { calls[100].Parent = intp(n - 1) }, "cycle in parent chain"},
		{"a missing parent", func(calls []Call) { calls[n-1].Parent = intp(n + 5) }, "parent 30005 does not exist"},
		{"parent after child", func(calls []Call) {
			calls[n-2].Parent, calls[n-1].Parent = intp(n-1), intp(n-3)
		}, "is listed after it"},
	} {
		calls := slices.Clone(m.Calls)
		for i := range calls {
			if calls[i].Parent != nil {
				calls[i].Parent = intp(*calls[i].Parent)
			}
		}
		c.edit(calls)
		bad := *m
		bad.Calls = calls
		if err := bad.validate(func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
