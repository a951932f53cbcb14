package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// recipeRun is one block being built from its kind's recipe: the values
// of each weight set (in joint order) and those of the block as a whole.
type recipeRun struct {
	b      *builder
	r      *semantics.Recipe
	addr   string
	blk    *semantics.Block
	prefix []string            // each set's role prefix
	sets   []map[string]string // each set's values by recipe name
	global map[string]string   // cond, cos, sin and values over all sets
}

// recipeBlock emits a block by its recipe and returns the joined rows
// entering and leaving it ("" where the sets are the streams).
func (b *builder) recipeBlock(addr string, blk *semantics.Block, r *semantics.Recipe) (jointIn, jointOut string, err error) {
	run := &recipeRun{b: b, r: r, addr: addr, blk: blk, global: map[string]string{}}
	for name, v := range map[string]string{"cond": b.cond, "cos": b.cos, "sin": b.sin} {
		if v != "" {
			run.global[name] = v
		}
	}
	if r.Sets == semantics.SetsStreams {
		for _, s := range b.joint {
			run.prefix = append(run.prefix, r.RolePrefix(s))
			run.sets = append(run.sets, map[string]string{r.In: b.stream[s]})
		}
	} else {
		if jointIn, err = b.joinStreams(addr); err != nil {
			return "", "", err
		}
		run.prefix = []string{""}
		run.sets = []map[string]string{{r.In: jointIn}}
	}
	for i := range r.Nodes {
		n := &r.Nodes[i]
		if n.Each == nil {
			if err := run.node(n, -1); err != nil {
				return "", "", err
			}
			continue
		}
		for si := range run.sets {
			for j := range n.Each {
				if err := run.node(&n.Each[j], si); err != nil {
					return "", "", err
				}
			}
		}
	}
	if r.Sets == semantics.SetsStreams {
		for si, s := range b.joint {
			b.stream[s] = run.sets[si][r.Out]
		}
		return "", "", nil
	}
	jointOut = run.sets[0][r.Out]
	return jointIn, jointOut, b.splitStreams(jointOut, addr)
}

// value is a recipe value as set si (-1: the block) sees it.
func (run *recipeRun) value(name string, si int) (string, error) {
	if si >= 0 {
		if v, ok := run.sets[si][name]; ok {
			return v, nil
		}
	}
	if v, ok := run.global[name]; ok {
		return v, nil
	}
	if name == "cond" {
		return "", fmt.Errorf("%s: the block needs the conditioning vector, and the structure has no conditioning", run.addr)
	}
	return "", fmt.Errorf("%s: recipe %s: value %q is not made", run.addr, run.r.Kind, name)
}

// bind sets a node's output value.
func (run *recipeRun) bind(name, v string, si int) {
	if si >= 0 {
		run.sets[si][name] = v
	} else {
		run.global[name] = v
	}
}

// holds evaluates a node's condition at the block's address, and says
// what it found ("mlp_glu is true").
func (run *recipeRun) holds(cond string) (bool, string, error) {
	c, err := semantics.ParseRecipeCond(cond)
	if err != nil {
		return false, "", err
	}
	if c.Value != "" {
		_, ok := run.global[c.Value]
		return ok, fmt.Sprintf("%s is made: %v", c.Value, ok), nil
	}
	switch c.Op {
	case "", "!":
		v, err := run.b.doc.Bool(c.Factor, run.addr)
		return v == (c.Op == ""), fmt.Sprintf("%s is %v", c.Factor, v), err
	}
	v, err := run.b.doc.String(c.Factor, run.addr)
	return (v == c.Arg) == (c.Op == "=="), fmt.Sprintf("%s is %q", c.Factor, v), err
}

// node emits one recipe node for set si (-1: over the block).
func (run *recipeRun) node(n *semantics.RecipeNode, si int) error {
	b := run.b
	name := run.addr + "." + n.NodeName()
	var role semantics.Role
	hasRole := false
	if si >= 0 {
		name = run.addr + "." + run.prefix[si] + n.NodeName()
		if n.Role != "" {
			role, hasRole = run.blk.Roles[run.prefix[si]+n.Role]
		}
	}
	if n.When != "" {
		ok, found, err := run.holds(n.When)
		if err != nil {
			return err
		}
		// A conditional node's role is there exactly when it runs.
		if n.Role != "" && ok != hasRole {
			return fmt.Errorf("%s: %s but the block %s a %s%s role", run.addr, found, map[bool]string{true: "has", false: "has no"}[hasRole], run.prefix[si], n.Role)
		}
		if !ok {
			if n.Else != "" {
				v, err := run.value(n.Else, si)
				if err != nil {
					return err
				}
				run.bind(n.Out[0], v, si)
			}
			return nil
		}
	}
	in := make([]string, len(n.In))
	for i, v := range n.In {
		if si < 0 && (n.Op == "join" || n.Op == "split" && i == 1) {
			continue // per set, read below
		}
		var err error
		if in[i], err = run.value(v, si); err != nil {
			return err
		}
	}
	var outs []string
	var err error
	switch n.Op {
	case "linear":
		var o string
		if o, err = b.linear(in[0], name, role); err == nil {
			outs = []string{o}
		}
	case "norm":
		var o string
		if o, err = run.norm(n, in[0], name, role); err == nil {
			outs = []string{o}
		}
	case "join":
		xs := make([]string, len(run.sets))
		for i := range run.sets {
			if xs[i], err = run.value(n.In[0], i); err != nil {
				return err
			}
		}
		var o string
		if o, err = b.join(xs, name); err == nil {
			outs = []string{o}
		}
	case "split":
		rows := make([]int, len(run.sets))
		for i := range run.sets {
			v, err := run.value(n.In[1], i)
			if err != nil {
				return err
			}
			rows[i] = b.shape(v)[1]
		}
		parts, err := b.split(in[0], rows, name)
		if err != nil {
			return err
		}
		for i, p := range parts {
			run.bind(n.Out[0], p, i)
		}
		return nil
	case "chunk":
		return run.chunk(n, in[0], name, si)
	default:
		var a Attrs
		op, ok := recipeOps[n.Op]
		if !ok {
			return fmt.Errorf("%s: recipe %s: op %q is not supported", name, run.r.Kind, n.Op)
		}
		if a, err = run.attrs(n, name, in); err != nil {
			return err
		}
		if op == OpAttention {
			in = append(in, "") // no explicit mask
		}
		if outs, err = b.emit(op, name, in, a); err == nil {
			err = run.checkWidth(n, name, outs[0])
		}
	}
	if err != nil {
		return err
	}
	for i, o := range outs {
		run.bind(n.Out[i], o, si)
	}
	if n.Op == "linear" {
		return run.checkWidth(n, name, outs[0])
	}
	return nil
}

// recipeOps are the ops a recipe node emits as they are.
var recipeOps = map[string]Op{
	"act": OpAct, "glu": OpGLU, "modulate": OpModulate, "gated_residual": OpGatedResidual,
	"add": OpAdd, "concat": OpConcat, "rope": OpRope, "attention": OpAttention,
}

// checkWidth refuses a result whose last axis is not the node's width.
func (run *recipeRun) checkWidth(n *semantics.RecipeNode, name, out string) error {
	s, ok := n.Attrs["width"].(string)
	if !ok {
		return nil
	}
	want, err := run.number(s, name)
	if err != nil {
		return err
	}
	if sh := run.b.shape(out); sh[len(sh)-1] != int(want) {
		return fmt.Errorf("%s: width %d is not %s (%d)", name, sh[len(sh)-1], s, int(want))
	}
	return nil
}

// chunk emits a chunk whose outputs are named in the canonical chunk
// order of its order factor, group after group, and taken in the order
// the factor gives.
func (run *recipeRun) chunk(n *semantics.RecipeNode, x, name string, si int) error {
	b := run.b
	factor, _ := n.Attrs["order"].(string)
	spec, _ := semantics.LookupSpec(factor)
	order, err := b.doc.OrderAt(factor, run.addr)
	if err != nil {
		return err
	}
	k := len(spec.Chunks())
	if len(n.Out)%k != 0 {
		return fmt.Errorf("%s: recipe %s: %d outputs are not groups of %d", name, run.r.Kind, len(n.Out), k)
	}
	if s, ok := n.Attrs["width"].(string); ok {
		w, err := run.number(s, name)
		if err != nil {
			return err
		}
		if got := b.shape(x)[len(b.shape(x))-1]; got != len(n.Out)*int(w) {
			return fmt.Errorf("%s: width %d is not %d chunks of %s %d", name, got, len(n.Out), s, int(w))
		}
	}
	chunks, err := b.emit(OpChunk, name, []string{x}, Attrs{N: len(n.Out), Axis: -1})
	if err != nil {
		return err
	}
	at := map[string]int{}
	for i, c := range order {
		at[c] = i
	}
	for g := 0; g < len(n.Out)/k; g++ {
		for j, c := range spec.Chunks() {
			run.bind(n.Out[g*k+j], chunks[g*k+at[c]], si)
		}
	}
	return nil
}

// norm emits a norm node: kind, eps and offset by their bindings, over
// groups of the group binding's elements (absent: the whole row).
func (run *recipeRun) norm(n *semantics.RecipeNode, x, name string, r semantics.Role) (string, error) {
	kind, err := run.str(n, "kind", name)
	if err != nil {
		return "", err
	}
	eps, err := run.num(n, "eps", name)
	if err != nil {
		return "", err
	}
	offset, err := run.num(n, "offset", name)
	if err != nil {
		return "", err
	}
	group, err := run.num(n, "group", name)
	if err != nil {
		return "", err
	}
	return run.b.normWith(x, name, r, kind, eps, offset, int(group))
}

// attrs resolves the attributes of an op that recipeOps emits as it is.
func (run *recipeRun) attrs(n *semantics.RecipeNode, name string, in []string) (Attrs, error) {
	var a Attrs
	act := func() (exec.ActKind, error) {
		s, err := run.str(n, "act", name)
		if err != nil {
			return 0, err
		}
		f, err := exec.ParseAct(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	}
	var err error
	switch n.Op {
	case "act", "glu", "gated_residual":
		a.Act, err = act()
	case "modulate":
		a.Modulate.PlusOne, err = run.boolean(n, "plus_one", name)
	case "concat":
		var ax float64
		ax, err = run.num(n, "axis", name)
		a.Axis = int(ax)
	case "rope":
		a.Rope, err = run.rope(n, name, in)
	case "attention":
		a.Attention, err = run.attention(n, name)
	}
	return a, err
}

// rope resolves a rotation by the model's tables.
func (run *recipeRun) rope(n *semantics.RecipeNode, name string, in []string) (exec.RopeParams, error) {
	b := run.b
	s, err := run.str(n, "layout", name)
	if err != nil {
		return exec.RopeParams{}, err
	}
	var layout exec.RopeLayout
	switch s {
	case "interleaved":
		layout = exec.RopeInterleaved
	case "half":
		layout = exec.RopeHalf
	default:
		return exec.RopeParams{}, fmt.Errorf("rope_layout %q has no tables", s)
	}
	if rows, seq := b.shape(in[1])[0], b.shape(in[0])[1]; rows != seq {
		return exec.RopeParams{}, fmt.Errorf("%s: RoPE tables have %d rows, the joined sequence %d", run.addr, rows, seq)
	}
	rot, hd := b.rotary, run.blk.HeadDim
	if rot > hd {
		return exec.RopeParams{}, fmt.Errorf("%s: RoPE axes cover %d channels, more than the head width %d", run.addr, rot, hd)
	}
	if rot == hd {
		rot = 0
	}
	heads, err := run.num(n, "heads", name)
	return exec.RopeParams{Heads: int(heads), Layout: layout, RotaryDim: rot}, err
}

// attention resolves a scaled dot-product attention.
func (run *recipeRun) attention(n *semantics.RecipeNode, name string) (exec.AttentionParams, error) {
	var p exec.AttentionParams
	heads, err := run.num(n, "heads", name)
	if err != nil {
		return p, err
	}
	kv, err := run.num(n, "kv_heads", name)
	if err != nil {
		return p, err
	}
	causal, err := run.boolean(n, "causal", name)
	if err != nil {
		return p, err
	}
	scale, err := run.num(n, "scale", name)
	if err != nil {
		return p, err
	}
	p = exec.AttentionParams{Heads: int(heads), KVHeads: int(kv), Scale: float32(scale)}
	if causal {
		p.Mask = exec.MaskCausal
	}
	return p, nil
}

// binding parses a bound attribute and says where its factor is read:
// the block's address, the node's (name), or the one it names.
func (run *recipeRun) binding(s, name string) (semantics.RecipeBinding, string, error) {
	bd, err := semantics.ParseRecipeBinding(s)
	switch bd.At {
	case "":
		return bd, run.addr, err
	case "node":
		return bd, name, err
	}
	return bd, bd.At, err
}

// number resolves a binding that is a number: a product of structure
// numbers or a numeric factor.
func (run *recipeRun) number(s, name string) (float64, error) {
	bd, at, err := run.binding(s, name)
	if err != nil {
		return 0, err
	}
	if bd.Factor != "" {
		return run.b.doc.Number(bd.Factor, at)
	}
	fields := map[string]int{"block.heads": run.blk.Heads, "block.kv_heads": run.blk.KVHeads, "block.head_dim": run.blk.HeadDim,
		"block.mlp_width": run.blk.MLPWidth, "model.hidden": run.b.st.Hidden}
	v := 1
	for _, f := range bd.Fields {
		v *= fields[f]
	}
	return float64(v), nil
}

// num is an attribute that is a number: a literal or a binding (absent:
// 0).
func (run *recipeRun) num(n *semantics.RecipeNode, key, name string) (float64, error) {
	switch v := n.Attrs[key].(type) {
	case nil:
		return 0, nil
	case float64:
		return v, nil
	case string:
		return run.number(v, name)
	}
	return 0, fmt.Errorf("%s: attrs.%s %v is not a number", name, key, n.Attrs[key])
}

// str is an attribute bound to an enum factor.
func (run *recipeRun) str(n *semantics.RecipeNode, key, name string) (string, error) {
	s, ok := n.Attrs[key].(string)
	if !ok {
		return "", fmt.Errorf("%s: recipe %s: attrs.%s is not bound", name, run.r.Kind, key)
	}
	bd, at, err := run.binding(s, name)
	if err != nil {
		return "", err
	}
	return run.b.doc.String(bd.Factor, at)
}

// boolean is an attribute that is a boolean: a literal or a factor.
func (run *recipeRun) boolean(n *semantics.RecipeNode, key, name string) (bool, error) {
	switch v := n.Attrs[key].(type) {
	case bool:
		return v, nil
	case string:
		bd, at, err := run.binding(v, name)
		if err != nil {
			return false, err
		}
		return run.b.doc.Bool(bd.Factor, at)
	}
	return false, fmt.Errorf("%s: recipe %s: attrs.%s is not bound", name, run.r.Kind, key)
}
