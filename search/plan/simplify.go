package plan

import (
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// simplify drops the rules whose removal changes no unit's spec, trying
// them in order. A unit's spec is its first matching rule's (SpecFor), so
// dropping rule i changes only the units it decides now, and each of
// those then takes its next matching rule's spec (or the activations'
// default): the rule goes where that is the spec it gave. Which units a
// rule's scope matches is kept per scope (scopeUnits): the search builds a
// plan for every candidate it scores, from the same few scopes.
func (ds *discovery) simplify(p semantics.Precision) []semantics.PrecisionRule {
	rules := p.Rules
	specs := make([]exec.Spec, len(rules)+1) // the last: no rule matches
	for i, r := range rules {
		r.Role = ""
		specs[i], _ = program.SpecFor(&semantics.Precision{Activations: p.Activations, Rules: []semantics.PrecisionRule{r}}, r.Op, "")
	}
	none := len(rules)
	specs[none], _ = program.SpecFor(&semantics.Precision{Activations: p.Activations}, "", "")
	// matches[u]: the rules that match unit u, in order; at[u]: the one
	// that decides it now (every earlier one dropped)
	matches := make([][]int, len(ds.units))
	deciding := make([][]int, len(rules)) // the units each rule decides now
	for i, r := range rules {
		m := ds.scopeUnits(r.Role)
		for u, unit := range ds.units {
			if unit.Op == r.Op && m.has(u) {
				if len(matches[u]) == 0 {
					deciding[i] = append(deciding[i], u)
				}
				matches[u] = append(matches[u], i)
			}
		}
	}
	at := make([]int, len(ds.units))
	next := func(u int) int { // the rule that decides u once its own goes
		if at[u]+1 < len(matches[u]) {
			return matches[u][at[u]+1]
		}
		return none
	}
	kept := make([]semantics.PrecisionRule, 0, len(rules))
	for i, r := range rules {
		drop := true
		for _, u := range deciding[i] {
			if specs[next(u)] != specs[i] {
				drop = false
				break
			}
		}
		if !drop {
			kept = append(kept, r)
			continue
		}
		for _, u := range deciding[i] {
			if j := next(u); j != none {
				at[u]++
				deciding[j] = append(deciding[j], u)
			}
		}
	}
	return kept
}

// scopeUnits is the set of units (by their index in ds.units) whose role
// scope matches ("" matches every unit).
func (ds *discovery) scopeUnits(scope string) bits {
	if m, ok := ds.scopes[scope]; ok {
		return m
	}
	var m bits
	for u, unit := range ds.units {
		if scope == "" || semantics.MatchScope(scope, unit.Role) {
			m.set(u)
		}
	}
	if ds.scopes == nil {
		ds.scopes = map[string]bits{}
	}
	ds.scopes[scope] = m
	return m
}
