package structure

import (
	"math"

	"github.com/zflow/zflow/semantics"
)

// findFinal reads the stage after the last block: the head (a linear from
// the hidden width whose result is the model's), the norm before it (or
// whose result is the model's), and an adaptive norm's modulation (a
// linear reading act(cond) with 2 × hidden results).
func (d *discoverer) findFinal() {
	f := &d.st.Final
	f.Roles = map[string]semantics.Role{}
	if len(d.blocks) == 0 {
		d.undetermined("structure.final", "final", "the stage after the blocks is read from where they end, and no block was found")
		return
	}
	last := d.blocks[len(d.blocks)-1].subtree()
	end := last[len(last)-1].order
	var after []*node
	for _, n := range d.g.nodes {
		if n.order > end && d.outside(n) {
			after = append(after, n)
		}
	}
	var mout port
	var have bool
	for _, name := range d.st.Model.Outputs {
		mout, have = portNamed(d.g.root.outs, name)
	}
	if !have {
		d.undetermined("structure.final", "final", "the model call's result port is unknown")
		return
	}
	var head, mod *linearInfo
	for _, n := range after {
		li, ok := d.linears[n]
		if !ok {
			continue
		}
		if li.inW == d.st.Hidden && (d.v.same(li.out, mout) || d.v.rearranged(li.out, mout)) {
			l := li
			head = &l
		} else if li.outW == 2*d.st.Hidden && d.isModulation(li) {
			l := li
			mod = &l
		}
	}
	// The norm: its result is the head's argument (through the adaptive
	// norm's per-channel map) or the model's result.
	var norm *node
	best := math.Inf(1)
	for _, n := range after {
		in, o, ok := n.shapePreserving()
		if !ok || len(n.children) > 0 || in.width() != d.st.Hidden {
			continue
		}
		if len(n.params) == 0 && !normalizedRows(d.v.floats(o.key), o.width()) {
			continue
		}
		e := math.Inf(1)
		switch {
		case head != nil && o.numel() == head.in.numel():
			if d.v.same(o, head.in) {
				e = 0
			} else {
				_, _, e = affineFit(d.v.floats(o.key), d.v.floats(head.in.key), o.width())
			}
		case head == nil && (d.v.same(o, mout) || d.v.close(o, mout) < tolSame):
			e = 0
		}
		if e < best && e <= tolFunc {
			norm, best = n, e
		}
	}
	var rows port
	switch {
	case norm != nil:
		rows, _ = norm.in()
		f.Roles["norm"] = d.normRole(norm)
	case head != nil:
		rows = head.in
	}
	if head != nil {
		f.Roles["head"] = d.linearRole(*head)
	}
	if mod != nil {
		if norm == nil {
			d.undetermined("structure.final", "final.modulation", "a modulation linear follows the blocks, but no norm it could modulate")
		} else {
			f.Roles["modulation"] = d.linearRole(*mod)
		}
	}
	f.Stream = d.streamOf(rows)
	if f.Stream == "" || f.Stream == joint {
		d.undetermined("structure.final", "final", "the final stage reads %d rows, which are no single stream's", tokensOf(rows))
		f.Stream = ""
	}
	if mod == nil || norm == nil {
		return
	}
	a := lca(mod.n, norm)
	if a == d.g.root {
		return
	}
	nin, _ := norm.in()
	bd := &semantics.Boundary{Module: a.c.Module, Inputs: map[string]string{}, Outputs: map[string]string{}}
	for _, p := range a.ins {
		switch {
		case d.v.same(p, nin):
			bd.Inputs["x"] = p.name
		case d.cond != nil && d.v.same(p, *d.cond):
			bd.Inputs[condRole] = p.name
		}
	}
	if o, ok := a.out(); ok {
		bd.Outputs["out"] = o.name
	}
	f.Boundary = bd
}
