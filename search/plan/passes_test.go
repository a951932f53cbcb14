package plan

import (
	"context"
	"testing"
	"time"

	"github.com/zflow/zflow/semantics"
)

// TestPasses: the classes and roles are searched again from the plan a
// pass found while that pass kept per-role rules and left values inexact;
// a later pass is taken only where it is more exact, and then reports from
// the first pass's start.
func TestPasses(t *testing.T) {
	type out struct {
		exact int  // of 10 values
		roles bool // the pass kept a per-role rule
	}
	cases := []struct {
		name      string
		passes    []out // what each successive pass finds
		wantRuns  int
		wantExact int
	}{
		{"no roles: one pass", []out{{6, false}, {10, false}}, 1, 6},
		{"all exact: one pass", []out{{10, true}, {10, true}}, 1, 10},
		{"roles, the second pass more exact", []out{{6, true}, {9, false}, {10, false}}, 2, 9},
		{"roles each time: at most maxPasses", []out{{5, true}, {6, true}, {7, true}, {8, true}}, maxPasses, 7},
		{"a second pass no better is dropped", []out{{6, true}, {6, false}}, 2, 6},
		{"a second pass worse is dropped", []out{{6, true}, {4, false}}, 2, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			var starts []string
			pass := func(start semantics.Precision) (*Report, error) {
				o := c.passes[runs]
				runs++
				starts = append(starts, start.Activations)
				label := string(rune('a' + runs - 1))
				r := &Report{
					Before:        start,
					After:         semantics.Precision{Activations: label},
					AfterRecords:  []Record{{N: 10, Exact: o.exact}},
					BeforeRecords: []Record{{N: 10, Exact: runs}},
					Classes:       []ClassReport{{Class: "rope", Before: "start " + label, After: label, ExactBefore: float64(runs)}},
					Evaluations:   1,
				}
				if o.roles {
					r.Roles = []RoleReport{{Class: "linear"}}
				}
				return r, nil
			}
			rep, err := passes(semantics.Precision{Activations: "start"}, nil, pass)
			if err != nil {
				t.Fatal(err)
			}
			if runs != c.wantRuns {
				t.Errorf("passes run: %d, want %d", runs, c.wantRuns)
			}
			if got := exactValues(rep.AfterRecords); got != c.wantExact {
				t.Errorf("exact values of the plan taken: %d, want %d", got, c.wantExact)
			}
			if rep.Evaluations != runs {
				t.Errorf("evaluations: %d, want every pass's (%d)", rep.Evaluations, runs)
			}
			// every pass after the first starts from the plan before it
			for i := 1; i < len(starts); i++ {
				if want := string(rune('a' + i - 1)); starts[i] != want {
					t.Errorf("pass %d started from %q, want the plan of pass %d (%q)", i+1, starts[i], i, want)
				}
			}
			// the report starts where the first pass did
			if rep.Before.Activations != "start" || rep.BeforeRecords[0].Exact != 1 ||
				rep.Classes[0].Before != "start a" || rep.Classes[0].ExactBefore != 1 {
				t.Errorf("report's start: plan %q, records %d exact, class before %q (%g): want the first pass's",
					rep.Before.Activations, rep.BeforeRecords[0].Exact, rep.Classes[0].Before, rep.Classes[0].ExactBefore)
			}
		})
	}
}

// TestPassesWithinBudget: with a budget whose deadline is nearer than
// twice the first pass's time, no later pass is begun, roles or not.
func TestPassesWithinBudget(t *testing.T) {
	hurry, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	runs := 0
	pass := func(start semantics.Precision) (*Report, error) {
		runs++
		time.Sleep(20 * time.Millisecond)
		return &Report{AfterRecords: []Record{{N: 10, Exact: 5 + runs}}, Roles: []RoleReport{{Class: "linear"}}}, nil
	}
	if _, err := passes(semantics.Precision{}, hurry, pass); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("passes run: %d, want 1 (the budget leaves less than twice the first's time)", runs)
	}
}
