package readoff

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zflow/zflow/search/internal/simple"
	"github.com/zflow/zflow/semantics"
)

// Missing reads off the program the catalogue factors whose names no
// factor in have carries, one per name and scope, in program order.
func Missing(pg *semantics.Program, have []semantics.Factor) []semantics.Factor {
	if pg == nil {
		return nil
	}
	g := newGraph(pg)
	return Absent(slices.Concat(g.timesteps(), g.modulation(), g.mlps(), g.attentions(), g.ropeTables(), g.joins()), have)
}

// Absent keeps the factors of fs whose names no factor in have carries,
// one per name and scope, with values the catalogue allows.
func Absent(fs, have []semantics.Factor) []semantics.Factor {
	named := map[string]bool{}
	for _, f := range have {
		named[f.Name] = true
	}
	var out []semantics.Factor
	seen := map[string]bool{}
	for _, f := range fs {
		k := f.Name + "@" + f.Scope
		if named[f.Name] || seen[k] || f.Scope == "" {
			continue
		}
		if spec, ok := semantics.LookupSpec(f.Name); !ok || spec.CheckValue(f.Value) != nil {
			continue // a value the catalogue has no name for stays unnamed
		}
		seen[k] = true
		out = append(out, f)
	}
	return out
}

// Declared is a factor read off a program or its values with no
// alternative scored: margin 0, never decisive.
func Declared(name, scope string, v any, note string) semantics.Factor {
	return semantics.Factor{Name: name, Scope: scope, Value: v, Candidates: []semantics.Candidate{{Value: v}},
		Evidence: semantics.Evidence{Metric: "declared", Note: note}}
}

func declared(name, scope string, v any, note string) semantics.Factor {
	return Declared(name, scope, v, "read off the program (no alternative scored): "+note)
}

// snap is x at 6 significant digits (1000, not 999.99994).
func snap(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
	return v
}

// timesteps reads each sinusoidal timestep embedding: its layout, its
// frequency shift, what σ is multiplied by (constants multiplied in
// before it, times its own scale) and the activation between the two
// linears after it.
func (g *graph) timesteps() []semantics.Factor {
	var out []semantics.Factor
	for i := range g.pg.Nodes {
		n := &g.pg.Nodes[i]
		t := n.Attrs.Timestep
		if n.Op != "timestep_embed" || t == nil || len(n.In) == 0 {
			continue
		}
		mult := g.multipliedBy(n.In[0])
		sc := scope(n)
		out = append(out,
			declared("timestep_flip_sin_to_cos", sc, t.FlipSinToCos, "the sinusoid's attributes"),
			declared("timestep_freq_shift", sc, t.FreqShift, "the sinusoid's attributes"))
		if scale := snap(t.Scale * mult); scale > 0 {
			out = append(out, declared("timestep_scale", sc, scale, "the sinusoid's scale times the constants its input is multiplied by"))
			if scale != 1 {
				at := "sinusoid"
				if mult != 1 {
					at = "input"
				}
				out = append(out, declared("timestep_scale_at", sc, at, "where the multiply is"))
			}
		}
		if t.MaxPeriod > 0 && t.MaxPeriod != 10000 {
			out = append(out, declared("timestep_max_period", sc, t.MaxPeriod, "the sinusoid's attributes"))
		}
		if act := g.actBetweenLinears(n.Out[0]); act != "" {
			out = append(out, declared("embed_act", sc, act, "the activation between the two linears after the sinusoid"))
		}
	}
	return out
}

// multipliedBy is the product of the constants a value was multiplied
// (or divided) by inside the model, through layout ops and additions of
// constants, back to the model's own argument (what the driver made of
// σ before the call is the pipeline's, not the model's).
func (g *graph) multipliedBy(name string) float64 {
	mult := 1.0
	for range len(g.pg.Nodes) {
		if g.modelArgument(name) {
			break
		}
		p := g.prod[name]
		if p == nil || len(p.In) == 0 {
			break
		}
		switch {
		case layoutOps[p.Op]:
			name = p.In[0]
			continue
		case len(p.In) == 2 && (p.Op == "mul" || p.Op == "add" || p.Op == "sub" || p.Op == "div"):
			k := -1
			for j, in := range p.In {
				if c, ok := g.scalar(in); ok {
					k = j
					if p.Op == "mul" {
						mult *= c
					} else if p.Op == "div" && j == 1 && c != 0 {
						mult /= c
					}
				}
			}
			if k >= 0 {
				name = p.In[1-k]
				continue
			}
		}
		break
	}
	return mult
}

// actBetweenLinears is the activation a linear reading the value feeds
// into another linear ("" where there is none).
func (g *graph) actBetweenLinears(name string) string {
	for _, l := range g.readers(name) {
		if l.Op != "linear" {
			continue
		}
		for _, a := range g.readers(l.Out[0]) {
			if a.Op != "act" {
				continue
			}
			for _, l2 := range g.readers(a.Out[0]) {
				if l2.Op == "linear" {
					return a.Attrs.Act
				}
			}
		}
	}
	return ""
}

// chunk is a slice of a value: the value (named by what made it) and
// which equal part of it.
type chunk struct {
	src string
	idx int
	at  *semantics.ProgramNode // the slice
}

// chunkOf follows a modulation operand back through layout ops to the
// slice that cut it.
func (g *graph) chunkOf(name string) (chunk, bool) {
	for range len(g.pg.Nodes) {
		p := g.prod[name]
		switch {
		case p == nil || len(p.In) == 0:
			return chunk{}, false
		case layoutOps[p.Op]:
			name = p.In[0]
		case p.Op == "slice" && g.whole(p):
			name = p.In[0] // the whole of an axis (of one row): no cut
		case p.Op == "slice":
			w := p.Attrs.End - p.Attrs.Start
			if w <= 0 || p.Attrs.Start%w != 0 {
				return chunk{}, false
			}
			return chunk{src: g.key(p.In[0]), idx: p.Attrs.Start / w, at: p}, true
		default:
			return chunk{}, false
		}
	}
	return chunk{}, false
}

// key names what a value holds: through layout ops, and a sum by its
// terms (a table plus a projection rebuilt at each use is one source).
func (g *graph) key(name string) string {
	p := g.prod[name]
	switch {
	case p == nil || len(p.In) == 0:
		return name
	case layoutOps[p.Op]:
		return g.key(p.In[0])
	case p.Op == "add":
		var ks []string
		for _, in := range p.In {
			ks = append(ks, g.key(in))
		}
		slices.Sort(ks)
		return "(" + strings.Join(ks, "+") + ")"
	}
	return name
}

// modulation reads each modulate node's plus-one form, each gated
// residual's gate function, the chunk order of shift, scale and gate per
// source (the final norm's where no gate follows) and the activation the
// modulation's linear reads.
func (g *graph) modulation() []semantics.Factor {
	var out []semantics.Factor
	type group struct{ shift, scale int }
	type source struct {
		mods  []group
		gates []int
		scope string
	}
	bySrc := map[string]*source{}
	var order []string
	var last *source // the last modulation's: the final norm's, where it has no gate
	at := func(c chunk, sc string) *source {
		s := bySrc[c.src]
		if s == nil {
			s = &source{scope: sc}
			bySrc[c.src] = s
			order = append(order, c.src)
		}
		return s
	}
	for i := range g.pg.Nodes {
		n := &g.pg.Nodes[i]
		switch {
		case n.Op == "modulate" && len(n.In) == 3:
			sc := scope(n)
			c, ok := g.chunkOf(n.In[2])
			if ok && !n.Attrs.PlusOne && n.In[1] != "" {
				if c2, ok2 := g.chunkOf(n.In[1]); !ok2 || c2.src != c.src {
					// y·chunk + x, x no chunk of the same source: a
					// gated residual written as a modulate
					out = append(out, declared("gate_fn", sc, "identity", "a residual added to a value times a chunk"))
					s := at(c, sc)
					s.gates = append(s.gates, c.idx)
					continue
				}
			}
			out = append(out, declared("modulation_plus_one", sc, n.Attrs.PlusOne, "the modulate node's form"))
			if !ok {
				continue
			}
			if act := g.linearAct(c.at.In[0]); act != "" {
				out = append(out, declared("modulation_act", sc, act, "what the modulation's linear reads"))
			}
			gr := group{shift: -1, scale: c.idx}
			if n.In[1] != "" {
				if c2, ok := g.chunkOf(n.In[1]); ok && c2.src == c.src {
					gr.shift = c2.idx
				}
			}
			s := at(c, sc)
			s.mods = append(s.mods, gr)
			last = s
		case n.Op == "gated_residual" && len(n.In) == 3:
			fn := n.Attrs.Act
			if fn == "" {
				fn = "identity"
			}
			out = append(out, declared("gate_fn", scope(n), fn, "the gated residual's gate function"))
			if c, ok := g.chunkOf(n.In[2]); ok {
				s := at(c, scope(n))
				s.gates = append(s.gates, c.idx)
			}
		case n.Op == "add" && len(n.In) == 2:
			// x + y·g(chunk) spelled out: a gated residual of two ops
			if fn, c, ok := g.gateOf(n); ok {
				out = append(out, declared("gate_fn", scope(n), fn, "a residual added times a chunk (through its function)"))
				s := at(c, scope(n))
				s.gates = append(s.gates, c.idx)
			}
		}
	}
	for _, k := range order {
		s := bySrc[k]
		gates := slices.Clone(s.gates)
		slices.Sort(gates)
		taken := map[int]bool{}
		for _, m := range s.mods {
			if m.shift < 0 {
				continue // scale only: no order to read
			}
			idx := map[string]int{"shift": m.shift, "scale": m.scale}
			for _, k := range gates {
				if k > max(m.shift, m.scale) && !taken[k] {
					idx["gate"], taken[k] = k, true
					break
				}
			}
			names := make([]string, 0, 3)
			for n := range idx {
				names = append(names, n)
			}
			slices.SortFunc(names, func(a, b string) int { return idx[a] - idx[b] })
			name := "modulation_order"
			if _, ok := idx["gate"]; !ok {
				if s != last {
					continue // a gateless modulation inside the model: no catalogue name
				}
				name = "final_norm_order"
			}
			out = append(out, declared(name, s.scope, strings.Join(names, ","), "the chunk indices the shift, scale and gate read"))
			break // the first reading per source
		}
	}
	return out
}

// gateOf reads an add as x + y·g(gate), the gate a chunk: the gate
// function (identity, or the tanh or sigmoid the chunk goes through) and
// the chunk.
func (g *graph) gateOf(add *semantics.ProgramNode) (string, chunk, bool) {
	for i, in := range add.In {
		m := g.source(in)
		if m == nil || m.Op != "mul" || len(m.In) != 2 {
			continue
		}
		if g.stored(add.In[1-i]) {
			continue // a parameter or constant added: a bias (an affine per channel), not a residual stream
		}
		for _, op := range m.In {
			fn, gate := "identity", op
			if a := g.source(op); a != nil && a.Op == "act" && (a.Attrs.Act == "tanh" || a.Attrs.Act == "sigmoid") {
				fn, gate = a.Attrs.Act, a.In[0]
			}
			if c, ok := g.chunkOf(gate); ok {
				return fn, c, true
			}
		}
	}
	return "", chunk{}, false
}

// linearAct is the activation a value's linear reads its input through
// ("" where the value is not a linear's result through sums, pieces and
// layout ops, or the linear reads no activation).
func (g *graph) linearAct(name string) string {
	for range len(g.pg.Nodes) {
		p := g.prod[name]
		switch {
		case p == nil || len(p.In) == 0:
			return ""
		case layoutOps[p.Op] || p.Op == "slice" || p.Op == "concat":
			name = p.In[0]
		case p.Op == "add":
			for _, in := range p.In {
				if a := g.linearAct(in); a != "" {
					return a
				}
			}
			return ""
		case p.Op == "linear":
			if a := g.source(p.In[0]); a != nil && a.Op == "act" {
				return a.Attrs.Act
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// projections make an MLP's hidden rows.
var projections = map[string]bool{"linear": true, "conv2d": true}

// mlps reads each MLP: a projection down (its result added back to the
// residual) reading act(a) or act(a)·b, a and b projections of the rows.
func (g *graph) mlps() []semantics.Factor {
	var out []semantics.Factor
	for i := range g.pg.Nodes {
		n := &g.pg.Nodes[i]
		if !projections[n.Op] || len(n.In) == 0 {
			continue
		}
		act, glu, up, ok := g.hidden(n.In[0])
		if !ok || up == nil || g.numel(up.In[0]) != g.numel(n.Out[0]) {
			continue // not back to the rows the MLP read
		}
		sc := scope(n)
		out = append(out, declared("mlp_act", sc, act, "the activation the down projection reads"),
			declared("mlp_glu", sc, glu, "whether that activation multiplies another projection"))
	}
	return out
}

// hidden reads what a down projection's input is: act(a) (glu false),
// glu(a, b) or act(a)·b (glu true), through layout ops and joins of
// row pieces, a and b projections of at least four rows; up is the first
// projection behind a (through convolutions, acts and slices after it).
func (g *graph) hidden(name string) (act string, glu bool, up *semantics.ProgramNode, ok bool) {
	x := g.source(name)
	if x == nil {
		return "", false, nil, false
	}
	fromProjection := func(v string) bool {
		p := g.source(v)
		for p != nil && p.Op == "slice" && len(p.In) > 0 {
			p = g.source(p.In[0])
		}
		return p != nil && projections[p.Op] && g.rows(p.Out[0]) >= 4
	}
	switch x.Op {
	case "glu":
		if len(x.In) == 2 && fromProjection(x.In[0]) && fromProjection(x.In[1]) {
			return x.Attrs.Act, true, g.firstLinear(x.In[0]), true
		}
	case "act":
		if len(x.In) == 1 && fromProjection(x.In[0]) {
			return x.Attrs.Act, false, g.firstLinear(x.In[0]), true
		}
	case "mul":
		if len(x.In) != 2 {
			break
		}
		for j := range 2 {
			a, b := g.source(x.In[j]), x.In[1-j]
			for a != nil && a.Op == "slice" && len(a.In) > 0 {
				a = g.source(a.In[0]) // a row piece of the activation
			}
			if a != nil && a.Op == "act" && len(a.In) == 1 && fromProjection(a.In[0]) && fromProjection(b) {
				return a.Attrs.Act, true, g.firstLinear(a.In[0]), true
			}
		}
	}
	return "", false, nil, false
}

// firstLinear is the linear a value comes from through slices,
// convolutions and activations after it (a depthwise convolution
// between the up projection and the gate).
func (g *graph) firstLinear(name string) *semantics.ProgramNode {
	for range len(g.pg.Nodes) {
		p := g.source(name)
		switch {
		case p == nil || len(p.In) == 0:
			return nil
		case p.Op == "linear":
			return p
		case p.Op == "slice" || p.Op == "conv2d" || p.Op == "act":
			name = p.In[0]
		default:
			return nil
		}
	}
	return nil
}

// attentions reads each attention node: its mask, its score scale (0
// where it is 1/√head_dim), the RoPE layout q is rotated by and the norm
// q is made by.
func (g *graph) attentions() []semantics.Factor {
	var out []semantics.Factor
	for i := range g.pg.Nodes {
		n := &g.pg.Nodes[i]
		a := n.Attrs.Attention
		if n.Op != "attention" || a == nil || len(n.In) == 0 || a.Heads <= 0 {
			continue
		}
		sc := scope(n)
		out = append(out, declared("attention_causal", sc, a.Mask == "causal", "the attention node's mask"))
		if scale, ok := g.scoreScale(n.In[0], a); ok {
			out = append(out, declared("attention_scale", sc, scale, "the attention node's scale (0: 1/√head_dim)"))
		}
		rope, qk := g.madeBy(n.In[0])
		out = append(out, declared("rope_layout", sc, rope, "what q is rotated by before the attention"),
			declared("qk_norm", sc, qk, "what q is made by before the attention"))
	}
	return out
}

// madeBy reads what q went through before the attention: the layout of
// a rotation and the kind of a norm, seen through layout ops, slices and
// every piece of a join (RoPE on some rows only), stopping at the
// projection ("none" for what is not there).
func (g *graph) madeBy(q string) (rope, norm string) {
	rope, norm = "none", "none"
	seen := map[string]bool{}
	var walk func(string)
	walk = func(v string) {
		p := g.prod[v]
		if p == nil || seen[v] {
			return
		}
		seen[v] = true
		switch {
		case p.Op == "rope" && p.Attrs.Rope != nil:
			rope = p.Attrs.Rope.Layout
			walk(p.In[0])
		case p.Op == "norm" && p.Attrs.Norm != nil:
			if norm == "none" {
				norm = p.Attrs.Norm.Kind
			}
		case layoutOps[p.Op] || p.Op == "slice" || p.Op == "concat":
			for _, in := range p.In {
				if in != "" {
					walk(in)
				}
			}
		}
	}
	walk(q)
	return rope, norm
}

// scoreScale is an attention's scale as the catalogue writes it: 0 for
// 1/√head_dim, the head width read off q's shape.
func (g *graph) scoreScale(q string, a *semantics.AttentionAttrs) (float64, bool) {
	if a.Scale == 0 {
		return 0, true
	}
	v := g.vals[q]
	if v == nil || len(v.Shape) == 0 {
		return 0, false
	}
	d := v.Shape[len(v.Shape)-1]
	if len(v.Shape) < 4 {
		d /= a.Heads
	}
	if d > 0 && math.Abs(a.Scale*math.Sqrt(float64(d))-1) < 1e-6 {
		return 0, true
	}
	// the simple number the stored scale holds (1/√24, not its f32)
	f := float32(a.Scale)
	return simple.Snap(a.Scale, func(x float64) bool { return float32(x) == f }), true
}

// ropeTables reads each rope_table node's θ and axes.
func (g *graph) ropeTables() []semantics.Factor {
	var out []semantics.Factor
	for i := range g.pg.Nodes {
		n := &g.pg.Nodes[i]
		r := n.Attrs.RopeTable
		if n.Op != "rope_table" || r == nil {
			continue
		}
		sc := scope(n)
		out = append(out, declared("rope_theta", sc, r.Theta, "the rope_table node's θ"),
			declared("rope_axes", sc, slices.Clone(r.AxesDims), "the rope_table node's axes"))
	}
	return out
}

// joins reads the order of the model's own joined sequence: rows joined
// from pieces, the result a captured boundary (so the order is the
// model's, not a choice of the program's, whose attention may join rows
// in any order), one piece made from the latents and at least one not,
// the first such join in the program (before the streams mix).
func (g *graph) joins() []semantics.Factor {
	for i := range g.pg.Nodes {
		n := &g.pg.Nodes[i]
		if n.Op != "concat" || len(n.In) < 2 || !g.captured(n.Out[0]) || !g.rowJoin(n) {
			continue
		}
		image, other := -1, -1
		for j, in := range n.In {
			switch {
			case g.fromLatents(in, map[string]bool{}):
				if image >= 0 {
					image = -2 // latents in two pieces: no order to read
				} else if image == -1 {
					image = j
				}
			case other < 0:
				other = j
			}
		}
		if image < 0 || other < 0 {
			continue
		}
		order := "text_first"
		if image < other {
			order = "image_first"
		}
		return []semantics.Factor{declared("joint_order", "model", order, "the first joined sequence the trace captured, its rows from the latents and from elsewhere")}
	}
	return nil
}

// rowJoin: a concat along an axis before the last (rows, not channels).
func (g *graph) rowJoin(n *semantics.ProgramNode) bool {
	v := g.vals[n.Out[0]]
	if v == nil || len(v.Shape) < 2 {
		return false
	}
	ax := n.Attrs.Axis
	if ax < 0 {
		ax += len(v.Shape)
	}
	return ax < len(v.Shape)-1
}

// captured: the value, or a layout of it, is a tensor the trace holds.
func (g *graph) captured(name string) bool {
	if v := g.vals[name]; v != nil && len(v.Taps) > 0 {
		return true
	}
	for _, u := range g.users[name] {
		if layoutOps[u.Op] && len(u.Out) > 0 && g.captured(u.Out[0]) {
			return true
		}
	}
	return false
}

// fromLatents: the value is computed from the step's latents.
func (g *graph) fromLatents(name string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	if v := g.vals[name]; v != nil && v.Kind == "step_input" && v.Source == "latents" {
		return true
	}
	if p := g.prod[name]; p != nil {
		for _, in := range p.In {
			if in != "" && g.fromLatents(in, seen) {
				return true
			}
		}
	}
	return false
}
