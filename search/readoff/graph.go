package readoff

import (
	"strings"

	"github.com/zflow/zflow/semantics"
)

// graph indexes a program: the node making each value, the nodes reading
// it, and the values by name.
type graph struct {
	pg    *semantics.Program
	prod  map[string]*semantics.ProgramNode
	users map[string][]*semantics.ProgramNode
	vals  map[string]*semantics.ProgramValue
}

func newGraph(pg *semantics.Program) *graph {
	g := &graph{pg: pg, prod: map[string]*semantics.ProgramNode{}, users: map[string][]*semantics.ProgramNode{}, vals: map[string]*semantics.ProgramValue{}}
	for i := range pg.Values {
		g.vals[pg.Values[i].Name] = &pg.Values[i]
	}
	for i := range pg.Nodes {
		n := &pg.Nodes[i]
		for _, o := range n.Out {
			g.prod[o] = n
		}
		for _, in := range n.In {
			if in != "" {
				g.users[in] = append(g.users[in], n)
			}
		}
	}
	return g
}

// layoutOps move, repeat or retype a value's elements without computing
// new ones.
var layoutOps = map[string]bool{"reshape": true, "permute": true, "cast": true, "patchify": true, "unpatchify": true, "round": true, "repeat": true}

// source follows a value back through layout ops and joins of pieces
// (concat: its first piece) to the node that made its numbers; nil for a
// program value (a weight, an input, a constant).
func (g *graph) source(name string) *semantics.ProgramNode {
	for range len(g.pg.Nodes) {
		n := g.prod[name]
		if n == nil || len(n.In) == 0 {
			return n
		}
		if !layoutOps[n.Op] && n.Op != "concat" {
			return n
		}
		name = n.In[0]
	}
	return nil
}

// readers are the nodes reading a value, seen through layout ops.
func (g *graph) readers(name string) []*semantics.ProgramNode {
	var out []*semantics.ProgramNode
	seen := map[string]bool{}
	var walk func(string)
	walk = func(v string) {
		if seen[v] {
			return
		}
		seen[v] = true
		for _, u := range g.users[v] {
			if layoutOps[u.Op] && len(u.Out) > 0 {
				walk(u.Out[0])
				continue
			}
			out = append(out, u)
		}
	}
	walk(name)
	return out
}

// scalar is the one number a constant holds.
func (g *graph) scalar(name string) (float64, bool) {
	v := g.vals[name]
	if v == nil || v.Kind != "const" || len(v.Data) != 1 {
		return 0, false
	}
	return float64(v.Data[0]), true
}

// rows is how many rows (all axes but the last) a value holds; 0 where
// its shape is not known.
func (g *graph) rows(name string) int {
	v := g.vals[name]
	if v == nil || len(v.Shape) < 2 {
		return 0
	}
	n := 1
	for _, d := range v.Shape[:len(v.Shape)-1] {
		n *= d
	}
	return n
}

// scope is the module a node computes for: its role without the node's
// own last part ("blocks.0.attn.to_q.linear3" → "blocks.0.attn.to_q").
func scope(n *semantics.ProgramNode) string {
	r := n.Role
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] == '.' {
			return r[:i]
		}
	}
	return r
}

// modelArgument: the value is an argument of the model call itself (a
// tap on a module path of one part, the traced call's root).
func (g *graph) modelArgument(name string) bool {
	v := g.vals[name]
	if v == nil {
		return false
	}
	for _, t := range v.Taps {
		if !strings.Contains(t.Module, ".") && !strings.HasPrefix(t.Port, "out") {
			return true
		}
	}
	return false
}

// numel is how many elements a value holds (0: shape not known).
func (g *graph) numel(name string) int {
	v := g.vals[name]
	if v == nil || len(v.Shape) == 0 {
		return 0
	}
	n := 1
	for _, d := range v.Shape {
		n *= d
	}
	return n
}

// whole: a slice that keeps all of its axis.
func (g *graph) whole(p *semantics.ProgramNode) bool {
	v := g.vals[p.In[0]]
	if v == nil || p.Attrs.Start != 0 {
		return false
	}
	ax := p.Attrs.Axis
	if ax < 0 {
		ax += len(v.Shape)
	}
	return ax >= 0 && ax < len(v.Shape) && p.Attrs.End == v.Shape[ax]
}

// stored reports whether a value is, through layout ops, a weight or a
// constant of the program (its declared kind: no node computes it and it
// is no input).
func (g *graph) stored(name string) bool {
	for range len(g.pg.Nodes) + 1 {
		n := g.prod[name]
		if n == nil || len(n.In) == 0 {
			v := g.vals[name]
			return v != nil && (v.Kind == "weight" || v.Kind == "const")
		}
		if !layoutOps[n.Op] {
			return false
		}
		name = n.In[0]
	}
	return false
}
