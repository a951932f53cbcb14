package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/semantics"
)

// recipeRun is one block being built from its kind's recipe: the values
// of each weight set (in joint order) and those of the block as a whole.
type recipeRun struct {
	b      *builder
	r      *semantics.Recipe
	addr   string
	blk    *semantics.Block          // nil for a stage
	roles  map[string]semantics.Role // the block's or the stage's
	absent map[string]string         // values left unmade: the given value (absent) their else named
	prefix []string                  // each set's role prefix
	sets   []map[string]string       // each set's values by recipe name
	global map[string]string         // cond, cos, sin and values over all sets
}

// recipeBlock emits a block by its recipe and returns the joined rows
// entering and leaving it ("" where the sets are the streams).
func (b *builder) recipeBlock(addr string, blk *semantics.Block, r *semantics.Recipe) (jointIn, jointOut string, err error) {
	run := &recipeRun{b: b, r: r, addr: addr, blk: blk, roles: blk.Roles, global: map[string]string{}, absent: map[string]string{}}
	given := map[string]string{"cond": b.cond, "cos": b.cos, "sin": b.sin}
	for _, name := range semantics.RecipeGiven {
		if v := given[name]; v != "" {
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

// recipeStage emits a part of the model outside the blocks by its recipe
// (one set: its rows x) and returns the recipe's out; tap is told each of
// the recipe's taps (port, value) once the last node that may make the
// value has run.
func (b *builder) recipeStage(addr string, roles map[string]semantics.Role, r *semantics.Recipe, x string, tap func(port, v string)) (string, error) {
	run := &recipeRun{b: b, r: r, addr: addr, roles: roles, global: map[string]string{}, absent: map[string]string{},
		prefix: []string{""}, sets: []map[string]string{{r.In: x}}}
	given := map[string]string{"cond": b.cond, "cos": b.cos, "sin": b.sin}
	for _, name := range semantics.RecipeGiven {
		if v := given[name]; v != "" {
			run.global[name] = v
		}
	}
	nodes := r.Nodes[0].Each
	ports := sortedNames(r.Taps)
	last := map[string]int{}
	for _, port := range ports {
		for j := range nodes {
			if slices.Contains(nodes[j].Out, r.Taps[port]) {
				last[port] = j
			}
		}
	}
	for j := range nodes {
		if err := run.node(&nodes[j], 0); err != nil {
			return "", err
		}
		for _, port := range ports {
			if last[port] == j {
				v, err := run.value(r.Taps[port], 0)
				if err != nil {
					return "", err
				}
				tap(port, v)
			}
		}
	}
	return run.value(r.Out, 0)
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

// holds evaluates a node's conditions (each while those before it hold)
// at the block's address, and says what it found ("mlp_glu is true") and
// whether one of them is about the structure's roles.
func (run *recipeRun) holds(cond string, prefix string) (ok bool, found string, roles bool, err error) {
	cs, err := semantics.ParseRecipeConds(cond)
	if err != nil {
		return false, "", false, err
	}
	for _, c := range cs {
		roles = roles || c.Role != ""
		if ok, found, err = run.holds1(c, prefix); err != nil || !ok {
			return ok, found, roles, err
		}
	}
	return true, found, roles, nil
}

func (run *recipeRun) holds1(c semantics.RecipeCond, prefix string) (bool, string, error) {
	if c.Value != "" {
		_, ok := run.global[c.Value]
		return ok, fmt.Sprintf("%s is given: %v", c.Value, ok), nil
	}
	if c.Role != "" {
		_, has := run.roles[prefix+c.Role]
		return has == (c.Op == ""), fmt.Sprintf("the %s role is there: %v", c.Role, has), nil
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
	prefix := "" // a node over the block binds unprefixed roles
	if si >= 0 {
		prefix = run.prefix[si]
	}
	name := run.addr + "." + prefix + n.NodeName()
	var role semantics.Role
	hasRole := false
	if n.Role != "" {
		role, hasRole = run.roles[prefix+n.Role]
	}
	if n.When != "" {
		ok, found, roles, err := run.holds(n.When, prefix)
		if err != nil {
			return err
		}
		// A conditional node's role is there exactly when it runs (a
		// condition on the roles says itself which run).
		if n.Role != "" && !roles && ok != hasRole {
			return fmt.Errorf("%s: %s but the block %s a %s%s role", run.addr, found, map[bool]string{true: "has", false: "has no"}[hasRole], prefix, n.Role)
		}
		if !ok {
			if _, given := run.global[n.Else]; slices.Contains(semantics.RecipeGiven, n.Else) && !given {
				run.absent[n.Out[0]] = n.Else // the model has no such value: the output stays unmade
				return nil
			}
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
			continue // per set: read by the op
		}
		if g, ok := run.absent[v]; ok && g == "cond" {
			return fmt.Errorf("%s: %s needs the conditioning vector, and the structure has no conditioning", run.addr, n.NodeName())
		} else if ok {
			return fmt.Errorf("%s: %s needs %s, which the model does not have", run.addr, n.NodeName(), g)
		}
		var err error
		if in[i], err = run.value(v, si); err != nil {
			return err
		}
	}
	outs, err := run.op(n, in, name, role, si)
	if err != nil || outs == nil {
		return err
	}
	for i, o := range outs {
		run.bind(n.Out[i], o, si)
	}
	return run.checkWidth(n, name, outs[0])
}

// op emits a node's op on its inputs and returns its outputs (nil: the op
// bound them itself, per set).
func (run *recipeRun) op(n *semantics.RecipeNode, in []string, name string, role semantics.Role, si int) ([]string, error) {
	b := run.b
	one := func(o string, err error) ([]string, error) { return []string{o}, err }
	switch n.Op {
	case "linear":
		return one(b.linear(in[0], name, role))
	case "norm":
		return one(run.norm(n, in[0], name, role))
	case "chunk":
		return nil, run.chunk(n, in[0], name, si)
	case "join":
		xs := make([]string, len(run.sets))
		for i := range run.sets {
			var err error
			if xs[i], err = run.value(n.In[0], i); err != nil {
				return nil, err
			}
		}
		return one(b.join(xs, name))
	case "split":
		rows := make([]int, len(run.sets))
		for i := range run.sets {
			v, err := run.value(n.In[1], i)
			if err != nil {
				return nil, err
			}
			rows[i] = b.shape(v)[1]
		}
		parts, err := b.split(in[0], rows, name)
		for i, p := range parts {
			run.bind(n.Out[0], p, i)
		}
		return nil, err
	}
	op, ok := recipeOps[n.Op]
	if !ok {
		return nil, fmt.Errorf("%s: recipe %s: op %q is not supported", name, run.r.Kind, n.Op)
	}
	a, err := run.attrs(n, name, in)
	if err != nil {
		return nil, err
	}
	if op == OpAttention {
		in = append(in, "") // no explicit mask
	}
	return b.emit(op, name, in, a)
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
	k := len(spec.Chunks()) // the outputs are groups of k (semantics checked)
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
