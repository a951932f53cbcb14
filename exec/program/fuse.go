package program

import (
	"slices"

	"github.com/zflow/zflow/exec"
)

// Fusion: when the backend implements exec.Fuser, the interpreter offers
// it each region of the program, a linear or norm node followed by up to
// exec.MaxRegionSteps pointwise nodes, each reading the previous node's
// result, which nothing else reads, no program output and no boundary a
// hook watches. The region is found by its ops alone; the backend fuses
// it or declines (then the nodes run one by one), and a fused region's
// result is the unfused one's, bit for bit (exec.Fuser's contract).

// stepOps maps the pointwise nodes a region may chain to their step ops.
var stepOps = map[Op]exec.StepOp{
	OpAdd: exec.StepAdd, OpMul: exec.StepMul, OpSub: exec.StepSub, OpDiv: exec.StepDiv,
	OpMinimum: exec.StepMinimum, OpMaximum: exec.StepMaximum, OpAct: exec.StepAct, OpCast: exec.StepCast,
	OpModulate: exec.StepModulate, OpGatedResidual: exec.StepGatedResidual, OpGLU: exec.StepGLU,
}

// regionEnd returns the last node of the region headed by node i (i when
// node i heads none).
func (r *run) regionEnd(i int) int {
	p := r.it.P
	h := r.it.Hooks
	if op := p.Nodes[i].Op; op != OpLinear && op != OpNorm || h.Run != nil {
		return i
	}
	watched := h.Observe != nil || h.Override != nil
	j := i
	for j-i < exec.MaxRegionSteps && j+1 < len(p.Nodes) {
		cur, next := &p.Nodes[j], &p.Nodes[j+1]
		if _, ok := stepOps[next.Op]; !ok || len(cur.Out) != 1 || len(next.Out) != 1 {
			break
		}
		v := cur.Out[0]
		reads := 0
		for _, in := range next.In {
			if in == v {
				reads++
			}
		}
		if reads != 1 || p.lastUse[v] != j+1 || slices.Contains(p.Outputs, v) || watched && len(p.Values[v].Taps) > 0 {
			break
		}
		// A segment that starts or ends inside would have its taps served
		// or its end reached in the middle of one call.
		inside := false
		for _, s := range p.Segments {
			inside = inside || s.Start == j+1 || s.End == j+1
		}
		if inside {
			break
		}
		j++
	}
	return j
}

// region builds the exec.Region of nodes i..j; ok false if a node's
// inputs do not make one (the nodes then run, and report, one by one).
func (r *run) region(i, j int) (exec.Region, bool) {
	p := r.it.P
	get := func(name string) (exec.Tensor, bool) {
		t, err := r.get(name)
		return t, err == nil
	}
	h := &p.Nodes[i]
	reg := exec.Region{Head: exec.Head{Op: exec.HeadLinear, Norm: h.Attrs.Norm, Spec: h.Spec}}
	if h.Op == OpNorm {
		reg.Head.Op = exec.HeadNorm
	}
	if len(h.In) > 3 {
		return reg, false
	}
	for k, name := range h.In {
		t, ok := get(name)
		if !ok {
			return reg, false
		}
		reg.Head.In[k] = t
	}
	for k := i + 1; k <= j; k++ {
		n := &p.Nodes[k]
		prev := p.Nodes[k-1].Out[0]
		s := exec.Step{Op: stepOps[n.Op], Act: n.Attrs.Act, Modulate: n.Attrs.Modulate, Format: n.Attrs.Format,
			Spec: n.Spec, In: make([]exec.Tensor, len(n.In))}
		for a, name := range n.In {
			if name == prev {
				s.Arg = a
				continue
			}
			t, ok := get(name)
			if !ok {
				return reg, false
			}
			s.In[a] = t
		}
		reg.Steps = append(reg.Steps, s)
	}
	return reg, reg.Check() == nil
}

// fuse offers the region headed by node i to the backend; done reports
// that nodes i..j ran (and their values were made and released).
func (r *run) fuse(i int) (j int, done bool, err error) {
	f, ok := r.it.B.(exec.Fuser)
	if !ok {
		return i, false, nil
	}
	if j = r.regionEnd(i); j == i {
		return i, false, nil
	}
	reg, ok := r.region(i, j)
	if !ok {
		return i, false, nil
	}
	t, ok, err := f.Fuse(reg)
	if err != nil {
		return j, false, err
	}
	if !ok {
		return i, false, nil
	}
	p := r.it.P
	name := p.Nodes[j].Out[0]
	r.vals[name] = t
	r.owned = append(r.owned, t)
	if err := r.made(name); err != nil {
		return j, false, err
	}
	for k := i; k <= j; k++ {
		r.release(k, &p.Nodes[k])
	}
	r.leave(j + 1)
	return j, true, nil
}

// Joins. A concat node whose every input is the one output of a linear or
// norm node that nothing else reads, all in one format, is offered to the
// backend as a join region (exec.HeadJoin), with the rope that alone reads
// the joined value as its step when there is one: joint attention's
// per-head q/k norms, the streams' join and RoPE, or the streams' v
// projections and their join. The parts' nodes do not run where they
// stand but at the concat (their inputs kept alive until then), and the
// rope runs there too; a backend that declines the region with the rope
// is offered the join alone, and one that declines that gets the nodes
// run one by one at the concat, as the program would have run them (the
// same values: the parts read nothing the nodes between change).

// joinPlan is one join region of a program.
type joinPlan struct {
	parts []int // the parts' nodes, in the concat's input order
	rope  int   // the rope node that alone reads the join, or -1
}

// joins finds the program's join regions (by concat node) and the nodes
// they defer; none where the backend does not fuse or a hook watches.
func (r *run) joins() (map[int]*joinPlan, map[int]bool) {
	p := r.it.P
	h := r.it.Hooks
	if _, ok := r.it.B.(exec.Fuser); !ok || h.Run != nil || h.Observe != nil || h.Override != nil {
		return nil, nil
	}
	var inv map[int]bool
	if r.it.Memo != nil {
		inv = invariantNodes(p)
	}
	producer := map[string]int{}
	readers := map[string]int{}
	for i := range p.Nodes {
		for _, v := range p.Nodes[i].Out {
			producer[v] = i
		}
		for _, v := range p.Nodes[i].In {
			if v != "" {
				readers[v]++
			}
		}
	}
	sole := func(v string, at int) bool {
		return p.Values[v].Kind == Temp && readers[v] == 1 && p.lastUse[v] == at && !slices.Contains(p.Outputs, v)
	}
	plans := map[int]*joinPlan{}
	deferred := map[int]bool{}
	for c := range p.Nodes {
		n := &p.Nodes[c]
		if n.Op != OpConcat || len(n.In) < 2 || len(n.Out) != 1 || inv[c] {
			continue
		}
		jp := &joinPlan{rope: -1}
		var spec exec.Spec
		for k, v := range n.In {
			i, ok := producer[v]
			if !ok || !sole(v, c) || inv[i] {
				jp = nil
				break
			}
			m := &p.Nodes[i]
			if m.Op != OpLinear && m.Op != OpNorm || len(m.Out) != 1 || len(m.In) > 3 || k > 0 && m.Spec.Out != spec.Out {
				jp = nil
				break
			}
			spec = m.Spec
			jp.parts = append(jp.parts, i)
		}
		if jp == nil {
			continue
		}
		out := n.Out[0]
		if ro, ok := r.reader(out); ok && sole(out, ro) && !inv[ro] && p.Nodes[ro].Op == OpRope && p.Nodes[ro].In[0] == out &&
			len(p.Nodes[ro].Out) == 1 && !slices.Contains(p.Nodes[ro].In[1:], out) {
			jp.rope = ro
		}
		plans[c] = jp
		for _, i := range jp.parts {
			deferred[i] = true
		}
	}
	// A deferred node runs at its concat: a temp it reads must not be
	// freed before then, so the node that frees it (its last reader) must
	// run no earlier than every reader; where not, that temp's deferred
	// readers' joins are dropped, until none is left to drop.
	for changed := true; changed; {
		changed = false
		at := map[int]int{} // a deferred node's time: its concat
		for c, jp := range plans {
			for _, i := range jp.parts {
				at[i] = c
			}
		}
		when := func(i int) int {
			if c, ok := at[i]; ok {
				return c
			}
			return i
		}
		latest := map[string]int{}
		for i := range p.Nodes {
			for _, v := range p.Nodes[i].In {
				if v != "" && p.Values[v].Kind == Temp {
					latest[v] = max(latest[v], when(i))
				}
			}
		}
		for c, jp := range plans {
			for _, i := range jp.parts {
				for _, v := range p.Nodes[i].In {
					if v != "" && p.Values[v].Kind == Temp && when(p.lastUse[v]) < latest[v] {
						delete(plans, c)
						changed = true
					}
				}
			}
		}
		if changed {
			deferred = map[int]bool{}
			for _, jp := range plans {
				for _, i := range jp.parts {
					deferred[i] = true
				}
			}
		}
	}
	return plans, deferred
}

// reader is the one node that reads v, if one does.
func (r *run) reader(v string) (int, bool) {
	i, ok := r.it.P.lastUse[v]
	return i, ok
}

// join runs the join region at concat node c: offered with its rope,
// then alone, else run node by node; the parts' nodes (and the rope, when
// it ran) are released as they would have been.
func (r *run) join(c int, jp *joinPlan) error {
	p := r.it.P
	n := &p.Nodes[c]
	head := exec.Head{Op: exec.HeadJoin, Axis: n.Attrs.Axis}
	for _, i := range jp.parts {
		m := &p.Nodes[i]
		h := exec.Head{Op: exec.HeadLinear, Norm: m.Attrs.Norm, Spec: m.Spec}
		if m.Op == OpNorm {
			h.Op = exec.HeadNorm
		}
		for k, name := range m.In {
			t, err := r.get(name)
			if err != nil {
				return err
			}
			h.In[k] = t
		}
		head.Parts = append(head.Parts, h)
	}
	f := r.it.B.(exec.Fuser)
	done := func(name string, t exec.Tensor) error {
		r.vals[name] = t
		r.owned = append(r.owned, t)
		if err := r.made(name); err != nil {
			return err
		}
		for _, i := range jp.parts {
			r.release(i, &p.Nodes[i])
		}
		r.release(c, n)
		return nil
	}
	if jp.rope >= 0 {
		ro := &p.Nodes[jp.rope]
		s := exec.Step{Op: exec.StepRope, In: []exec.Tensor{nil, nil, nil}, Rope: ro.Attrs.Rope, Spec: ro.Spec}
		ok := true
		for k, name := range ro.In[1:] {
			t, err := r.get(name)
			if err != nil {
				ok = false // not made yet: the rope runs where it stands
				break
			}
			s.In[k+1] = t
		}
		if ok {
			reg := exec.Region{Head: head, Steps: []exec.Step{s}}
			if reg.Check() == nil {
				t, fused, err := f.Fuse(reg)
				if err != nil {
					return err
				}
				if fused {
					if err := done(ro.Out[0], t); err != nil {
						return err
					}
					r.ropeRan[jp.rope] = true // released where it stands
					return nil
				}
			}
		}
	}
	reg := exec.Region{Head: head}
	t, fused, err := f.Fuse(reg)
	if err != nil {
		return err
	}
	if !fused {
		if t, err = exec.RunUnfused(r.it.B, reg); err != nil {
			return err
		}
	}
	return done(n.Out[0], t)
}
