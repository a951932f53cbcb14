package semantics

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// A Recipe is a version 1 block kind written as data: the dataflow of one
// block in the op vocabulary over named values, parameters bound by role,
// attributes bound to factors. The builder runs it (exec/program), the
// structure reader recognises it and names its roles (search/structure),
// and validation lists its roles from it. SCHEMA.md, "Recipes", describes
// the format.
type Recipe struct {
	Kind string `json:"kind"`
	Doc  string `json:"doc"`
	// Sets: "streams" (each stream its own weight set, roles prefixed
	// "<stream>.") or "joined" (one weight set over the streams' rows
	// joined in joint order, split back after the block).
	Sets string `json:"sets"`
	// In and Out name each weight set's rows entering and leaving.
	In  string `json:"in"`
	Out string `json:"out"`
	// Optional lists the roles a block may lack; every other role of a
	// node is required.
	Optional []string     `json:"optional"`
	Nodes    []RecipeNode `json:"nodes"`
}

// RecipeNode is one op of a recipe, or (Each) a run of ops done once per
// weight set, in joint order.
type RecipeNode struct {
	Each []RecipeNode `json:"each,omitempty"`
	Op   string       `json:"op,omitempty"`
	// Name is the node's address under the block (with the set's role
	// prefix inside Each); absent, it is Role.
	Name string   `json:"name,omitempty"`
	Role string   `json:"role,omitempty"`
	In   []string `json:"in,omitempty"`
	Out  []string `json:"out,omitempty"`
	// Attrs: a number or boolean is itself; a string is a binding
	// (RecipeBinding).
	Attrs map[string]any `json:"attrs,omitempty"`
	// When is a condition (RecipeCond); when it does not hold the node is
	// not emitted and its output is Else's value ("" leaves it unbound).
	When string `json:"when,omitempty"`
	Else string `json:"else,omitempty"`
}

// NodeName is the node's address under its block.
func (n *RecipeNode) NodeName() string {
	if n.Name != "" {
		return n.Name
	}
	return n.Role
}

// Recipe set kinds.
const (
	SetsStreams = "streams"
	SetsJoined  = "joined"
)

// recipeOps are the ops a recipe may use: the vocabulary's, and join and
// split, concat and slice over the weight sets' rows: join(v) is each set's
// v joined in set order, split(x, v) cuts x into rows the size of each
// set's v (one set: no node).
var recipeOps = []string{"linear", "norm", "act", "glu", "modulate", "gated_residual", "add", "concat", "chunk", "rope", "attention", "join", "split"}

//go:embed recipes/*.json
var recipeFiles embed.FS

// recipes is the registry, keyed by kind.
var recipes = mustLoadRecipes()

func mustLoadRecipes() map[string]*Recipe {
	out, err := loadRecipes()
	if err != nil {
		panic(err)
	}
	return out
}

func loadRecipes() (map[string]*Recipe, error) {
	names, err := recipeFiles.ReadDir("recipes")
	if err != nil {
		return nil, err
	}
	out := map[string]*Recipe{}
	for _, e := range names {
		file := path.Join("recipes", e.Name())
		b, err := recipeFiles.ReadFile(file)
		if err != nil {
			return nil, err
		}
		r := &Recipe{}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(r); err != nil {
			return nil, fmt.Errorf("semantics: %s: %w", file, err)
		}
		if r.Kind+".json" != e.Name() {
			return nil, fmt.Errorf("semantics: %s: kind %q is not the file's name", file, r.Kind)
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("semantics: %s: %w", file, err)
		}
		out[r.Kind] = r
	}
	return out, nil
}

// LookupRecipe returns the recipe of a block kind.
func LookupRecipe(kind string) (*Recipe, bool) {
	r, ok := recipes[kind]
	return r, ok
}

// Recipes lists the recipes, sorted by kind.
func Recipes() []*Recipe {
	var out []*Recipe
	for _, k := range sortedKeys(recipes) {
		out = append(out, recipes[k])
	}
	return out
}

// check verifies what the readers of a recipe rely on: known ops, each
// value made before it is read, roles only on linears and norms.
func (r *Recipe) check() error {
	if r.Sets != SetsStreams && r.Sets != SetsJoined {
		return fmt.Errorf("sets %q is not %s or %s", r.Sets, SetsStreams, SetsJoined)
	}
	set := map[string]bool{r.In: true}
	global := map[string]bool{"cond": true, "cos": true, "sin": true}
	var walk func(ns []RecipeNode, each bool) error
	walk = func(ns []RecipeNode, each bool) error {
		for _, n := range ns {
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
				if _, err := ParseRecipeCond(n.When); err != nil {
					return fmt.Errorf("node %q: %w", n.NodeName(), err)
				}
			}
			if n.Else != "" && !set[n.Else] && !global[n.Else] {
				return fmt.Errorf("node %q: else %q is not made", n.NodeName(), n.Else)
			}
			for _, o := range n.Out {
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

// walk calls f on every op node, in order.
func (r *Recipe) walk(f func(n *RecipeNode)) {
	for i := range r.Nodes {
		if r.Nodes[i].Each == nil {
			f(&r.Nodes[i])
			continue
		}
		for j := range r.Nodes[i].Each {
			f(&r.Nodes[i].Each[j])
		}
	}
}

// roleKinds lists the roles of the recipe's nodes and their kinds.
func (r *Recipe) roleKinds() map[string]RoleKind {
	out := map[string]RoleKind{}
	r.walk(func(n *RecipeNode) {
		switch {
		case n.Role == "":
		case n.Op == "linear":
			out[n.Role] = RoleLinear
		case n.Op == "norm":
			out[n.Role] = RoleNorm
		}
	})
	return out
}

// roleSpecs lists the recipe's roles with their kinds and whether a block
// must have them.
func (r *Recipe) roleSpecs() map[string]roleSpec {
	out := map[string]roleSpec{}
	for name, k := range r.roleKinds() {
		out[name] = roleSpec{kind: k, required: !slices.Contains(r.Optional, name)}
	}
	return out
}

// HasRole reports whether a node of the recipe binds role.
func (r *Recipe) HasRole(role string) bool {
	_, ok := r.roleKinds()[role]
	return ok
}

// Required reports whether a block of the recipe must have role.
func (r *Recipe) Required(role string) bool {
	return r.HasRole(role) && !slices.Contains(r.Optional, role)
}

// RolePrefix is the prefix of a weight set's roles: "<stream>." when each
// stream has its own weights, else "".
func (r *Recipe) RolePrefix(stream string) string {
	if r.Sets == SetsStreams {
		return stream + "."
	}
	return ""
}

// producer is the first node that makes value v (alternatives under When
// make the same value; the first stands for them).
func (r *Recipe) producer(v string) *RecipeNode {
	var out *RecipeNode
	r.walk(func(n *RecipeNode) {
		if out == nil && slices.Contains(n.Out, v) {
			out = n
		}
	})
	return out
}

// Chunks is the number of pieces the result of role's linear is chunked
// into (0: it is not chunked).
func (r *Recipe) Chunks(role string) int {
	var lin *RecipeNode
	r.walk(func(n *RecipeNode) {
		if n.Op == "linear" && n.Role == role && lin == nil {
			lin = n
		}
	})
	if lin == nil {
		return 0
	}
	k := 0
	r.walk(func(n *RecipeNode) {
		if n.Op == "chunk" && len(n.In) > 0 && slices.Contains(lin.Out, n.In[0]) {
			k = len(n.Out)
		}
	})
	return k
}

// FeedingNorm is the role of the norm whose result reaches role's linear
// through elementwise ops (a modulation): "" when none does.
func (r *Recipe) FeedingNorm(role string) string {
	var lin *RecipeNode
	r.walk(func(n *RecipeNode) {
		if n.Op == "linear" && n.Role == role && lin == nil {
			lin = n
		}
	})
	if lin == nil || len(lin.In) == 0 {
		return ""
	}
	for n := r.producer(lin.In[0]); n != nil && len(n.In) > 0; n = r.producer(n.In[0]) {
		switch n.Op {
		case "norm":
			return n.Role
		case "modulate", "act":
		default:
			return ""
		}
	}
	return ""
}

// FusedOut reports whether role's linear reads a concat (the out
// projection of attention and MLP side by side).
func (r *Recipe) FusedOut(role string) bool {
	var lin *RecipeNode
	r.walk(func(n *RecipeNode) {
		if n.Op == "linear" && n.Role == role && lin == nil {
			lin = n
		}
	})
	if lin == nil || len(lin.In) == 0 {
		return false
	}
	p := r.producer(lin.In[0])
	return p != nil && p.Op == "concat"
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
// RoPE tables for "$cos"), "f" or "!f" (a boolean factor), "f == x" or
// "f != x" (an enum factor), factors read at the block's address.
type RecipeCond struct {
	Value  string
	Factor string
	Op     string // "", "!", "==", "!="
	Arg    string
}

// ParseRecipeCond reads a condition.
func ParseRecipeCond(s string) (RecipeCond, error) {
	if v, ok := strings.CutPrefix(s, "$"); ok {
		return RecipeCond{Value: v}, nil
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
