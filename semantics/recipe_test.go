package semantics

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The facts the structure reader and validation take from the recipes,
// read back from the files.
func TestRecipeFacts(t *testing.T) {
	if got, want := BlockKinds(), []string{"decoder", "dual_stream", "single_stream", "single_stream_parallel"}; !slices.Equal(got, want) {
		t.Fatalf("BlockKinds = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		kind              string
		sets              string
		chunks            int
		attnNorm, mlpNorm string
		fused             bool
		required          []string
		optional          []string
	}{
		{"dual_stream", SetsStreams, 6, "norm1", "norm2", false, []string{"modulation", "q", "k", "v", "out", "mlp_in", "mlp_out"}, []string{"norm1", "q_norm", "k_norm", "norm2", "mlp_gate"}},
		{"single_stream", SetsJoined, 6, "norm1", "norm2", false, []string{"modulation", "q", "k", "v", "out", "mlp_in", "mlp_out"}, []string{"norm1", "q_norm", "k_norm", "norm2", "mlp_gate"}},
		{"single_stream_parallel", SetsJoined, 3, "norm", "norm", true, []string{"modulation", "q", "k", "v", "out", "mlp_in"}, []string{"norm", "q_norm", "k_norm", "mlp_gate"}},
		{"decoder", SetsJoined, 0, "attn_norm", "mlp_norm", false, []string{"attn_norm", "q", "k", "v", "out", "mlp_norm", "mlp_in", "mlp_out"}, []string{"q_norm", "k_norm", "mlp_gate"}},
	} {
		r, ok := LookupRecipe(tc.kind)
		if !ok {
			t.Fatalf("%s: no recipe", tc.kind)
		}
		if r.Sets != tc.sets || r.Chunks("modulation") != tc.chunks || r.FusedOut("out") != tc.fused {
			t.Errorf("%s: sets %s, %d chunks, fused out %v; want %s, %d, %v", tc.kind, r.Sets, r.Chunks("modulation"), r.FusedOut("out"), tc.sets, tc.chunks, tc.fused)
		}
		if a, m := r.FeedingNorm("q"), r.FeedingNorm("mlp_in"); a != tc.attnNorm || m != tc.mlpNorm {
			t.Errorf("%s: norms feeding q, mlp_in = %q, %q; want %q, %q", tc.kind, a, m, tc.attnNorm, tc.mlpNorm)
		}
		specs := blockRoleSpecs(tc.kind, []string{"image", "text"})
		if len(specs) != r.sets()*(len(tc.required)+len(tc.optional)) {
			t.Errorf("%s: %d roles, want %d", tc.kind, len(specs), r.sets()*(len(tc.required)+len(tc.optional)))
		}
		for _, role := range append(slices.Clone(tc.required), tc.optional...) {
			name := r.RolePrefix("image") + role
			s, ok := specs[name]
			if !ok || s.required != slices.Contains(tc.required, role) {
				t.Errorf("%s: role %s = %+v (present %v), want required %v", tc.kind, name, s, ok, slices.Contains(tc.required, role))
			}
		}
	}
}

// sets is how many weight sets a recipe has in a two-stream model.
func (r *Recipe) sets() int {
	if r.Sets == SetsStreams {
		return 2
	}
	return 1
}

// A malformed recipe is refused with the node and the problem.
func TestRecipeRefused(t *testing.T) {
	base := `{"kind": "k", "sets": "joined", "in": "x", "out": "y", "nodes": [{"each": [%s]}]}`
	for _, tc := range []struct{ nodes, want string }{
		{`{"op": "conv", "name": "a", "in": ["x"], "out": ["y"]}`, `op "conv"`},
		{`{"op": "add", "name": "a", "in": ["x", "z"], "out": ["y"]}`, `reads "z" before it is made`},
		{`{"op": "act", "name": "a", "in": ["x"], "out": ["y"], "attrs": {"act": "gate_kind"}}`, `"gate_kind" is no factor`},
		{`{"op": "act", "name": "a", "in": ["x"], "out": ["y"], "attrs": {"act": "block.width"}}`, `"block.width" is not one of`},
		{`{"op": "act", "name": "a", "in": ["x"], "out": ["y"], "when": "qk_norm"}`, `not a boolean factor`},
		{`{"op": "act", "name": "a", "in": ["x"], "out": ["y"], "when": "qk_norm == l1"}`, `"l1" is not a value of qk_norm`},
		{`{"op": "join", "name": "a", "in": ["x"], "out": ["y"]}`, `outside each`},
		{`{"op": "add", "role": "r", "in": ["x", "x"], "out": ["y"]}`, `no parameters to bind`},
		{`{"op": "add", "name": "a", "in": ["x", "x"], "out": ["z"]}`, `out "y" is not made`},
		{`{"op": "add", "name": "a", "in": ["x", "x"], "out": ["y"]}, {"op": "add", "name": "b", "in": ["y", "x"], "out": ["y"]}`, `node "b" makes "y", which node "a" made`},
		{`{"op": "chunk", "name": "a", "in": ["x"], "out": ["y", "z"], "attrs": {"order": "modulation_order"}}`, `groups of that factor's chunks`},
		{`{"op": "act", "name": "a", "in": ["x"], "out": ["y"], "when": "@norm && qk_norm"}`, `not a boolean factor`},
		{`{"op": "act", "name": "a", "in": ["x"], "out": ["y"], "when": "!@norm && nofactor"}`, `"nofactor" is no factor`},
	} {
		r := &Recipe{}
		if err := json.Unmarshal([]byte(strings.Replace(base, "%s", tc.nodes, 1)), r); err != nil {
			t.Fatal(err)
		}
		err := r.check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %s", tc.nodes, err, tc.want)
		}
	}
}

// A part is spliced with its values renamed: in and out to the use's, its
// own under its name; a part with each is refused inside each.
func TestRecipeSplice(t *testing.T) {
	parts := map[string]*recipePart{
		"p": {Part: "p", In: []string{"x"}, Out: []string{"y"}, Optional: []string{"n"}, Nodes: []RecipeNode{
			{Op: "norm", Role: "n", In: []string{"x"}, Out: []string{"t"}},
			{Op: "act", Name: "a", In: []string{"t"}, Out: []string{"y"}, When: "mlp_glu", Else: "t"},
		}},
		"e": {Part: "e", In: []string{"x"}, Out: []string{"y"}, Nodes: []RecipeNode{{Each: []RecipeNode{{Op: "add", Name: "a", In: []string{"x", "cond"}, Out: []string{"y"}}}}}},
	}
	r := &Recipe{}
	got, err := r.splice([]RecipeNode{{Each: []RecipeNode{{Use: "p", In: []string{"h"}, Out: []string{"m"}}}}}, false, parts)
	if err != nil {
		t.Fatal(err)
	}
	n := got[0].Each
	if len(n) != 2 || !slices.Equal(n[0].In, []string{"h"}) || !slices.Equal(n[0].Out, []string{"p.t"}) || !slices.Equal(n[1].Out, []string{"m"}) || n[1].Else != "p.t" || !slices.Equal(r.Optional, []string{"n"}) {
		t.Errorf("spliced %+v, optional %v", got, r.Optional)
	}
	for _, tc := range []struct {
		use  RecipeNode
		want string
	}{
		{RecipeNode{Each: []RecipeNode{{Use: "e", In: []string{"h"}, Out: []string{"m"}}}}, "holds ops only"},
		{RecipeNode{Use: "q", In: []string{"h"}, Out: []string{"m"}}, `no part "q"`},
		{RecipeNode{Use: "p", In: []string{"h", "h"}, Out: []string{"m"}}, "takes 1 values"},
	} {
		if _, err := (&Recipe{}).splice([]RecipeNode{tc.use}, false, parts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want it to mention %s", tc.use, err, tc.want)
		}
	}
}

// Conditions on the roles and conjunctions read as the builder reads them.
func TestRecipeConds(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want []RecipeCond
	}{
		{"@modulation", []RecipeCond{{Role: "modulation"}}},
		{"!@modulation && @norm", []RecipeCond{{Role: "modulation", Op: "!"}, {Role: "norm"}}},
		{"@modulation && modulation_act != identity", []RecipeCond{{Role: "modulation"}, {Factor: "modulation_act", Op: "!=", Arg: "identity"}}},
		{"$cos", []RecipeCond{{Value: "cos"}}},
	} {
		got, err := ParseRecipeConds(tc.s)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.s, got, err, tc.want)
		}
	}
}

// The final stage is a recipe: its boundary output (taps.out) is the rows
// before the head, and each part depends on the structure's roles.
func TestStageRecipes(t *testing.T) {
	r, ok := LookupStage("final")
	if !ok {
		t.Fatal("no final stage recipe")
	}
	if r.Taps["out"] != "h" || r.Out != "y" || len(r.Nodes) != 1 {
		t.Errorf("final: taps %v, out %q, %d top nodes", r.Taps, r.Out, len(r.Nodes))
	}
	var ops []string
	for _, n := range r.Nodes[0].Each {
		ops = append(ops, n.Op+":"+n.NodeName()+"?"+n.When)
	}
	want := []string{"norm:norm?!@modulation && @norm", "act:modulation_act?@modulation && modulation_act != identity",
		"linear:modulation?@modulation", "chunk:chunks?@modulation", "norm:norm?@modulation", "modulate:modulate?@modulation", "linear:head?@head"}
	if !slices.Equal(ops, want) {
		t.Errorf("final nodes %v, want %v", ops, want)
	}
	if _, ok := LookupRecipe("final"); ok {
		t.Error("the final stage is listed as a block kind")
	}
}
