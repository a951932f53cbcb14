package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
)

// table is an objective defined by a function of the assignment, counting
// calls.
type table struct {
	f     func(factor string, a Assignment) float64
	calls int
}

func (t *table) Score(_ context.Context, factor string, a Assignment) (Score, error) {
	t.calls++
	return Score{Err: t.f(factor, a), Boundary: "s0/m/out", Metric: MetricRelRMS}, nil
}

func byName(r *Result) map[string]int {
	m := map[string]int{}
	for i, f := range r.Factors {
		m[f.Name] = i
	}
	return m
}

func TestSingleFactorMarginAndCandidates(t *testing.T) {
	obj := &table{f: func(_ string, a Assignment) float64 {
		return map[any]float64{"identity": 1e-4, "tanh": 0.3, "sigmoid": 0.2}[a["gate_fn"]]
	}}
	r, err := Run(context.Background(), []Factor{{Name: "gate_fn", Values: []any{"tanh", "identity", "sigmoid"}}}, obj, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := r.Factors[0]
	if f.Value != "identity" || !f.Decisive {
		t.Fatalf("got %v decisive=%v", f.Value, f.Decisive)
	}
	if got, want := float64(f.Margin), 0.2/1e-4; math.Abs(got-want) > 1e-9*want {
		t.Errorf("margin %v, want %v", got, want)
	}
	if len(f.Candidates) != 3 || f.Candidates[0].Score != 0.3 {
		t.Errorf("candidates %+v", f.Candidates)
	}
	if r.Evaluations != 3 {
		t.Errorf("%d evaluations, want 3 (one per candidate, the rest cached)", r.Evaluations)
	}
}

// TestInteractingFactorsJoint: two factors where only the right pair fits
// and each alone looks no better (a coordinate descent from the wrong
// corner would stop there); the joint search finds the pair.
func TestInteractingFactorsJoint(t *testing.T) {
	f := func(_ string, a Assignment) float64 {
		switch {
		case a["order"] == "scale,shift" && a["plus_one"] == true:
			return 1e-6
		case a["order"] == "shift,scale" && a["plus_one"] == false:
			return 0.5 // the start: a local minimum for single changes
		}
		return 0.9
	}
	factors := []Factor{
		{Name: "order", Values: []any{"shift,scale", "scale,shift"}},
		{Name: "plus_one", Values: []any{false, true}},
	}
	r, err := Run(context.Background(), factors, &table{f: f}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := byName(r)
	if r.Factors[i["order"]].Value != "scale,shift" || r.Factors[i["plus_one"]].Value != true {
		t.Fatalf("joint search missed the pair: %+v", r.Assignment)
	}
	// Each factor's runner-up is scored with the other at its best for it.
	if m := float64(r.Factors[i["order"]].Margin); math.Abs(m-0.5/1e-6) > 1 {
		t.Errorf("order margin %v", m)
	}
	// Forced to coordinate descent, the same start gets stuck: the search
	// reports what it reached, and the margin says it is not decisive.
	r2, err := Run(context.Background(), factors, &table{f: f}, nil, Options{MaxJoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Assignment["order"] != "shift,scale" {
		t.Fatalf("coordinate descent should stop at the local minimum, got %v", r2.Assignment)
	}
}

func TestCoordinateDescentSeparable(t *testing.T) {
	// Three independent factors with 5 values each (125 combinations, above
	// MaxJoint): descent finds each optimum in one round.
	want := map[string]any{"a": 3, "b": 0, "c": 4}
	f := func(_ string, a Assignment) float64 {
		e := 1e-6
		for k, v := range want {
			if a[k] != v {
				e += 0.1
			}
		}
		return e
	}
	var factors []Factor
	for _, n := range []string{"a", "b", "c"} {
		factors = append(factors, Factor{Name: n, Values: []any{0, 1, 2, 3, 4}})
	}
	obj := &table{f: f}
	r, err := Run(context.Background(), factors, obj, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if r.Assignment[k] != v {
			t.Errorf("%s = %v, want %v", k, r.Assignment[k], v)
		}
	}
	if obj.calls >= 125*3 {
		t.Errorf("%d calls: descent should not enumerate", obj.calls)
	}
}

func TestNotDecisiveAndUndetermined(t *testing.T) {
	factors := []Factor{
		{Name: "flat", Values: []any{"x", "y"}, Stage: 0},
		{Name: "bad", Values: []any{"p", "q"}, Stage: 1},
		{Name: "lone", Values: []any{"only"}, Stage: 2},
	}
	f := func(factor string, a Assignment) float64 {
		switch factor {
		case "flat":
			return 0.01 // both candidates equal: the trace cannot tell
		case "bad":
			return map[any]float64{"p": 0.8, "q": 0.9}[a["bad"]]
		}
		return 0.001
	}
	r, err := Run(context.Background(), factors, &table{f: f}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := byName(r)
	if fl := r.Factors[i["flat"]]; fl.Decisive || float64(fl.Margin) != 1 || fl.Evidence.Note == "" {
		t.Errorf("flat: %+v", fl)
	}
	if b := r.Factors[i["bad"]]; b.Decisive {
		t.Errorf("bad should not be decisive: %+v", b)
	}
	if len(r.Undetermined) != 1 || r.Undetermined[0].Name != "bad" {
		t.Errorf("undetermined = %+v", r.Undetermined)
	}
	if l := r.Factors[i["lone"]]; l.Decisive {
		t.Errorf("a lone candidate is not decided: %+v", l)
	}
}

func TestExactWinnerAndNaN(t *testing.T) {
	f := func(_ string, a Assignment) float64 {
		if a["k"] == "nan" {
			return math.NaN()
		}
		return map[any]float64{"exact": 0, "close": 1e-3}[a["k"]]
	}
	r, err := Run(context.Background(), []Factor{{Name: "k", Values: []any{"nan", "close", "exact"}}}, &table{f: f}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Factors[0]
	if got.Value != "exact" || !math.IsInf(float64(got.Margin), 1) || !got.Decisive {
		t.Errorf("%+v", got)
	}
	if got.Candidates[0].Score != math.MaxFloat64 {
		t.Errorf("NaN candidate should score as the worst, got %v", got.Candidates[0].Score)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Run(context.Background(), []Factor{{Name: "empty"}}, &table{}, nil, Options{}); !errors.Is(err, ErrNoCandidates) {
		t.Errorf("want ErrNoCandidates, got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, []Factor{{Name: "a", Values: []any{1, 2}}}, &table{f: func(string, Assignment) float64 { return 0 }}, nil, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
	boom := ObjectiveFunc(func(context.Context, string, Assignment) (Score, error) { return Score{}, errors.New("boom") })
	if _, err := Run(context.Background(), []Factor{{Name: "a", Values: []any{1}}}, boom, nil, Options{}); err == nil {
		t.Error("objective error swallowed")
	}
}

// bounded is table as a BoundedObjective: Stage scores the factors in
// order and stops as soon as their sum passes the bound, the factors not
// reached bounded by 0.
type bounded struct {
	table
	stages, stopped int
}

func (b *bounded) Stage(_ context.Context, factors []string, a Assignment, bound float64) ([]Score, bool, error) {
	b.stages++
	out := make([]Score, len(factors))
	sum := 0.0
	for i, f := range factors {
		out[i] = Score{Err: b.f(f, a), Metric: MetricExact}
		if sum += out[i].Err; sum > bound {
			for j := i + 1; j < len(factors); j++ {
				out[j] = Score{Metric: MetricExact, Bound: true}
			}
			b.stopped++
			return out, false, nil
		}
	}
	return out, true, nil
}

// TestBoundedDescent: with a BoundedObjective the descent finds what it
// finds with every score whole, stopped evaluations leave bounds (never
// above the score) in the evidence, and each round's progress reaches its
// total.
func TestBoundedDescent(t *testing.T) {
	want := map[string]any{"a": 3, "b": 0, "c": 4}
	f := func(name string, a Assignment) float64 {
		e := 1e-6
		if a[name] != want[name] {
			e += 0.1 * float64(1+len(name))
		}
		if name == "c" && a["a"] != want["a"] {
			e += 0.05 // c's boundary sees a too
		}
		return e
	}
	var factors []Factor
	for _, n := range []string{"a", "b", "c"} {
		factors = append(factors, Factor{Name: n, Values: []any{0, 1, 2, 3, 4}})
	}
	whole, err := Run(context.Background(), factors, &table{f: f}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := &bounded{table: table{f: f}}
	rounds := map[int][2]int{}
	got, err := Run(context.Background(), factors, obj, nil, Options{Progress: func(stage, round, done, total int) {
		rounds[round] = [2]int{done, total}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if got.Assignment[k] != whole.Assignment[k] || got.Assignment[k] != want[k] {
			t.Errorf("%s = %v, whole %v, want %v", k, got.Assignment[k], whole.Assignment[k], want[k])
		}
	}
	if obj.stopped == 0 {
		t.Error("no evaluation stopped")
	}
	bounds := 0
	for i, fr := range got.Factors {
		for j, c := range fr.Candidates {
			w := whole.Factors[i].Candidates[j]
			switch {
			case c.AtLeast:
				bounds++
				if c.Score > w.Score {
					t.Errorf("%s=%v: bound %v above the score %v", fr.Name, c.Value, c.Score, w.Score)
				}
			case c.Score != w.Score:
				t.Errorf("%s=%v: %v, whole %v", fr.Name, c.Value, c.Score, w.Score)
			}
		}
		if fr.Value != whole.Factors[i].Value {
			t.Errorf("%s: reported %v, whole %v", fr.Name, fr.Value, whole.Factors[i].Value)
		}
	}
	if bounds == 0 {
		t.Error("no bound in the evidence")
	}
	for r, p := range rounds {
		if r < 1 || p[0] != p[1] || p[1] != 15 {
			t.Errorf("round %d: progress %d of %d, want 15 of 15", r, p[0], p[1])
		}
	}
	if len(rounds) == 0 {
		t.Error("no progress")
	}
}

// pruning is a separable objective (each factor's error its own: 0 at its
// wanted value, 0.1 elsewhere) that rules out the costly value 4 of every
// factor wherever the factor's value in hand scores 0, and counts the
// scores it is asked for, by factor and value.
type pruning struct {
	want  map[string]any
	asked map[string]int
}

func (p *pruning) err(factor string, a Assignment) float64 {
	if a[factor] == p.want[factor] {
		return 0
	}
	return 0.1
}

func (p *pruning) Score(_ context.Context, factor string, a Assignment) (Score, error) {
	p.asked[fmt.Sprint(factor, "=", a[factor])]++
	return Score{Err: p.err(factor, a), Boundary: "s0/m/out", Metric: MetricExact}, nil
}

func (p *pruning) Prune(_ context.Context, factor string, v any, a Assignment) (string, error) {
	if v == 4 && p.err(factor, a) == 0 {
		return "exact already", nil
	}
	return "", nil
}

// TestPrunerDescent: a value the Pruner rules out is never scored and is
// reported unscored, with the reason and the bound (the value in hand's
// score), outside the margin; where the value in hand is not exact the
// costly value is scored, and wins when it is the one wanted.
func TestPrunerDescent(t *testing.T) {
	p := &pruning{want: map[string]any{"a": 1, "b": 4, "c": 0}, asked: map[string]int{}}
	var factors []Factor
	for _, n := range []string{"a", "b", "c"} {
		factors = append(factors, Factor{Name: n, Values: []any{0, 1, 2, 3, 4}})
	}
	factors[0].Values = []any{0, 4, 1, 2, 3} // 4 tried while a = 0 is in hand
	r, err := Run(context.Background(), factors, p, Assignment{"a": 0, "b": 0, "c": 0}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		factor     string
		value      any
		pruned     bool // the factor's value 4 was ruled out
		scored4    bool // value 4 was ever scored
		margin     float64
		candidates int // scored ones
	}{
		{"a", 1, true, true, math.Inf(1), 4},  // 0 was in hand (inexact) when 4 was tried in round 1; exact at the report
		{"b", 4, false, true, math.Inf(1), 5}, // the costly value is the winner: never pruned
		{"c", 0, true, false, math.Inf(1), 4}, // exact from the start: 4 never scored
	}
	i := byName(r)
	for _, tc := range cases {
		f := r.Factors[i[tc.factor]]
		if f.Value != tc.value || r.Assignment[tc.factor] != tc.value {
			t.Errorf("%s = %v (assignment %v), want %v", tc.factor, f.Value, r.Assignment[tc.factor], tc.value)
		}
		if got := p.asked[tc.factor+"=4"] > 0; got != tc.scored4 {
			t.Errorf("%s = 4 scored %d times, want scored %v", tc.factor, p.asked[tc.factor+"=4"], tc.scored4)
		}
		var c4 semantics.Candidate
		for _, c := range f.Candidates {
			if c.Value == 4 {
				c4 = c
			}
		}
		if got := c4.Pruned != ""; got != tc.pruned {
			t.Errorf("%s: candidate 4 %+v, want pruned %v", tc.factor, c4, tc.pruned)
		}
		if tc.pruned && (c4.Pruned != "exact already" || !c4.AtLeast || c4.Score != 0) {
			t.Errorf("%s: pruned candidate %+v, want the reason and the bound 0 (the winner's score)", tc.factor, c4)
		}
		n := 0
		for _, c := range f.Candidates {
			if c.Pruned == "" {
				n++
			}
		}
		if n != tc.candidates || float64(f.Margin) != tc.margin || !f.Decisive {
			t.Errorf("%s: %d scored candidates, margin %v decisive %v; want %d, %v, decisive", tc.factor, n, f.Margin, f.Decisive, tc.candidates, tc.margin)
		}
	}
	if r.Pruned == 0 {
		t.Error("Result.Pruned is 0")
	}
}

// TestOutOfTime: once Options.Hurry is done the search keeps the best
// assignment it has, leaves later stages at their start, and reports only
// the candidates it scored, none of them decisive; a Hurry never done
// changes nothing.
func TestOutOfTime(t *testing.T) {
	want := map[string]any{"a": 3, "b": 1, "c": 4}
	f := func(factor string, a Assignment) float64 {
		if a[factor] != want[factor] {
			return 0.1
		}
		return 1e-6
	}
	var factors []Factor
	for _, n := range []string{"a", "b"} {
		factors = append(factors, Factor{Name: n, Values: []any{0, 1, 2, 3, 4}})
	}
	factors = append(factors, Factor{Name: "c", Values: []any{0, 4}, Stage: 1})
	for _, tc := range []struct {
		name     string
		budget   int // objective calls before Hurry is done; 0: never
		assigned map[string]any
	}{
		{"in time", 0, want},
		// the start's total (a and b scored), then a = 1, 2, 3: a = 3
		// found, b and c never tried
		{"out of time in the first stage", 8, map[string]any{"a": 3, "b": 0, "c": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hurry, done := context.WithCancel(context.Background())
			defer done()
			n := 0
			obj := ObjectiveFunc(func(_ context.Context, factor string, a Assignment) (Score, error) {
				if n++; n == tc.budget {
					done()
				}
				return Score{Err: f(factor, a), Boundary: "s0/m/out", Metric: MetricRelRMS}, nil
			})
			r, err := Run(context.Background(), factors, obj, nil, Options{MaxJoint: 1, Hurry: hurry})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.assigned {
				if r.Assignment[k] != v {
					t.Errorf("%s = %v, want %v", k, r.Assignment[k], v)
				}
			}
			if r.OutOfTime != (tc.budget > 0) {
				t.Fatalf("out of time %v", r.OutOfTime)
			}
			for i, fr := range r.Factors {
				if !r.OutOfTime {
					if len(fr.Candidates) != len(factors[i].Values) || !fr.Decisive {
						t.Errorf("%s: %d candidates, decisive %v in time", fr.Name, len(fr.Candidates), fr.Decisive)
					}
					continue
				}
				if fr.Decisive || len(fr.Candidates) == 0 || len(fr.Candidates) == len(factors[i].Values) || !strings.Contains(fr.Evidence.Note, "ran out of time") {
					t.Errorf("%s out of time: decisive %v, %d candidates, note %q", fr.Name, fr.Decisive, len(fr.Candidates), fr.Evidence.Note)
				}
			}
			if r.OutOfTime && r.Unscored == 0 {
				t.Error("out of time, yet every candidate scored")
			}
		})
	}
}
