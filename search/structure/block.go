package structure

import (
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// blockFacts is what one block's analysis found, kept as evidence for the
// factor search (search/factors) that follows.
type blockFacts struct {
	addr    string
	n       *node
	kind    string
	sets    []*wset
	attn    attnResult
	mods    map[string]linearInfo // stream (or "") → modulation linear
	modAct  exec.ActKind
	mlpAct  exec.ActKind
	glu     bool
	outCol  int // first column of the attention in a parallel block's out argument
	mlpErr  float64
	normErr float64
}

// mlpFound is one weight set's MLP.
type mlpFound struct {
	in, gate, out linearInfo
	glu           bool
	act           exec.ActKind
	err           float64
}

// analyseBlock reads block i's kind, widths and roles.
func (d *discoverer) analyseBlock(i int, b *node) {
	addr := semantics.BlockAddress(i)
	blk := semantics.Block{Roles: map[string]semantics.Role{}, Boundary: d.blockBoundary(b)}
	for _, s := range d.st.Streams {
		blk.Streams = append(blk.Streams, s.Name)
	}
	f := &blockFacts{addr: addr, n: b, mods: map[string]linearInfo{}}
	d.facts = append(d.facts, f)
	// The block is listed even when its analysis stops short: its index
	// is its address, and what is missing is in undetermined.
	defer func() { d.st.Blocks = append(d.st.Blocks, blk) }()
	fail := func(format string, args ...any) {
		d.undetermined("structure.blocks", addr, format, args...)
	}
	// Weight sets: the projections of one set of rows.
	for _, g := range d.attnGroups(b) {
		ws := &wset{group: sortedLinears(g), in: g[0].in, rows: tokensOf(g[0].in), norms: map[*node]*node{}}
		ws.stream = d.streamOf(ws.in)
		if ws.stream == "" {
			fail("a weight set reads %d rows, which are no stream's", ws.rows)
			return
		}
		f.sets = append(f.sets, ws)
	}
	if len(f.sets) == 0 || len(f.sets) > 2 {
		fail("%d weight sets of q/k/v projections; one or two are supported", len(f.sets))
		return
	}
	assigned := map[*node]bool{}
	var mods []linearInfo
	for _, n := range b.subtree() {
		if li, ok := d.linears[n]; ok && d.isModulation(li) {
			mods = append(mods, li)
			assigned[n] = true
		}
	}
	// Per-head norms: a shape-preserving call whose argument is a
	// projection's result, rearranged into heads.
	headNorms := map[*node]bool{}
	for _, ws := range f.sets {
		for _, li := range ws.group {
			for _, n := range b.subtree() {
				in, out, ok := n.shapePreserving()
				if !ok || len(n.children) > 0 || in.width() >= li.outW || li.outW%in.width() != 0 {
					continue
				}
				if d.v.same(in, li.out) || d.v.rearranged(in, li.out) {
					if len(n.params) == 0 && !normalizedRows(d.v.floats(out.key), in.width()) {
						continue
					}
					ws.norms[li.n] = n
					headNorms[n] = true
					break
				}
			}
		}
	}
	res, err := d.scoreAttention(b, f.sets)
	if err != nil {
		fail("%v", err)
		return
	}
	f.attn = res
	if res.err > tolAttn {
		fail("no q/k/v assignment reproduces a captured attention output (best rel-RMS %.3g)", res.err)
		return
	}
	if res.runnerUp < tolMargin*res.err {
		fail("the q/k/v assignment is not decisive: rel-RMS %.3g against %.3g for another", res.err, res.runnerUp)
	}
	for si, ws := range f.sets {
		t := res.cfg.sets[si]
		ws.q, ws.k, ws.v = t.q, t.k, t.v
		for _, li := range []linearInfo{t.q, t.k, t.v} {
			assigned[li.n] = true
		}
	}
	blk.HeadDim, blk.Heads, blk.KVHeads = res.cfg.d, res.heads, res.kvh
	// Out projections.
	outs := make([]linearInfo, len(f.sets))
	for si := range f.sets {
		o, col, e := d.outProjection(b, f.sets, si, res, assigned)
		if o.n == nil || e > tolAttn {
			fail("no linear reads weight set %d's attention output (best rel-RMS %.3g)", si, e)
			return
		}
		outs[si], f.outCol = o, col
		assigned[o.n] = true
	}
	// Kind: the recipe whose shape is what the block shows.
	parallel := len(f.sets) == 1 && len(f.sets[0].group) > 3 && outs[0].inW > res.cfg.sets[0].q.outW
	rc := recognise(len(f.sets), len(mods) > 0, parallel)
	if rc == nil {
		fail("no recipe has %d weight sets, modulation %v and a fused out projection %v", len(f.sets), len(mods) > 0, parallel)
		return
	}
	blk.Kind = rc.Kind
	f.kind = blk.Kind
	// MLPs.
	mlps := make([]mlpFound, len(f.sets))
	for si, ws := range f.sets {
		var m mlpFound
		var ok bool
		if parallel {
			m, ok = d.parallelMLP(ws, outs[0], f.outCol, res.cfg.sets[0].q.outW, assigned)
		} else {
			m, ok = d.sequentialMLP(b, ws, assigned)
		}
		if !ok {
			fail("no MLP found for the %s rows (no linear reads act(another's result))", ws.stream)
			return
		}
		mlps[si] = m
		f.mlpAct, f.glu, f.mlpErr = m.act, m.glu, math.Max(f.mlpErr, m.err)
		for _, li := range []linearInfo{m.in, m.gate, m.out} {
			if li.n != nil {
				assigned[li.n] = true
			}
		}
	}
	blk.MLPWidth = mlps[0].in.outW
	// Norms before the attention and the MLP.
	norms := d.blockNorms(b, headNorms)
	prefix := func(ws *wset) string { return rc.RolePrefix(ws.stream) }
	// The norms the recipe feeds into the attention and the MLP (one norm
	// feeding both is named once).
	attnNorm, mlpNorm := rc.FeedingNorm("q"), rc.FeedingNorm("mlp_in")
	if mlpNorm == attnNorm {
		mlpNorm = ""
	}
	shifts := map[*wset][]float64{}
	for si, ws := range f.sets {
		p := prefix(ws)
		blk.Roles[p+"q"] = d.linearRole(ws.q)
		blk.Roles[p+"k"] = d.linearRole(ws.k)
		blk.Roles[p+"v"] = d.linearRole(ws.v)
		if n := ws.norms[ws.q.n]; n != nil {
			blk.Roles[p+"q_norm"] = d.normRole(n)
		}
		if n := ws.norms[ws.k.n]; n != nil {
			blk.Roles[p+"k_norm"] = d.normRole(n)
		}
		blk.Roles[p+"out"] = d.linearRole(outs[si])
		if rc.HasRole("mlp_out") {
			blk.Roles[p+"mlp_out"] = d.linearRole(mlps[si].out)
		}
		blk.Roles[p+"mlp_in"] = d.linearRole(mlps[si].in)
		if mlps[si].gate.n != nil {
			blk.Roles[p+"mlp_gate"] = d.linearRole(mlps[si].gate)
		}
		if n, shift, e := d.feedingNorm(norms, ws.in); n != nil {
			blk.Roles[p+attnNorm] = d.normRole(n)
			shifts[ws] = shift
			f.normErr = math.Max(f.normErr, e)
		} else if rc.Required(attnNorm) {
			fail("no norm feeds the attention of the %s rows", ws.stream)
		}
		if mlpNorm != "" {
			if n, _, e := d.feedingNorm(norms, mlps[si].in.in); n != nil {
				blk.Roles[p+mlpNorm] = d.normRole(n)
				f.normErr = math.Max(f.normErr, e)
			} else if rc.Required(mlpNorm) {
				fail("no norm feeds the MLP of the %s rows", ws.stream)
			}
		}
	}
	// Modulation: one linear per weight set, matched by the shift it
	// applies after the norm.
	if rc.HasRole("modulation") {
		want := rc.Chunks("modulation")
		assign, ok := d.assignModulation(f.sets, mods, shifts)
		if !ok {
			fail("cannot tell which of %d modulation linears serves which weight set", len(mods))
			return
		}
		for si, ws := range f.sets {
			m := assign[si]
			f.mods[ws.stream] = m
			f.modAct, _ = d.condAct(m)
			blk.Roles[prefix(ws)+"modulation"] = d.linearRole(m)
			if k := m.outW / d.st.Hidden; k != want {
				fail("the %s modulation makes %d chunks; a %s block uses %d", ws.stream, k, blk.Kind, want)
			}
		}
	}
}

// recognise is the recipe a block of sets weight sets, with or without
// modulation and a fused out projection, reads as: the recipes are
// narrowed by each fact in turn (weight sets per stream or joined, a
// modulation role, an out projection that reads a concat) until one is
// left; nil when none is.
func recognise(sets int, modulated, fused bool) *semantics.Recipe {
	cands := semantics.Recipes()
	for _, keep := range []func(*semantics.Recipe) bool{
		func(r *semantics.Recipe) bool { return (r.Sets == semantics.SetsStreams) == (sets > 1) },
		func(r *semantics.Recipe) bool { return r.HasRole("modulation") == modulated },
		func(r *semantics.Recipe) bool { return r.FusedOut("out") == fused },
	} {
		if len(cands) == 1 {
			break
		}
		var next []*semantics.Recipe
		for _, r := range cands {
			if keep(r) {
				next = append(next, r)
			}
		}
		cands = next
	}
	if len(cands) != 1 {
		return nil
	}
	return cands[0]
}

// blockNorms lists the block's norms over the hidden width (per-head
// norms aside): leaf calls that preserve shape, with 1-D parameters or,
// without, with normalised rows.
func (d *discoverer) blockNorms(b *node, headNorms map[*node]bool) []*node {
	var out []*node
	for _, n := range b.subtree() {
		in, o, ok := n.shapePreserving()
		if !ok || len(n.children) > 0 || headNorms[n] || in.width() != d.st.Hidden {
			continue
		}
		if len(n.params) == 0 && !normalizedRows(d.v.floats(o.key), o.width()) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// feedingNorm is the norm whose result becomes x directly or through a
// per-channel affine map (a modulation), with the map's intercept (the
// shift) and the fit's error.
func (d *discoverer) feedingNorm(norms []*node, x port) (*node, []float64, float64) {
	var best *node
	var shift []float64
	bestErr := math.Inf(1)
	y := d.v.floats(x.key)
	for _, n := range norms {
		_, o, _ := n.shapePreserving()
		if o.numel() != x.numel() {
			continue
		}
		if d.v.same(o, x) {
			return n, make([]float64, x.width()), 0
		}
		_, b, e := affineFit(d.v.floats(o.key), y, x.width())
		if e < bestErr {
			best, shift, bestErr = n, b, e
		}
	}
	if bestErr > tolFunc {
		return nil, nil, bestErr
	}
	return best, shift, bestErr
}

// assignModulation matches modulation linears to weight sets: the shift
// a weight set's rows receive after their norm is one chunk of its
// modulation's result (correlation near 1; another's is near 0).
func (d *discoverer) assignModulation(sets []*wset, mods []linearInfo, shifts map[*wset][]float64) ([]linearInfo, bool) {
	if len(mods) != len(sets) {
		return nil, false
	}
	if len(sets) == 1 {
		return mods, true
	}
	score := func(ws *wset, m linearInfo) float64 {
		sh := shifts[ws]
		y := d.v.floats(m.out.key)
		h := d.st.Hidden
		if sh == nil || y == nil || len(sh) != h {
			return 0
		}
		best := 0.0
		for c := 0; c+h <= len(y) && c+h <= m.outW; c += h {
			best = math.Max(best, corr(sh, f64(y[c:c+h])))
		}
		return best
	}
	straight := score(sets[0], mods[0]) + score(sets[1], mods[1])
	crossed := score(sets[0], mods[1]) + score(sets[1], mods[0])
	switch {
	case straight > crossed+0.5:
		return mods, true
	case crossed > straight+0.5:
		return []linearInfo{mods[1], mods[0]}, true
	}
	return nil, false
}

func corr(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

// sequentialMLP: a linear whose argument is act(another linear's result)
// (or act(gate)·in of two projections of one argument) on the weight
// set's rows.
func (d *discoverer) sequentialMLP(b *node, ws *wset, assigned map[*node]bool) (mlpFound, bool) {
	var cands []linearInfo
	for _, n := range b.subtree() {
		if li, ok := d.linears[n]; ok && !assigned[n] && tokensOf(li.in) == ws.rows {
			cands = append(cands, li)
		}
	}
	best := mlpFound{err: math.Inf(1)}
	for _, x := range cands {
		if x.outW != d.st.Hidden {
			continue
		}
		y := d.v.floats(x.in.key)
		f := x.in.dt.Format()
		for _, g := range cands {
			if g.n == x.n || g.outW != x.inW || g.inW != d.st.Hidden {
				continue
			}
			if a, e := actOf(d.v.floats(g.out.key), y, f); e < best.err {
				best = mlpFound{in: g, out: x, act: a, err: e}
			}
			for _, u := range cands {
				if u.n == g.n || u.n == x.n || u.outW != g.outW || !d.v.same(u.in, g.in) {
					continue
				}
				if a, e := gluOf(d.v.floats(g.out.key), d.v.floats(u.out.key), y, f); e < best.err {
					best = mlpFound{in: u, gate: g, out: x, act: a, glu: true, err: e}
				}
			}
		}
	}
	return best, best.err <= tolFunc
}

// parallelMLP: the weight set's projections other than q, k, v, whose
// act(result) fills the out linear's argument beside the attention.
func (d *discoverer) parallelMLP(ws *wset, out linearInfo, attnCol, qw int, assigned map[*node]bool) (mlpFound, bool) {
	var rest []linearInfo
	for _, li := range ws.group {
		if !assigned[li.n] {
			rest = append(rest, li)
		}
	}
	m := out.inW - qw
	col := qw
	if attnCol != 0 {
		col = 0
	}
	x := d.v.floats(out.in.key)
	if x == nil || m <= 0 {
		return mlpFound{}, false
	}
	rows := len(x) / out.inW
	y := make([]float32, rows*m)
	for r := range rows {
		copy(y[r*m:(r+1)*m], x[r*out.inW+col:r*out.inW+col+m])
	}
	f := out.in.dt.Format()
	best := mlpFound{err: math.Inf(1)}
	for _, g := range rest {
		if g.outW != m {
			continue
		}
		if a, e := actOf(d.v.floats(g.out.key), y, f); e < best.err {
			best = mlpFound{in: g, out: out, act: a, err: e}
		}
		for _, u := range rest {
			if u.n != g.n && u.outW == m {
				if a, e := gluOf(d.v.floats(g.out.key), d.v.floats(u.out.key), y, f); e < best.err {
					best = mlpFound{in: u, gate: g, out: out, act: a, glu: true, err: e}
				}
			}
		}
	}
	return best, best.err <= tolFunc
}

// blockBoundary: the block's arguments and results by stream (or joint),
// and the conditioning vector.
func (d *discoverer) blockBoundary(b *node) *semantics.Boundary {
	bd := &semantics.Boundary{Module: b.c.Module, Inputs: map[string]string{}, Outputs: map[string]string{}}
	for _, p := range b.ins {
		if d.cond != nil && d.v.same(p, *d.cond) {
			if _, ok := bd.Inputs[condRole]; !ok {
				bd.Inputs[condRole] = p.name
			}
			continue
		}
		if p.float() && p.width() == d.st.Hidden {
			if s := d.streamOf(p); s != "" {
				if _, ok := bd.Inputs[s]; !ok {
					bd.Inputs[s] = p.name
				}
			}
		}
	}
	for _, p := range b.outs {
		if p.float() && p.width() == d.st.Hidden {
			if s := d.streamOf(p); s != "" {
				if _, ok := bd.Outputs[s]; !ok {
					bd.Outputs[s] = p.name
				}
			}
		}
	}
	if len(bd.Inputs) == 0 {
		bd.Inputs = nil
	}
	if len(bd.Outputs) == 0 {
		bd.Outputs = nil
	}
	return bd
}

// checkSignatures reports blocks of one parameter-shape signature that
// were read as different kinds.
func (d *discoverer) checkSignatures() {
	kinds := map[string]string{}
	for i, blk := range d.st.Blocks {
		if i >= len(d.sigs) {
			break
		}
		if k, ok := kinds[d.sigs[i]]; ok && k != blk.Kind {
			d.undetermined("structure.blocks", semantics.BlockAddress(i), "block %d has the parameter shapes of a %s block but reads as %s", i, k, blk.Kind)
		}
		kinds[d.sigs[i]] = blk.Kind
	}
}
