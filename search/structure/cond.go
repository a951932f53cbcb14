package structure

import (
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// vector reports whether p is one row per sample of width w.
func vector(p port, w int) bool {
	return p.float() && p.width() == w && (len(p.shape) <= 2 || tokensOf(p) == 1)
}

// modulationCandidates are a node's linears that read one vector per
// sample of the hidden width and return k ≥ 2 such vectors.
func (d *discoverer) modulationCandidates(within *node) []linearInfo {
	var out []linearInfo
	h := d.st.Hidden
	for _, n := range within.subtree() {
		li, ok := d.linears[n]
		if ok && vector(li.in, h) && li.outW%h == 0 && li.outW >= 2*h {
			out = append(out, li)
		}
	}
	return out
}

// findCond finds the conditioning vector the blocks are modulated by: a
// vector of the hidden width, an argument of the first block, such that
// every modulation linear's argument is act(vector) for one activation.
func (d *discoverer) findCond() {
	if len(d.blocks) == 0 {
		return
	}
	mods := d.modulationCandidates(d.blocks[0])
	if len(mods) == 0 {
		return
	}
	var cands []port
	for _, p := range d.blocks[0].ins {
		if vector(p, d.st.Hidden) {
			cands = append(cands, p)
		}
	}
	for _, n := range d.g.nodes {
		if d.outside(n) {
			for _, p := range n.outs {
				if vector(p, d.st.Hidden) {
					cands = append(cands, p)
				}
			}
		}
	}
	for _, c := range cands {
		x := d.v.floats(c.key)
		ok := x != nil
		for _, m := range mods {
			if !ok {
				break
			}
			y := d.v.floats(m.in.key)
			if _, err := actOf(x, y, m.in.dt.Format()); err > tolFunc {
				ok = false
			}
		}
		if ok {
			c := c
			d.cond = &c
			return
		}
	}
	d.undetermined("structure.conditioning", "model", "the blocks have modulation linears, but no vector the first block reads is, through one activation, what they read")
}

// condAct is the activation between the conditioning vector and a
// modulation linear that reads it.
func (d *discoverer) condAct(li linearInfo) (exec.ActKind, float64) {
	if d.cond == nil || !vector(li.in, d.st.Hidden) {
		return 0, math.Inf(1)
	}
	return actOf(d.v.floats(d.cond.key), d.v.floats(li.in.key), li.in.dt.Format())
}

// isModulation reports whether li reads act(cond) and returns k·hidden.
func (d *discoverer) isModulation(li linearInfo) bool {
	if d.cond == nil || li.outW%d.st.Hidden != 0 || li.outW < 2*d.st.Hidden {
		return false
	}
	_, err := d.condAct(li)
	return err <= tolFunc
}

// findConditioning finds what makes the conditioning vector outside the
// blocks: the linear (time_out) whose result is the vector, or two whose
// results sum to it (time_out + pooled_out); each one's input linear
// through an activation (time_in, pooled_in); the sinusoid that feeds
// time_in; and the call that holds them all as the boundary.
func (d *discoverer) findConditioning() {
	if d.cond == nil {
		return
	}
	cond := *d.cond
	h := d.st.Hidden
	var outs []linearInfo
	for _, n := range d.g.nodes {
		if li, ok := d.linears[n]; ok && d.outside(n) && vector(li.out, h) {
			outs = append(outs, li)
		}
	}
	var lasts []linearInfo
	for _, o := range outs {
		if d.v.same(o.out, cond) || d.v.close(o.out, cond) < tolSame {
			lasts = []linearInfo{o}
			break
		}
	}
	if lasts == nil {
		c := d.v.floats(cond.key)
		best := math.Inf(1)
		for i, a := range outs {
			for _, b := range outs[i+1:] {
				x, y := d.v.floats(a.out.key), d.v.floats(b.out.key)
				if len(x) != len(c) || len(y) != len(c) {
					continue
				}
				sum := make([]float64, len(c))
				for j := range sum {
					sum[j] = float64(x[j]) + float64(y[j])
				}
				if e := relErr(sum, c, cond.dt.Format()); e < best && e < tolFunc {
					best, lasts = e, []linearInfo{a, b}
				}
			}
		}
	}
	if lasts == nil {
		d.undetermined("structure.conditioning", "conditioning", "no linear outside the blocks, nor a sum of two, makes the conditioning vector")
		return
	}
	c := &semantics.Conditioning{Roles: map[string]semantics.Role{}}
	var members []*node
	var sinusoid *node
	for _, last := range lasts {
		first, ok := d.feeder(last)
		if !ok {
			d.undetermined("structure.conditioning", "conditioning", "no linear feeds %s through an activation", last.n.c.Module)
			return
		}
		members = append(members, first.n, last.n)
		if pp, ok := d.modelPortFor(first.in); ok && (len(lasts) == 2) && d.sinusoidOf(first) == nil {
			name, _ := d.requestInput(pp)
			c.Roles["pooled_in"] = d.linearRole(first)
			c.Roles["pooled_out"] = d.linearRole(last)
			d.st.Model.Inputs["pooled"] = pp.name
			d.addInput("pooled", name)
			continue
		}
		if _, taken := c.Roles["time_in"]; taken {
			d.undetermined("structure.conditioning", "conditioning", "two timestep-like paths make the conditioning vector; neither reads a pooled request input")
			return
		}
		c.Roles["time_in"] = d.linearRole(first)
		c.Roles["time_out"] = d.linearRole(last)
		c.TimestepDim = first.inW
		if s := d.sinusoidOf(first); s != nil {
			sinusoid = s
			c.Roles["sinusoid"] = semantics.Role{Module: s.c.Module}
		} else {
			d.undetermined("structure.conditioning", "conditioning.time_in", "no captured call makes time_in's argument as a sinusoid")
		}
	}
	if _, ok := c.Roles["time_in"]; !ok {
		d.undetermined("structure.conditioning", "conditioning", "no path to the conditioning vector starts at a sinusoid")
		return
	}
	d.st.Conditioning = c
	// Boundary: the highest call below the model that holds every
	// conditioning linear and returns the vector.
	a := lca(members...)
	var bd *node
	for m := a; m != nil && m != d.g.root; m = m.parent {
		if o, ok := m.out(); ok && d.v.same(o, cond) {
			bd = m
		}
	}
	if bd == nil {
		return
	}
	b := &semantics.Boundary{Module: bd.c.Module, Inputs: map[string]string{}, Outputs: map[string]string{}}
	for _, o := range bd.outs {
		if d.v.same(o, cond) {
			b.Outputs[condRole] = o.name
			break
		}
	}
	if sinusoid != nil && sinusoid.within(bd) {
		if sin, ok := sinusoid.in(); ok {
			for _, p := range bd.ins {
				if d.v.same(p, sin) {
					b.Inputs["timestep"] = p.name
					break
				}
			}
		}
	}
	if port, ok := d.st.Model.Inputs["pooled"]; ok {
		mp, _ := portNamed(d.g.root.ins, port)
		for _, p := range bd.ins {
			if d.v.same(p, mp) {
				b.Inputs["pooled"] = p.name
				break
			}
		}
	}
	if len(b.Inputs) == 0 {
		b.Inputs = nil
	}
	c.Boundary = b
}

// feeder is the linear outside the blocks whose result, through an
// activation, is last's argument.
func (d *discoverer) feeder(last linearInfo) (linearInfo, bool) {
	y := d.v.floats(last.in.key)
	best, bestErr := linearInfo{}, math.Inf(1)
	for _, n := range d.g.nodes {
		li, ok := d.linears[n]
		if !ok || n == last.n || !d.outside(n) || li.out.numel() != last.in.numel() {
			continue
		}
		if _, err := actOf(d.v.floats(li.out.key), y, last.in.dt.Format()); err < bestErr {
			best, bestErr = li, err
		}
	}
	return best, bestErr <= tolFunc
}

// modelPortFor is the model call's argument holding p's values.
func (d *discoverer) modelPortFor(p port) (port, bool) {
	for _, q := range d.g.root.ins {
		if d.v.same(p, q) {
			return q, true
		}
	}
	return port{}, false
}

// sinusoidOf is the parameter-free call whose result is li's argument (up
// to a cast) and is a sinusoid embedding.
func (d *discoverer) sinusoidOf(li linearInfo) *node {
	for _, n := range d.g.nodes {
		if n.subParams() > 0 || !d.outside(n) {
			continue
		}
		o, ok := n.out()
		if !ok || o.numel() != li.in.numel() {
			continue
		}
		if !(d.v.same(o, li.in) || d.v.close(o, li.in) < tolSame) {
			continue
		}
		if sinusoidal(d.v.floats(o.key), o.width()) {
			return n
		}
	}
	return nil
}
