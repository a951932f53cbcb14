package trace

import (
	"path"
	"sort"
)

// Tree navigates the call tree: by id, parent and children, by step and by
// module glob.
type Tree struct {
	calls    []Call
	index    map[int]int   // id → position
	children map[int][]int // id → child ids, in entry order
	roots    []int
	depth    []int // by position; -1 where the parent does not come first (walked on demand)
}

func newTree(calls []Call) *Tree {
	t := &Tree{calls: calls, index: make(map[int]int, len(calls)), children: map[int][]int{}, depth: make([]int, len(calls))}
	for i, c := range calls {
		t.index[c.ID] = i
		if c.Parent == nil {
			t.roots = append(t.roots, c.ID)
		} else {
			t.children[*c.Parent] = append(t.children[*c.Parent], c.ID)
		}
	}
	// Depths in one pass: a validated manifest lists a parent before its
	// children, so its depth is known when a child's is computed.
	for i, c := range calls {
		switch j, ok := t.index[deref(c.Parent)]; {
		case c.Parent == nil:
			t.depth[i] = 0
		case ok && j < i && t.depth[j] >= 0:
			t.depth[i] = t.depth[j] + 1
		default:
			t.depth[i] = -1
		}
	}
	return t
}

// Calls lists every call in entry order.
func (t *Tree) Calls() []Call { return t.calls }

// Call returns the call with the given id.
func (t *Tree) Call(id int) (Call, bool) {
	i, ok := t.index[id]
	if !ok {
		return Call{}, false
	}
	return t.calls[i], true
}

// Roots lists the ids of calls without a parent.
func (t *Tree) Roots() []int { return t.roots }

// Children lists the ids of id's direct children in entry order.
func (t *Tree) Children(id int) []int { return t.children[id] }

// Parent returns id's parent, if it has one.
func (t *Tree) Parent(id int) (Call, bool) {
	c, ok := t.Call(id)
	if !ok || c.Parent == nil {
		return Call{}, false
	}
	return t.Call(*c.Parent)
}

// Depth is the number of ancestors of id (0 for a root).
func (t *Tree) Depth(id int) int {
	if i, ok := t.index[id]; ok && t.depth[i] >= 0 {
		return t.depth[i]
	}
	// Not in entry order (a tree of unvalidated calls): walk, at most as
	// many steps as there are calls, so a cycle cannot loop.
	d := 0
	for c, ok := t.Parent(id); ok && d < len(t.calls); c, ok = t.Parent(c.ID) {
		d++
	}
	return d
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// Steps lists the distinct non-null steps, ascending.
func (t *Tree) Steps() []int {
	seen := map[int]bool{}
	var out []int
	for _, c := range t.calls {
		if c.Step != nil && !seen[*c.Step] {
			seen[*c.Step] = true
			out = append(out, *c.Step)
		}
	}
	sort.Ints(out)
	return out
}

// Filter selects calls. Zero values select everything.
type Filter struct {
	Step     *int   // only this step (a nil step never matches a set one)
	Module   string // path.Match glob over the module path ("*" crosses dots)
	MaxDepth int    // 0: any depth; n: depth < n
}

// Select lists the calls that f selects, in entry order. A bad glob gives
// path.ErrBadPattern.
func (t *Tree) Select(f Filter) ([]Call, error) {
	var out []Call
	err := t.Each(f, func(c *Call) error {
		out = append(out, *c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each calls fn with each call f selects, in entry order, without copying
// the selection (a manifest of 10^6 calls is walked in the memory of one);
// fn must not change the call. It stops at fn's first error and returns it.
func (t *Tree) Each(f Filter, fn func(*Call) error) error {
	if f.Module != "" {
		if _, err := path.Match(f.Module, ""); err != nil {
			return err
		}
	}
	for i := range t.calls {
		c := &t.calls[i]
		if f.Step != nil && (c.Step == nil || *c.Step != *f.Step) {
			continue
		}
		if f.Module != "" {
			if ok, _ := path.Match(f.Module, c.Module); !ok {
				continue
			}
		}
		if f.MaxDepth > 0 && t.Depth(c.ID) >= f.MaxDepth {
			continue
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}
