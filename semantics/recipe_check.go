package semantics

import (
	"fmt"
	"slices"
	"strings"
)

// check verifies what the readers of a recipe rely on: known ops, each
// value made before it is read, roles only on linears and norms.
func (r *Recipe) check() error {
	if r.Sets != SetsStreams && r.Sets != SetsJoined {
		return fmt.Errorf("sets %q is not %s or %s", r.Sets, SetsStreams, SetsJoined)
	}
	set := map[string]bool{r.In: true}
	global := map[string]bool{}
	for _, v := range RecipeGiven {
		global[v] = true
	}
	// made: each value's maker, once; alternatives under when may share.
	made := map[string]*RecipeNode{}
	var walk func(ns []RecipeNode, each bool) error
	walk = func(ns []RecipeNode, each bool) error {
		for i := range ns {
			n := &ns[i]
			if n.Each != nil {
				if each {
					return fmt.Errorf("each inside each")
				}
				if err := walk(n.Each, true); err != nil {
					return err
				}
				continue
			}
			if !slices.Contains(recipeOps, n.Op) {
				return fmt.Errorf("node %q: op %q is not one of %s", n.NodeName(), n.Op, strings.Join(recipeOps, ", "))
			}
			if n.NodeName() == "" || len(n.Out) == 0 {
				return fmt.Errorf("a %s node has no name or no output", n.Op)
			}
			if n.Role != "" && n.Op != "linear" && n.Op != "norm" {
				return fmt.Errorf("node %q: a %s node has no parameters to bind to role %q", n.NodeName(), n.Op, n.Role)
			}
			if each && (n.Op == "join" || n.Op == "split") {
				return fmt.Errorf("node %q: %s is over the weight sets, outside each", n.NodeName(), n.Op)
			}
			for _, in := range n.In {
				if each && !set[in] && !global[in] || !each && !global[in] && !((n.Op == "join" || n.Op == "split") && set[in]) {
					return fmt.Errorf("node %q reads %q before it is made", n.NodeName(), in)
				}
			}
			for k, v := range n.Attrs {
				if str, ok := v.(string); ok {
					if _, err := ParseRecipeBinding(str); err != nil {
						return fmt.Errorf("node %q: attrs.%s: %w", n.NodeName(), k, err)
					}
				}
			}
			if n.When != "" {
				if _, err := ParseRecipeConds(n.When); err != nil {
					return fmt.Errorf("node %q: %w", n.NodeName(), err)
				}
			}
			if n.Else != "" && !set[n.Else] && !global[n.Else] {
				return fmt.Errorf("node %q: else %q is not made", n.NodeName(), n.Else)
			}
			if n.Op == "chunk" {
				spec, ok := LookupSpec(fmt.Sprint(n.Attrs["order"]))
				if !ok || spec.typ != typeOrder || len(n.Out)%len(spec.chunks) != 0 {
					return fmt.Errorf("node %q: a chunk's attrs.order is an order factor, and its outputs are groups of that factor's chunks", n.NodeName())
				}
			}
			for _, o := range n.Out {
				if m := made[o]; m != nil && (m.When == "" || n.When == "") {
					return fmt.Errorf("node %q makes %q, which node %q made", n.NodeName(), o, m.NodeName())
				}
				made[o] = n
				if each || n.Op == "split" {
					set[o] = true
				} else {
					global[o] = true
				}
			}
		}
		return nil
	}
	if err := walk(r.Nodes, false); err != nil {
		return err
	}
	if !set[r.Out] {
		return fmt.Errorf("out %q is not made", r.Out)
	}
	roles := r.roleKinds()
	for _, o := range r.Optional {
		if _, ok := roles[o]; !ok {
			return fmt.Errorf("optional role %q is no node's", o)
		}
	}
	return nil
}

// RecipeBinding is an attribute bound to a factor or to structure numbers.
type RecipeBinding struct {
	// Factor is a catalogue factor read at At: "" the block's address,
	// "node" the node's own, anything else that address ("positions").
	Factor string
	At     string
	// Fields: the product of these structure numbers (block.heads,
	// block.kv_heads, block.head_dim, block.mlp_width, model.hidden).
	Fields []string
}

var recipeFields = []string{"block.heads", "block.kv_heads", "block.head_dim", "block.mlp_width", "model.hidden"}

// ParseRecipeBinding reads "factor", "factor@node", "factor@<address>" or
// a product of structure numbers ("block.heads*block.head_dim").
func ParseRecipeBinding(s string) (RecipeBinding, error) {
	if strings.HasPrefix(s, "block.") || strings.HasPrefix(s, "model.") {
		fs := strings.Split(s, "*")
		for _, f := range fs {
			if !slices.Contains(recipeFields, f) {
				return RecipeBinding{}, fmt.Errorf("%q is not one of %s", f, strings.Join(recipeFields, ", "))
			}
		}
		return RecipeBinding{Fields: fs}, nil
	}
	name, at, _ := strings.Cut(s, "@")
	if _, ok := LookupSpec(name); !ok {
		return RecipeBinding{}, fmt.Errorf("%q is no factor of the catalogue", name)
	}
	return RecipeBinding{Factor: name, At: at}, nil
}

// RecipeCond is a node's condition: "$v" (value v exists: the model has
// RoPE tables for "$cos"), "@r" or "!@r" (the structure has role r, or
// not), "f" or "!f" (a boolean factor), "f == x" or "f != x" (an enum
// factor), factors read at the block's address.
type RecipeCond struct {
	Value  string
	Role   string
	Factor string
	Op     string // "", "!", "==", "!="
	Arg    string
}

// ParseRecipeConds reads a node's conditions: one, or several joined by
// "&&" (each read only while those before it hold).
func ParseRecipeConds(s string) ([]RecipeCond, error) {
	var out []RecipeCond
	for _, part := range strings.Split(s, "&&") {
		c, err := ParseRecipeCond(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseRecipeCond reads a condition.
func ParseRecipeCond(s string) (RecipeCond, error) {
	if v, ok := strings.CutPrefix(s, "$"); ok {
		return RecipeCond{Value: v}, nil
	}
	if r, ok := strings.CutPrefix(s, "@"); ok {
		return RecipeCond{Role: r}, nil
	}
	if r, ok := strings.CutPrefix(s, "!@"); ok {
		return RecipeCond{Role: r, Op: "!"}, nil
	}
	c := RecipeCond{Factor: s}
	for _, op := range []string{"==", "!="} {
		if l, r, ok := strings.Cut(s, op); ok {
			c = RecipeCond{Factor: strings.TrimSpace(l), Op: op, Arg: strings.TrimSpace(r)}
		}
	}
	if f, ok := strings.CutPrefix(c.Factor, "!"); ok && c.Op == "" {
		c = RecipeCond{Factor: f, Op: "!"}
	}
	spec, ok := LookupSpec(c.Factor)
	switch {
	case !ok:
		return c, fmt.Errorf("condition %q: %q is no factor of the catalogue", s, c.Factor)
	case (c.Op == "" || c.Op == "!") && spec.typ != typeBool:
		return c, fmt.Errorf("condition %q: %s is not a boolean factor", s, c.Factor)
	case c.Op != "" && c.Op != "!" && !slices.Contains(spec.enum, c.Arg):
		return c, fmt.Errorf("condition %q: %q is not a value of %s", s, c.Arg, c.Factor)
	}
	return c, nil
}
