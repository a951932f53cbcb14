package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
)

// Hooks let a caller see and steer a forward at the reference's boundaries.
type Hooks struct {
	// Observe is called with every tapped value as it is made (an input
	// tap: when its module's segment starts). The tensor is only valid
	// during the call.
	Observe func(step int, tap Tap, t exec.Tensor) error
	// Override may return the reference's tensor for an input tap (teacher
	// forcing); like is our value (its shape and format). The interpreter
	// owns and frees what it returns. ok false keeps our value.
	Override func(step int, tap Tap, like exec.Tensor) (t exec.Tensor, ok bool, err error)
	// OverrideOutputs offers every output tap to Override too, after
	// Observe: what Override returns replaces our value for the nodes that
	// read it (teacher forcing at every boundary, so that each boundary is
	// computed from the reference's own values).
	OverrideOutputs bool
	// Run, if set, runs node i in place of RunNode (to memoise or
	// instrument it). What it returns is owned by the interpreter.
	Run func(step, i int, n *Node, in []exec.Tensor) ([]exec.Tensor, error)
}

// Interpreter runs a program's nodes on a backend.
type Interpreter struct {
	B     exec.Backend
	P     *Program
	Hooks Hooks
	// Memo, if set, keeps step-invariant results across forwards (see
	// Memo); the caller must leave Hooks.Observe and Override unset while
	// it is.
	Memo *Memo
}

// Forward runs every node once. env holds every value that is not a Temp
// (weights, inputs, constants, step inputs) by name; Forward never frees
// them. It returns the program's outputs, which the caller owns; every
// other intermediate is freed after its last use.
func (it *Interpreter) Forward(step int, env map[string]exec.Tensor) ([]exec.Tensor, error) {
	r := &run{it: it, step: step, env: env, vals: map[string]exec.Tensor{},
		root: map[string]string{}, views: map[string]int{}, dead: map[string]bool{}}
	outs, err := r.forward()
	r.cleanup()
	return outs, err
}

// run is the state of one forward.
type run struct {
	it   *Interpreter
	step int
	env  map[string]exec.Tensor
	vals map[string]exec.Tensor // temps and overridden values
	// owned: values in vals this forward must free (temps, overrides).
	owned  []exec.Tensor
	active []Segment
	// Aliasing: a movement op's output may share its input's storage.
	// root[v] is the temp v views; views[r] counts r's live views; dead[r]
	// says r itself is past its last use.
	root  map[string]string
	views map[string]int
	dead  map[string]bool
	// Joins (fuse.go): the join regions by concat node, the linear and
	// norm nodes they run at their concat, the ropes that ran there.
	joinAt   map[int]*joinPlan
	deferred map[int]bool
	ropeRan  map[int]bool
}

func (r *run) get(name string) (exec.Tensor, error) {
	if name == "" {
		return nil, nil
	}
	if t, ok := r.vals[name]; ok {
		return t, nil
	}
	if t, ok := r.env[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("value %q is not available (a missing input or weight)", name)
}

func (r *run) forward() ([]exec.Tensor, error) {
	p := r.it.P
	for _, v := range p.Values {
		if v.Kind != Temp {
			if _, ok := r.env[v.Name]; !ok {
				return nil, fmt.Errorf("program: %s %q (%s) is not in the environment", v.Kind, v.Name, v.Source)
			}
		}
	}
	r.joinAt, r.deferred = r.joins()
	r.ropeRan = map[int]bool{}
	for i := 0; i < len(p.Nodes); i++ {
		n := &p.Nodes[i]
		if err := r.enter(i); err != nil {
			return nil, err
		}
		switch {
		case r.deferred[i]: // runs at its concat
			r.leave(i + 1)
			continue
		case r.ropeRan[i]: // ran at its concat
			r.release(i, n)
			r.leave(i + 1)
			continue
		case r.joinAt[i] != nil:
			if err := r.join(i, r.joinAt[i]); err != nil {
				return nil, fmt.Errorf("program: node %d (%s %s, a join): %w", i, n.Op, n.Role, err)
			}
			r.leave(i + 1)
			continue
		}
		if ok, err := r.memoised(i, n); err != nil {
			return nil, fmt.Errorf("program: node %d (%s %s): %w", i, n.Op, n.Role, err)
		} else if ok {
			r.release(i, n)
			r.leave(i + 1)
			continue
		}
		j, fused, err := r.fuse(i)
		if err != nil {
			return nil, fmt.Errorf("program: nodes %d–%d (%s %s, fused): %w", i, j, n.Op, n.Role, err)
		}
		if fused {
			i = j
			continue
		}
		in := make([]exec.Tensor, len(n.In))
		for j, name := range n.In {
			t, err := r.get(name)
			if err != nil {
				return nil, fmt.Errorf("program: node %d (%s %s): %w", i, n.Op, n.Role, err)
			}
			in[j] = t
		}
		var outs []exec.Tensor
		if h := r.it.Hooks.Run; h != nil {
			outs, err = h(r.step, i, n, in)
		} else {
			outs, err = RunNode(r.it.B, n, in)
		}
		if err != nil {
			return nil, fmt.Errorf("program: node %d (%s %s): %w", i, n.Op, n.Role, err)
		}
		if len(outs) != len(n.Out) {
			for _, t := range outs {
				r.it.B.Free(t)
			}
			return nil, fmt.Errorf("program: node %d (%s %s): %d results, want %d", i, n.Op, n.Role, len(outs), len(n.Out))
		}
		for j, name := range n.Out {
			r.vals[name] = outs[j]
			r.owned = append(r.owned, outs[j])
			if n.Op.movement() {
				if src := n.In[0]; p.Values[src].Kind == Temp {
					rt := r.rootOf(src)
					r.root[name] = rt
					r.views[rt]++
				}
			}
		}
		for _, name := range n.Out {
			if err := r.made(name); err != nil {
				return nil, err
			}
		}
		r.release(i, n)
		r.leave(i + 1)
	}
	outs := make([]exec.Tensor, len(p.Outputs))
	for i, name := range p.Outputs {
		t, err := r.get(name)
		if err != nil {
			return nil, err
		}
		if p.Values[name].Kind != Temp || !slices.Contains(r.owned, t) {
			// a value that outlives the forward (a constant, a weight, an
			// input) or a view of one: the caller frees what it gets, so it
			// gets a copy
			if t, err = r.it.B.Cast(t, t.Format()); err != nil {
				return nil, err
			}
		} else {
			r.disown(t)
		}
		outs[i] = t
	}
	return outs, nil
}

func (r *run) rootOf(name string) string {
	if rt, ok := r.root[name]; ok {
		return rt
	}
	return name
}

// enter opens the segments that start at node i (outermost first) and
// serves their modules' input taps whose values exist already.
func (r *run) enter(i int) error {
	for _, s := range r.it.P.Segments {
		if s.Start != i || s.End <= s.Start {
			continue
		}
		r.active = append(r.active, s)
		for _, name := range r.it.P.Order {
			v := r.it.P.Values[name]
			for _, tp := range v.Taps {
				if !tp.In || tp.Module != s.Module {
					continue
				}
				if _, err := r.get(name); err != nil {
					continue // made inside the segment: served by made
				}
				if err := r.serve(name, tp); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// leave closes the segments that end before node i.
func (r *run) leave(i int) {
	r.active = slices.DeleteFunc(r.active, func(s Segment) bool { return s.End <= i })
}

// made reports a new value's taps: outputs now, inputs of an active
// segment's module now (inputs of a later segment when it starts).
func (r *run) made(name string) error {
	for _, tp := range r.it.P.Values[name].Taps {
		if !tp.In {
			if err := r.observe(name, tp); err != nil {
				return err
			}
			if r.it.Hooks.OverrideOutputs {
				if err := r.override(name, tp); err != nil {
					return err
				}
			}
			continue
		}
		for _, s := range r.active {
			if s.Module == tp.Module {
				if err := r.serve(name, tp); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// serve offers an input tap to Override, then to Observe.
func (r *run) serve(name string, tp Tap) error {
	if err := r.override(name, tp); err != nil {
		return err
	}
	return r.observe(name, tp)
}

// override offers a tap to Override and keeps what it returns.
func (r *run) override(name string, tp Tap) error {
	h := r.it.Hooks.Override
	if h == nil {
		return nil
	}
	cur, err := r.get(name)
	if err != nil {
		return err
	}
	t, ok, err := h(r.step, tp, cur)
	if err != nil {
		return fmt.Errorf("program: override %s: %w", tp.Key(r.step), err)
	}
	if ok {
		if !slices.Equal(t.Shape(), cur.Shape()) {
			r.it.B.Free(t)
			return fmt.Errorf("program: override %s: shape %v, ours is %v", tp.Key(r.step), t.Shape(), cur.Shape())
		}
		r.vals[name] = t
		r.owned = append(r.owned, t)
	}
	return nil
}

func (r *run) observe(name string, tp Tap) error {
	h := r.it.Hooks.Observe
	if h == nil {
		return nil
	}
	t, err := r.get(name)
	if err != nil {
		return err
	}
	if err := h(r.step, tp, t); err != nil {
		return fmt.Errorf("program: observe %s: %w", tp.Key(r.step), err)
	}
	return nil
}

// release frees the temps whose last use is node i, and node i's outputs
// nothing reads; a temp that views another keeps it alive until the view
// is freed.
func (r *run) release(i int, n *Node) {
	p := r.it.P
	var done []string
	for _, name := range n.In {
		if name != "" && p.Values[name].Kind == Temp && p.lastUse[name] == i {
			done = append(done, name)
		}
	}
	for _, name := range n.Out {
		if _, used := p.lastUse[name]; !used && !slices.Contains(p.Outputs, name) {
			done = append(done, name)
		}
	}
	for _, name := range done {
		if slices.Contains(p.Outputs, name) || r.dead[name] {
			continue
		}
		r.dead[name] = true
		if rt, isView := r.root[name]; isView {
			r.free(name)
			if r.views[rt]--; r.views[rt] == 0 && r.dead[rt] {
				r.free(rt)
			}
			continue
		}
		if r.views[name] == 0 {
			r.free(name)
		}
	}
}

func (r *run) free(name string) {
	t, ok := r.vals[name]
	if !ok {
		return
	}
	delete(r.vals, name)
	if m := r.it.Memo; m != nil && m.held[t] {
		return // kept for the next forward
	}
	r.disown(t)
	r.it.B.Free(t)
}

// disown removes t from the tensors this forward frees.
func (r *run) disown(t exec.Tensor) {
	for i, o := range r.owned {
		if o == t {
			r.owned = slices.Delete(r.owned, i, i+1)
			return
		}
	}
}

// cleanup frees whatever this forward still owns (everything after an
// error; the values teacher forcing replaced after success), newest first
// so that views go before what they view.
func (r *run) cleanup() {
	for i := len(r.owned) - 1; i >= 0; i-- {
		r.it.B.Free(r.owned[i])
	}
	r.owned = nil
}
