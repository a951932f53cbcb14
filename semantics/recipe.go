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
	// Taps names, for a stage (Stages), the value its boundary's output
	// ports hold, by port role ("out"), where that is not Out.
	Taps map[string]string `json:"taps,omitempty"`
}

// RecipeNode is one op of a recipe, or (Each) a run of ops done once per
// weight set, in joint order.
type RecipeNode struct {
	Each []RecipeNode `json:"each,omitempty"`
	// Use splices in a part (recipes/parts/<use>.json), its in and out
	// bound to this node's, in order; the registry's recipes hold no Use.
	Use string `json:"use,omitempty"`
	Op  string `json:"op,omitempty"`
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

// RecipeGiven are the values a recipe reads without making them: the
// conditioning vector and the RoPE tables (absent where the model has
// none).
var RecipeGiven = []string{"cond", "cos", "sin"}

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

// recipePart is a run of nodes several recipes share (attention, MLP),
// written once: its values other than In, Out and the given ones (cond,
// cos, sin) are its own.
type recipePart struct {
	Part     string       `json:"part"`
	Doc      string       `json:"doc"`
	In       []string     `json:"in"`
	Out      []string     `json:"out"`
	Optional []string     `json:"optional"`
	Nodes    []RecipeNode `json:"nodes"`
}

//go:embed recipes/*.json recipes/parts/*.json recipes/stages/*.json
var recipeFiles embed.FS

// recipes is the registry of block kinds, keyed by kind; stages the
// recipes of the model's other parts (the final stage), keyed by name.
var recipes, stages = mustLoadRecipes()

func mustLoadRecipes() (map[string]*Recipe, map[string]*Recipe) {
	out, err := loadRecipes("recipes")
	if err != nil {
		panic(err)
	}
	st, err := loadRecipes("recipes/stages")
	if err != nil {
		panic(err)
	}
	for name, r := range st {
		if len(r.Nodes) != 1 || r.Nodes[0].Each == nil {
			panic(fmt.Sprintf("semantics: recipes/stages/%s.json: a stage is one run of nodes over its one set (each)", name))
		}
		for port, v := range r.Taps {
			if !slices.ContainsFunc(r.Nodes[0].Each, func(n RecipeNode) bool { return slices.Contains(n.Out, v) || n.Else == v }) && v != r.In {
				panic(fmt.Sprintf("semantics: recipes/stages/%s.json: taps.%s: %q is not made", name, port, v))
			}
		}
	}
	return out, st
}

func loadRecipes(dir string) (map[string]*Recipe, error) {
	parts := map[string]*recipePart{}
	if err := readRecipeDir("recipes/parts", func(file, name string, dec *json.Decoder) error {
		p := &recipePart{}
		if err := dec.Decode(p); err != nil {
			return err
		}
		if p.Part != name {
			return fmt.Errorf("part %q is not the file's name", p.Part)
		}
		parts[p.Part] = p
		return nil
	}); err != nil {
		return nil, err
	}
	out := map[string]*Recipe{}
	err := readRecipeDir(dir, func(file, name string, dec *json.Decoder) error {
		r := &Recipe{}
		if err := dec.Decode(r); err != nil {
			return err
		}
		if r.Kind != name {
			return fmt.Errorf("kind %q is not the file's name", r.Kind)
		}
		var err error
		if r.Nodes, err = r.splice(r.Nodes, false, parts); err != nil {
			return err
		}
		if err := r.check(); err != nil {
			return err
		}
		out[r.Kind] = r
		return nil
	})
	return out, err
}

// readRecipeDir decodes each JSON file of dir (strictly: an unknown field
// is an error), named by the file's base name.
func readRecipeDir(dir string, decode func(file, name string, dec *json.Decoder) error) error {
	names, err := recipeFiles.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok {
			continue
		}
		file := path.Join(dir, e.Name())
		b, err := recipeFiles.ReadFile(file)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := decode(file, name, dec); err != nil {
			return fmt.Errorf("semantics: %s: %w", file, err)
		}
	}
	return nil
}

// splice replaces each Use node by its part's nodes, the part's values
// renamed: in and out to the use's, its own to "<part>.<name>". A part
// used inside each must be ops only.
func (r *Recipe) splice(ns []RecipeNode, each bool, parts map[string]*recipePart) ([]RecipeNode, error) {
	var out []RecipeNode
	for _, n := range ns {
		if n.Each != nil {
			var err error
			if n.Each, err = r.splice(n.Each, true, parts); err != nil {
				return nil, err
			}
			out = append(out, n)
			continue
		}
		if n.Use == "" {
			out = append(out, n)
			continue
		}
		p, ok := parts[n.Use]
		if !ok {
			return nil, fmt.Errorf("no part %q", n.Use)
		}
		if len(n.In) != len(p.In) || len(n.Out) != len(p.Out) {
			return nil, fmt.Errorf("part %s takes %d values and makes %d; the use gives %d and names %d", p.Part, len(p.In), len(p.Out), len(n.In), len(n.Out))
		}
		rename := func(v string) string {
			if i := slices.Index(p.In, v); i >= 0 {
				return n.In[i]
			}
			if i := slices.Index(p.Out, v); i >= 0 {
				return n.Out[i]
			}
			if v == "" || slices.Contains(RecipeGiven, v) {
				return v
			}
			return p.Part + "." + v
		}
		var copyNode func(pn RecipeNode) (RecipeNode, error)
		copyNode = func(pn RecipeNode) (RecipeNode, error) {
			if pn.Use != "" || pn.Each != nil && each {
				return pn, fmt.Errorf("part %s: a part used inside each holds ops only, and no part uses another", p.Part)
			}
			c := pn
			c.In, c.Out, c.Else, c.Each = nil, nil, rename(pn.Else), nil
			for _, v := range pn.In {
				c.In = append(c.In, rename(v))
			}
			for _, v := range pn.Out {
				c.Out = append(c.Out, rename(v))
			}
			for _, e := range pn.Each {
				ce, err := copyNode(e)
				if err != nil {
					return c, err
				}
				c.Each = append(c.Each, ce)
			}
			return c, nil
		}
		for _, pn := range p.Nodes {
			c, err := copyNode(pn)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		for _, o := range p.Optional {
			if !slices.Contains(r.Optional, o) {
				r.Optional = append(r.Optional, o)
			}
		}
	}
	return out, nil
}

// LookupRecipe returns the recipe of a block kind.
func LookupRecipe(kind string) (*Recipe, bool) {
	r, ok := recipes[kind]
	return r, ok
}

// LookupStage returns the recipe of a part of the model outside the
// blocks ("final").
func LookupStage(name string) (*Recipe, bool) {
	r, ok := stages[name]
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
