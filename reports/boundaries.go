package reports

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/zflow/zflow/trace"
)

// Boundary is one captured tensor of a run: a call's argument or result,
// or one of the run's outputs. Diff pairs the boundaries of two traces by
// Key.
type Boundary struct {
	Key     string
	Scope   string // "pre", "s<step>", or "input"/"output" for the run's inputs and outputs
	Module  string // the call's module path; "" for inputs and outputs
	Ordinal int    // the call's ordinal within its scope
	Port    string // arg0, kw.hidden_states, out.0, ...; an input's or output's name
	Step    *int   // the call's sampler step; nil in "pre" and for outputs
}

// Selection narrows the boundaries of a trace. The zero Selection selects
// every boundary.
type Selection struct {
	Step   *int   // only calls of this step (the run's inputs and outputs are left out)
	Module string // only calls whose module path matches this glob (inputs and outputs are left out)
	Port   string // only ports (and inputs and outputs) whose name matches this glob
}

// String is the selection as the flags that make it.
func (s Selection) String() string {
	var parts []string
	if s.Step != nil {
		parts = append(parts, fmt.Sprintf("--step %d", *s.Step))
	}
	if s.Module != "" {
		parts = append(parts, fmt.Sprintf("--module %q", s.Module))
	}
	if s.Port != "" {
		parts = append(parts, fmt.Sprintf("--port %q", s.Port))
	}
	if len(parts) == 0 {
		return "(everything)"
	}
	return strings.Join(parts, " ")
}

// Validate checks the globs.
func (s Selection) Validate() error {
	for _, g := range []struct{ flag, glob string }{{"module", s.Module}, {"port", s.Port}} {
		if _, err := path.Match(g.glob, ""); err != nil {
			return fmt.Errorf("--%s %q: %w", g.flag, g.glob, err)
		}
	}
	return nil
}

// isResult reports whether a port name is a call's result ("out",
// "out.0", "out.sample") rather than an argument.
func isResult(port string) bool { return port == "out" || strings.HasPrefix(port, "out.") }

// Boundaries lists the selected boundaries of tr in execution order: the
// run's inputs by name; then, for the roots in entry order, each call's
// arguments when it is entered, its children's boundaries, and its results
// when it returns; then the run's outputs by name. A result therefore comes after everything computed to
// make it, so the first boundary that differs is where a difference
// starts, not the enclosing call's output. A key named by two ports is
// listed once, at its first place.
func Boundaries(tr *trace.Trace, sel Selection) ([]Boundary, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	if tr.Bare() {
		return bareBoundaries(tr, sel), nil
	}
	tree := tr.Tree()
	seen := map[string]bool{}
	var out []Boundary
	match := func(glob, s string) bool {
		ok, _ := path.Match(glob, s)
		return glob == "" || ok
	}
	add := func(b Boundary) {
		if !seen[b.Key] && match(sel.Port, b.Port) {
			seen[b.Key] = true
			out = append(out, b)
		}
	}
	whole := sel.Step == nil && sel.Module == ""
	if whole {
		for _, name := range slices.Sorted(maps.Keys(tr.Manifest.Inputs)) {
			add(Boundary{Key: tr.Manifest.Inputs[name], Scope: "input", Port: name})
		}
	}
	var visit func(id int)
	visit = func(id int) {
		c, ok := tree.Call(id)
		if !ok {
			return
		}
		selected := match(sel.Module, c.Module) && (sel.Step == nil || c.Step != nil && *c.Step == *sel.Step)
		scope := "pre"
		if c.Step != nil {
			scope = fmt.Sprintf("s%d", *c.Step)
		}
		ports := func(results bool) {
			if !selected {
				return
			}
			for _, p := range c.Tensors {
				if isResult(p.Name) == results {
					add(Boundary{Key: p.Key, Scope: scope, Module: c.Module, Ordinal: c.Ordinal, Port: p.Name, Step: c.Step})
				}
			}
		}
		ports(false)
		for _, child := range tree.Children(id) {
			visit(child)
		}
		ports(true)
	}
	for _, id := range tree.Roots() {
		visit(id)
	}
	if whole {
		for _, name := range slices.Sorted(maps.Keys(tr.Manifest.Outputs)) {
			add(Boundary{Key: tr.Manifest.Outputs[name], Scope: "output", Port: name})
		}
	}
	return out, nil
}

// Unpaired is a boundary that only one of the two traces has.
type Unpaired struct {
	Boundary
	Side   string // "ours" or "ref": the trace that has it
	Reason string // why it has no pair, when more is known than that the other side lacks the key
	// ShapeMismatch: the other side has a value here, of another shape
	// (zflow verify: the program's value), an error rather than a gap.
	ShapeMismatch bool
}

// PairBoundaries pairs two boundary lists by key. Paired boundaries come in
// the reference's order; unpaired ones list the reference's first (in its
// order), then ours'.
func PairBoundaries(ours, ref []Boundary) (paired []Boundary, unpaired []Unpaired) {
	inOurs := make(map[string]bool, len(ours))
	for _, b := range ours {
		inOurs[b.Key] = true
	}
	inRef := make(map[string]bool, len(ref))
	for _, b := range ref {
		inRef[b.Key] = true
		if inOurs[b.Key] {
			paired = append(paired, b)
		} else {
			unpaired = append(unpaired, Unpaired{Boundary: b, Side: "ref"})
		}
	}
	for _, b := range ours {
		if !inRef[b.Key] {
			unpaired = append(unpaired, Unpaired{Boundary: b, Side: "ours"})
		}
	}
	return paired, unpaired
}
