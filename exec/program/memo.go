package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
)

// Memo keeps the results of a program's step-invariant nodes across the
// forwards of one run: a node that reads only weights, inputs and
// constants (a RoPE table made from the request's ids, say) gives the same
// result at every step, so it runs at the first and is read back after.
// Only a run that nothing observes or overrides uses it (Runner.Run): a
// hook may want to see or replace every value at every step.
type Memo struct {
	vals map[string]exec.Tensor // a memoised node's outputs, by value name
	held map[exec.Tensor]bool
	// order: the tensors in the order they were made
	order []exec.Tensor
	p     *Program     // the program inv is of
	inv   map[int]bool // its step-invariant nodes (less those not kept)
	bytes int          // what the kept results take, at most
	// Limit bounds bytes (0: MemoBytes).
	Limit int
}

// MemoBytes bounds what a memo keeps (its results counted as f32): past
// it, an invariant node is made at every step as before, so that keeping
// never costs more than a few activations' memory (a cast of every
// weight, say, is not kept whole).
const MemoBytes = 1 << 30

// NewMemo returns an empty memo; Close frees what it holds.
func NewMemo() *Memo {
	return &Memo{vals: map[string]exec.Tensor{}, held: map[exec.Tensor]bool{}}
}

// Close frees the memoised tensors on b (views before what they view:
// the newest first).
func (m *Memo) Close(b exec.Backend) {
	for i := len(m.order) - 1; i >= 0; i-- {
		b.Free(m.order[i])
	}
	m.order = nil
	m.vals, m.held, m.p, m.inv, m.bytes = map[string]exec.Tensor{}, map[exec.Tensor]bool{}, nil, nil, 0
}

// invariantNodes is the set of p's step-invariant nodes: those whose
// inputs are weights, inputs, constants or results of invariant nodes (no
// step input reaches them), none of whose results is a program output
// (those are handed to the caller). Movements count: a kept view keeps its
// storage's owner kept too. Taps do not matter: a run with a memo has no
// hook to show them to.
func invariantNodes(p *Program) map[int]bool {
	inv := map[int]bool{}
	made := map[string]bool{} // temps an invariant node makes
	for i := range p.Nodes {
		n := &p.Nodes[i]
		ok := len(n.Out) > 0
		for _, name := range n.In {
			if name == "" {
				continue
			}
			switch p.Values[name].Kind {
			case StepInput:
				ok = false
			case Temp:
				ok = ok && made[name]
			}
		}
		for _, name := range n.Out {
			ok = ok && !slices.Contains(p.Outputs, name)
		}
		if ok {
			inv[i] = true
			for _, name := range n.Out {
				made[name] = true
			}
		}
	}
	return inv
}

// memoised runs node i from the memo where the run keeps one and the node
// is step-invariant: its results read back, or made now and kept. ok false:
// the node runs as usual.
func (r *run) memoised(i int, n *Node) (ok bool, err error) {
	m := r.it.Memo
	if m == nil {
		return false, nil
	}
	if m.p != r.it.P {
		m.p, m.inv = r.it.P, invariantNodes(r.it.P)
	}
	if !m.inv[i] {
		return false, nil
	}
	if _, have := m.vals[n.Out[0]]; !have {
		size := 0
		for _, name := range n.In {
			if v := r.it.P.Values[name]; name != "" && v.Kind == Temp && m.vals[name] == nil {
				m.inv[i] = false // an input was not kept: neither is this
				return false, nil
			}
		}
		for _, name := range n.Out {
			size += 4 * exec.Numel(r.it.P.Values[name].Shape) // at most f32
		}
		limit := m.Limit
		if limit == 0 {
			limit = MemoBytes
		}
		if m.bytes+size > limit {
			m.inv[i] = false // over the memo's budget: made every step
			return false, nil
		}
		m.bytes += size
		in := make([]exec.Tensor, len(n.In))
		for j, name := range n.In {
			if in[j], err = r.get(name); err != nil {
				return false, err
			}
		}
		var outs []exec.Tensor
		if h := r.it.Hooks.Run; h != nil {
			outs, err = h(r.step, i, n, in)
		} else {
			outs, err = RunNode(r.it.B, n, in)
		}
		if err != nil {
			return false, err
		}
		if len(outs) != len(n.Out) {
			for _, t := range outs {
				r.it.B.Free(t)
			}
			return false, fmt.Errorf("%d results, want %d", len(outs), len(n.Out))
		}
		for j, name := range n.Out {
			m.vals[name], m.held[outs[j]] = outs[j], true
			m.order = append(m.order, outs[j])
		}
	}
	for _, name := range n.Out {
		r.vals[name] = m.vals[name] // not owned: the memo frees it
	}
	return true, nil
}
