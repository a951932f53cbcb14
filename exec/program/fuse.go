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
