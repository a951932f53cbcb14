package trace

import (
	"math"
	"path"
	"slices"
	"sort"
)

// Tree navigates the call tree: by id, parent and children, by step and by
// module glob.
type Tree struct {
	calls   []Call
	index   idIndex
	kids    []int         // child ids grouped by their parent's position, in entry order
	kidsAt  []int         // by position: where its children start in kids (one more entry at the end)
	orphans map[int][]int // children of ids that are not calls (an unvalidated tree)
	roots   []int
	depth   []int // by position; -1 where the parent does not come first (walked on demand)
}

func newTree(calls []Call) *Tree {
	t := &Tree{calls: calls, index: newIDIndex(calls), kidsAt: make([]int, len(calls)+1), depth: make([]int, len(calls))}
	// Children in two passes over the calls, counted and then placed, so
	// that a tree of 10^6 calls holds two slices, not a slice per parent.
	for _, c := range calls {
		if c.Parent == nil {
			t.roots = append(t.roots, c.ID)
		} else if j, ok := t.index.find(*c.Parent); ok {
			t.kidsAt[j+1]++
		} else {
			if t.orphans == nil {
				t.orphans = map[int][]int{}
			}
			t.orphans[*c.Parent] = append(t.orphans[*c.Parent], c.ID)
		}
	}
	for j := range calls {
		t.kidsAt[j+1] += t.kidsAt[j]
	}
	t.kids = make([]int, t.kidsAt[len(calls)])
	next := slices.Clone(t.kidsAt[:len(calls)])
	for _, c := range calls {
		if c.Parent == nil {
			continue
		}
		if j, ok := t.index.find(*c.Parent); ok {
			t.kids[next[j]] = c.ID
			next[j]++
		}
	}
	// Depths in one pass: a validated manifest lists a parent before its
	// children, so its depth is known when a child's is computed.
	for i, c := range calls {
		switch j, ok := t.index.find(deref(c.Parent)); {
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

// idIndex finds a call's position by its id: a slice where the ids are
// dense (writers number calls 0, 1, …), a map where they are not.
type idIndex struct {
	dense  []int32 // id → position+1; 0 where no call has the id
	sparse map[int]int
	dup    int // the first id a call repeats (the later call holds it), where dupe
	dupe   bool
}

func newIDIndex(calls []Call) idIndex {
	var x idIndex
	n := len(calls)
	denseOK := n < math.MaxInt32/2
	for _, c := range calls {
		if c.ID < 0 || c.ID >= 2*n+16 {
			denseOK = false
			break
		}
	}
	if denseOK {
		x.dense = make([]int32, 2*n+16)
	} else {
		x.sparse = make(map[int]int, n)
	}
	for i, c := range calls {
		if _, seen := x.find(c.ID); seen && !x.dupe {
			x.dup, x.dupe = c.ID, true
		}
		if x.dense != nil {
			x.dense[c.ID] = int32(i + 1)
		} else {
			x.sparse[c.ID] = i
		}
	}
	return x
}

// find returns the position of the call with the given id.
func (x idIndex) find(id int) (int, bool) {
	if x.dense != nil {
		if id < 0 || id >= len(x.dense) || x.dense[id] == 0 {
			return 0, false
		}
		return int(x.dense[id]) - 1, true
	}
	i, ok := x.sparse[id]
	return i, ok
}

// Calls lists every call in entry order.
func (t *Tree) Calls() []Call { return t.calls }

// Call returns the call with the given id.
func (t *Tree) Call(id int) (Call, bool) {
	i, ok := t.index.find(id)
	if !ok {
		return Call{}, false
	}
	return t.calls[i], true
}

// Roots lists the ids of calls without a parent.
func (t *Tree) Roots() []int { return t.roots }

// Children lists the ids of id's direct children in entry order.
func (t *Tree) Children(id int) []int {
	i, ok := t.index.find(id)
	if !ok {
		return t.orphans[id]
	}
	a, b := t.kidsAt[i], t.kidsAt[i+1]
	if a == b {
		return nil
	}
	return t.kids[a:b:b] // capped: a caller's append cannot reach the next call's children
}

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
	if i, ok := t.index.find(id); ok && t.depth[i] >= 0 {
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
