package semantics

import (
	"slices"
)

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
	lin := r.linear(role)
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
	lin := r.linear(role)
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
	lin := r.linear(role)
	if lin == nil || len(lin.In) == 0 {
		return false
	}
	p := r.producer(lin.In[0])
	return p != nil && p.Op == "concat"
}

// linear is the linear node that binds role (nil: none does).
func (r *Recipe) linear(role string) *RecipeNode {
	var lin *RecipeNode
	r.walk(func(n *RecipeNode) {
		if n.Op == "linear" && n.Role == role && lin == nil {
			lin = n
		}
	})
	return lin
}
