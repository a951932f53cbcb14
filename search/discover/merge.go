package discover

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/semantics"
)

// entry is one factor as one search (or the structure) found it at one
// address.
type entry struct {
	addr     string // the address it covers
	from     string // where it was measured, when not addr ("blocks.2" for joint_order)
	f        semantics.Factor
	declared bool // forced by the structure
	und      bool // no candidate reproduced its boundary
}

func (e entry) origin() string {
	if e.from != "" {
		return e.from
	}
	return e.addr
}

// scoreOf is the entry's score for value v (+Inf when v was not tried).
func (e entry) scoreOf(v any) float64 {
	for _, c := range e.f.Candidates {
		if sameValue(c.Value, v) {
			return c.Score
		}
	}
	return math.Inf(1)
}

// marginAt is the entry's margin taken against v: the best other
// candidate's error over v's (search's convention: +Inf for an exact v
// beaten by anyone, 1 without a runner-up or when both are exact).
func (e entry) marginAt(v any) float64 {
	if len(e.f.Candidates) < 2 {
		return 1
	}
	sv, other := e.scoreOf(v), math.Inf(1)
	for _, c := range e.f.Candidates {
		if !sameValue(c.Value, v) {
			other = math.Min(other, c.Score)
		}
	}
	switch {
	case sv == 0 && other == 0:
		return 1
	case sv == 0:
		return math.Inf(1)
	case other >= math.MaxFloat64 && sv >= math.MaxFloat64:
		return 1
	}
	return other / sv
}

func sameValue(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// reconcile finds the value a set of entries agree on: every decisive one
// (declared ones count) chose it, and every other one scores it within
// the decisive margin of its own winner. Without a decisive entry, the
// value with the smallest sum of score / winner's score is tried.
func reconcile(es []entry, o search.Options) (any, bool) {
	m := o.DecisiveMargin
	if m == 0 {
		m = 2
	}
	var v any
	found := false
	for _, e := range es {
		if (e.declared || e.f.Decisive) && !e.und {
			if found && !sameValue(v, e.f.Value) {
				return nil, false
			}
			v, found = e.f.Value, true
		}
	}
	if !found {
		// The value closest to every entry's winner; of ties (to 1 part
		// in 10⁹), the first tried.
		sums := make([]float64, len(es[0].f.Candidates))
		best := math.Inf(1)
		for i, c := range es[0].f.Candidates {
			for _, e := range es {
				w := e.scoreOf(e.f.Value)
				r := e.scoreOf(c.Value) / math.Max(w, 1e-300)
				if e.scoreOf(c.Value) == w {
					r = 1
				}
				sums[i] += r
			}
			best = math.Min(best, sums[i])
		}
		v = es[0].f.Value
		for i, c := range es[0].f.Candidates {
			if sums[i] <= best*(1+1e-9) {
				v = c.Value
				break
			}
		}
	}
	for _, e := range es {
		if sameValue(e.f.Value, v) {
			continue
		}
		if e.declared {
			return nil, false
		}
		if w, s := e.scoreOf(e.f.Value), e.scoreOf(v); !(s <= m*w) {
			return nil, false
		}
	}
	return v, true
}

// combine writes the entries, agreed on v, as one factor of scope: the
// smallest margin (taken against v) and that entry's candidates and
// boundary, with a note saying so.
func combine(es []entry, v any, scope string, o search.Options) semantics.Factor {
	m := o.DecisiveMargin
	if m == 0 {
		m = 2
	}
	var measured []entry
	und := false
	for _, e := range es {
		if !e.declared {
			measured = append(measured, e)
		}
		und = und || e.und
	}
	if len(measured) == 0 {
		f := es[0].f
		f.Scope, f.Value = scope, v
		if len(es) > 1 {
			f.Evidence.Note = fmt.Sprintf("%s (%s)", f.Evidence.Note, list(origins(es)))
		}
		return f
	}
	weak := measured[0]
	for _, e := range measured[1:] {
		if e.marginAt(v) < weak.marginAt(v) {
			weak = e
		}
	}
	f := weak.f
	f.Scope, f.Value = scope, v
	f.Margin = semantics.Margin(weak.marginAt(v))
	f.Decisive = float64(f.Margin) >= m && !und
	var notes []string
	if len(es) > 1 {
		notes = append(notes, fmt.Sprintf("merged over %d measurements (%s), which agree on %v; margin and candidates are the smallest, at %s",
			len(es), list(origins(es)), v, weak.origin()))
	}
	switch {
	case len(f.Candidates) == 1:
		f.Margin, f.Decisive = 1, false
		notes = append(notes, fmt.Sprintf("one candidate tried; it reproduces %s to %s %.3g",
			f.Evidence.Boundary, f.Evidence.Metric, f.Candidates[0].Score))
	case und:
		notes = append(notes, "no candidate reproduces the boundary (see undetermined)")
	case !f.Decisive:
		notes = append(notes, fmt.Sprintf("margin %.3g below %.3g: the trace does not tell the candidates apart", float64(f.Margin), m))
	}
	f.Evidence.Note = strings.Join(notes, "; ")
	return f
}

func origins(es []entry) []string {
	var out []string
	for _, e := range es {
		if o := e.origin(); !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// list shortens a list of addresses for a note.
func list(a []string) string {
	if len(a) > 6 {
		return strings.Join(a[:3], ", ") + fmt.Sprintf(", … (%d more), ", len(a)-4) + a[len(a)-1]
	}
	return strings.Join(a, ", ")
}

// addrGroup is the entries of one factor name at one address.
type addrGroup struct {
	addr    string
	es      []entry
	value   any
	agree   bool
	claimed bool
}

// merge turns entries into the document's factors (see the package doc)
// and adds an undetermined entry wherever measurements of one address
// disagree.
func merge(entries []entry, st *semantics.Structure, o search.Options, und []semantics.Undetermined) ([]semantics.Factor, []semantics.Undetermined) {
	var names []string
	byName := map[string][]*addrGroup{}
	for _, e := range entries {
		if !slices.Contains(names, e.f.Name) {
			names = append(names, e.f.Name)
		}
		gs := byName[e.f.Name]
		i := slices.IndexFunc(gs, func(g *addrGroup) bool { return g.addr == e.addr })
		if i < 0 {
			gs = append(gs, &addrGroup{addr: e.addr})
			i = len(gs) - 1
			byName[e.f.Name] = gs
		}
		gs[i].es = append(gs[i].es, e)
	}
	var out []semantics.Factor
	for _, name := range names {
		gs := byName[name]
		for _, g := range gs {
			g.value, g.agree = reconcile(g.es, o)
			if !g.agree {
				best := g.es[0]
				var says []string
				for _, e := range g.es {
					says = append(says, fmt.Sprintf("%s: %v (margin %.3g)", e.origin(), e.f.Value, float64(e.f.Margin)))
					if float64(e.f.Margin) > float64(best.f.Margin) {
						best = e
					}
				}
				g.value = best.f.Value
				und = append(und, semantics.Undetermined{Name: name, Scope: g.addr, Reason: fmt.Sprintf(
					"its measurements disagree (%s); the document keeps %v, the one of the largest margin", strings.Join(says, "; "), g.value)})
			}
		}
		for _, glob := range globs(gs) {
			var sel []*addrGroup
			ok := true
			for _, g := range gs {
				if semantics.MatchScope(glob, g.addr) {
					if g.claimed || !g.agree && glob != g.addr {
						ok = false
						break
					}
					sel = append(sel, g)
				}
			}
			if !ok || len(sel) == 0 {
				continue
			}
			var es []entry
			for _, g := range sel {
				es = append(es, g.es...)
			}
			v, agree := sel[0].value, true
			if len(sel) > 1 {
				v, agree = reconcile(es, o)
			}
			if !agree {
				continue
			}
			f := combine(es, v, glob, o)
			if len(sel) == 1 && !sel[0].agree {
				f.Decisive = false
				f.Evidence.Note = fmt.Sprintf("its %d measurements (%s) disagree (see undetermined); margin and candidates are the smallest against %v",
					len(es), list(origins(es)), v)
			}
			for _, g := range sel {
				g.claimed = true
			}
			out = append(out, f)
		}
	}
	order(out, st)
	return out, und
}

// placed keeps the entries whose address the structure has. One it lacks
// (a block-level reading of a model-level part the structure does not
// have: rope_layout at positions in a model without RoPE tables) is not
// written: where the reading is that the part is absent (rope_layout
// none) the two agree and nothing is said; otherwise the reading is
// listed as undetermined.
func placed(entries []entry, st *semantics.Structure) ([]entry, []semantics.Undetermined) {
	addrs := map[string]bool{}
	for _, a := range st.Addresses() {
		addrs[a] = true
	}
	var kept []entry
	var und []semantics.Undetermined
	said := map[string]bool{}
	for _, e := range entries {
		if addrs[e.addr] {
			kept = append(kept, e)
			continue
		}
		if e.f.Name == "rope_layout" && fmt.Sprint(e.f.Value) == "none" || said[e.f.Name+" "+e.addr] {
			continue
		}
		said[e.f.Name+" "+e.addr] = true
		und = append(und, semantics.Undetermined{Name: e.f.Name, Scope: e.addr, Reason: fmt.Sprintf(
			"%s reads %v, but the structure has no %s: not written", e.origin(), e.f.Value, e.addr)})
	}
	return kept, und
}

// globs lists the scopes to try for a factor's address groups, coarsest
// first: "*" when they span more than one component, "blocks.*.<suffix>"
// from the shortest suffix, "blocks.*", then each literal address.
func globs(gs []*addrGroup) []string {
	var out []string
	add := func(g string) {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	comps := map[string]bool{}
	for _, g := range gs {
		comps[strings.SplitN(g.addr, ".", 2)[0]] = true
	}
	if len(comps) > 1 {
		add("*")
	}
	for depth := 1; depth < 8; depth++ {
		for _, g := range gs {
			parts := strings.Split(g.addr, ".")
			if len(parts) < 2 || parts[0] != "blocks" {
				continue
			}
			rest := parts[2:]
			switch {
			case len(rest) == 0 && depth == 1:
				add("blocks.*")
			case len(rest) >= depth:
				add("blocks.*." + strings.Join(rest[len(rest)-depth:], "."))
			}
		}
	}
	for _, g := range gs {
		add(g.addr)
	}
	return out
}

// order sorts factors by the catalogue, then by the first address of the
// structure each scope covers.
func order(fs []semantics.Factor, st *semantics.Structure) {
	rank := map[string]int{}
	for i, s := range semantics.Catalogue() {
		rank[s.Name] = i
	}
	addrs := st.Addresses()
	first := func(scope string) int {
		for i, a := range addrs {
			if semantics.MatchScope(scope, a) {
				return i
			}
		}
		return len(addrs)
	}
	slices.SortStableFunc(fs, func(a, b semantics.Factor) int {
		if rank[a.Name] != rank[b.Name] {
			return rank[a.Name] - rank[b.Name]
		}
		return first(a.Scope) - first(b.Scope)
	})
}
