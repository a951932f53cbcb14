package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/zflow/zflow/semantics"
)

// Factor is one unknown and the values to try.
type Factor struct {
	Name   string // canonical name (FACTORS.md)
	Scope  string // the blocks or roles it covers
	Values []any
	Stage  int // stages run in ascending order; factors of one stage interact
}

// Assignment gives every factor a value.
type Assignment map[string]any

// clone copies a; the values themselves are immutable by convention.
func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

// key is a canonical encoding of a, for memoisation.
func (a Assignment) key() string {
	names := make([]string, 0, len(a))
	for k := range a {
		names = append(names, k)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, k := range names {
		sb.WriteString(k)
		sb.WriteByte('=')
		if v, ok := a[k].(string); ok {
			sb.WriteString(v) // most values: as %v writes them, without its cost
		} else {
			fmt.Fprint(&sb, a[k])
		}
		sb.WriteByte(';')
	}
	return sb.String()
}

// Score is one evaluation at a factor's boundary. Lower Err is better;
// TieBreak decides between equal Errs (rel-RMS when Err is 1 − exact).
type Score struct {
	Err      float64
	TieBreak float64
	Boundary string // "<scope>/<module>/<port>" the score was taken at
	Metric   string // "rel_rms" or "exact_fraction"
	// Bound: Err is a lower bound (and TieBreak 0): a BoundedObjective
	// stopped scoring once the assignment could not win.
	Bound bool
}

func (s Score) less(t Score) bool {
	if s.Err != t.Err {
		return s.Err < t.Err
	}
	return s.TieBreak < t.TieBreak
}

// Metric names.
const (
	MetricRelRMS = "rel_rms"        // Err is rel-RMS
	MetricExact  = "exact_fraction" // Err is 1 − fraction bit-exact
)

// Objective scores an assignment at the boundary where factor is first
// observable.
type Objective interface {
	Score(ctx context.Context, factor string, a Assignment) (Score, error)
}

// BoundedObjective is an Objective that can stop scoring an assignment
// once it cannot win. Stage scores every factor of a stage under a (in the
// order given) and returns them with complete true; or, as soon as the
// sum of their errors is certain to exceed bound, lower bounds of them
// (each Score's Bound set) with complete false. A search gives it the
// total of the best assignment so far, so that a candidate that cannot
// beat it costs only what it took to see so.
type BoundedObjective interface {
	Objective
	Stage(ctx context.Context, factors []string, a Assignment, bound float64) (scores []Score, complete bool, err error)
}

// Pruner is an Objective that can tell, before a value is scored, that
// it cannot win: Prune returns a reason when factor at value, the rest of
// a held, is certain to score no lower than a's own value of factor and
// to lower no other factor's score (so the stage's total cannot fall),
// and "" when the value must be scored. Coordinate descent does not score
// a value it rules out, and the factor's report lists it with the reason
// (semantics.Candidate.Pruned) in place of a score; a stage searched
// jointly is never pruned.
type Pruner interface {
	Objective
	Prune(ctx context.Context, factor string, value any, a Assignment) (reason string, err error)
}

// ObjectiveFunc adapts a function to Objective.
type ObjectiveFunc func(ctx context.Context, factor string, a Assignment) (Score, error)

// Score calls f.
func (f ObjectiveFunc) Score(ctx context.Context, factor string, a Assignment) (Score, error) {
	return f(ctx, factor, a)
}

// Options tune the search; the zero value takes the documented defaults.
type Options struct {
	// DecisiveMargin: a winner is decisive when runner-up error / winner
	// error is at least this. Default 2.
	DecisiveMargin float64
	// Unexplained: a rel-RMS winner whose error is above this reproduces
	// nothing; the factor is undetermined. Default 0.5 (rel-RMS of 50%).
	// Precision factors (MetricExact) are never undetermined this way: a
	// GEMM may be far from bit-exact under every plan.
	Unexplained float64
	// MaxJoint: stages with at most this many combinations are searched
	// exhaustively. Default 64.
	MaxJoint int
	// MaxRounds bounds coordinate descent per stage. Default 8.
	MaxRounds int
	// Progress, when set, is told what is being scored: in coordinate
	// descent, round (from 1) and the candidates scored of the round's;
	// in a joint search, round 0 and the combinations scored.
	Progress func(stage, round, done, total int)
	// Hurry, when set and done, stops the search trying values (a budget
	// shorter than the context's, which would end it with an error): the
	// stage in hand keeps the best assignment found so far, no stage after
	// it is searched (its factors keep their start), and a factor's report
	// holds only the candidates already scored (Result.OutOfTime says so).
	Hurry context.Context
}

func (o Options) withDefaults() Options {
	if o.DecisiveMargin == 0 {
		o.DecisiveMargin = 2
	}
	if o.Unexplained == 0 {
		o.Unexplained = 0.5
	}
	if o.MaxJoint == 0 {
		o.MaxJoint = 64
	}
	if o.MaxRounds == 0 {
		o.MaxRounds = 8
	}
	return o
}

// Result is what a search found.
type Result struct {
	Assignment   Assignment
	Factors      []semantics.Factor // in the order the factors were given
	Undetermined []semantics.Undetermined
	Evaluations  int // objective calls (cache misses)
	Lookups      int // scores asked for, cached or not
	Pruned       int // values not scored in descent (Pruner)
	// OutOfTime: Options.Hurry was done before the search ended; the
	// assignment is the best found by then, and Unscored candidates were
	// left without a score.
	OutOfTime bool
	Unscored  int
}

// ErrNoCandidates: a factor was given without values.
var ErrNoCandidates = errors.New("search: factor has no candidate values")

// Run searches factors, starting from start (a factor missing from start
// starts at its first value).
func Run(ctx context.Context, factors []Factor, obj Objective, start Assignment, o Options) (*Result, error) {
	o = o.withDefaults()
	s := &searcher{obj: obj, opts: o, cache: scoreCache{}}
	a := start.clone()
	if a == nil {
		a = Assignment{}
	}
	for _, f := range factors {
		if len(f.Values) == 0 {
			return nil, fmt.Errorf("%w: %s", ErrNoCandidates, f.Name)
		}
		if _, ok := a[f.Name]; !ok {
			a[f.Name] = f.Values[0]
		}
	}
	stages := map[int][]Factor{}
	for _, f := range factors {
		stages[f.Stage] = append(stages[f.Stage], f)
	}
	order := make([]int, 0, len(stages))
	for st := range stages {
		order = append(order, st)
	}
	slices.Sort(order)
	res := &Result{}
	found := map[string]semantics.Factor{}
	var undetermined []semantics.Undetermined
	for _, st := range order {
		fs := stages[st]
		var err error
		switch {
		case s.late():
			// out of time before this stage: its factors keep their start
		case combos(fs) <= o.MaxJoint:
			a, err = s.joint(ctx, st, fs, a)
		default:
			a, err = s.descend(ctx, st, fs, a)
		}
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			sf, und, err := s.report(ctx, f, fs, a)
			if err != nil {
				return nil, err
			}
			found[f.Name] = sf
			if und != nil {
				undetermined = append(undetermined, *und)
			}
		}
	}
	for _, f := range factors {
		res.Factors = append(res.Factors, found[f.Name])
	}
	res.Assignment, res.Undetermined = a, undetermined
	res.Evaluations, res.Lookups, res.Pruned = s.evals, s.lookups, s.pruned
	res.OutOfTime, res.Unscored = s.outOfTime, s.unscored
	return res, nil
}

type searcher struct {
	obj       Objective
	opts      Options
	cache     scoreCache
	evals     int
	lookups   int
	pruned    int
	outOfTime bool // Options.Hurry was done
	unscored  int  // candidates a report left unscored for want of time
}

// scoreCache holds the scores taken, by assignment (its key) and factor:
// a stage's run scores every factor of the assignment at once.
type scoreCache map[string]map[string]Score

func (c scoreCache) get(factor, key string) (Score, bool) {
	sc, ok := c[key][factor]
	return sc, ok
}

func (c scoreCache) put(factor, key string, sc Score) {
	m := c[key]
	if m == nil {
		m = map[string]Score{}
		c[key] = m
	}
	m[factor] = sc
}

// late reports whether Options.Hurry is done (and remembers it).
func (s *searcher) late() bool {
	if !s.outOfTime && s.opts.Hurry != nil && s.opts.Hurry.Err() != nil {
		s.outOfTime = true
	}
	return s.outOfTime
}

// errLate ends a joint search's enumeration once Options.Hurry is done.
var errLate = errors.New("search: out of time")

// prune asks the objective, when it is a Pruner, whether factor f at
// value v (a holding another) cannot win: the reason, or "".
func (s *searcher) prune(ctx context.Context, f string, v any, a Assignment) (string, error) {
	p, ok := s.obj.(Pruner)
	if !ok || reflect.DeepEqual(v, a[f]) {
		return "", nil
	}
	reason, err := p.Prune(ctx, f, v, a)
	if err != nil {
		return "", fmt.Errorf("pruning %s = %v: %w", f, v, err)
	}
	return reason, nil
}

func (s *searcher) score(ctx context.Context, factor string, a Assignment) (Score, error) {
	s.lookups++
	k := a.key()
	if sc, ok := s.cache.get(factor, k); ok && !sc.Bound {
		return sc, nil
	}
	if err := ctx.Err(); err != nil {
		return Score{}, err
	}
	sc, err := s.obj.Score(ctx, factor, a)
	if err != nil {
		return Score{}, fmt.Errorf("scoring %s = %v: %w", factor, a[factor], err)
	}
	if math.IsNaN(sc.Err) {
		sc.Err = math.Inf(1) // a candidate that produces NaN explains nothing
	}
	s.evals++
	s.cache.put(factor, k, sc)
	return sc, nil
}

// total is the stage's error under a: the sum over its factors. With a
// BoundedObjective it may stop once the sum exceeds bound: the result is
// then a lower bound (Bound set), which no assignment within bound beats.
func (s *searcher) total(ctx context.Context, fs []Factor, a Assignment, bound float64) (Score, error) {
	if bo, ok := s.obj.(BoundedObjective); ok {
		var t Score
		known, k := true, a.key()
		for _, f := range fs {
			sc, ok := s.cache.get(f.Name, k)
			known = known && ok
			t.Err += sc.Err
			t.TieBreak += sc.TieBreak
			t.Bound = t.Bound || sc.Bound
		}
		if !known || t.Bound && t.Err <= bound {
			return s.stage(ctx, bo, fs, a, bound)
		}
		s.lookups += len(fs)
		return t, nil
	}
	var t Score
	for _, f := range fs {
		sc, err := s.score(ctx, f.Name, a)
		if err != nil {
			return Score{}, err
		}
		t.Err += sc.Err
		t.TieBreak += sc.TieBreak
	}
	return t, nil
}

// stage scores a whole stage through a BoundedObjective.
func (s *searcher) stage(ctx context.Context, bo BoundedObjective, fs []Factor, a Assignment, bound float64) (Score, error) {
	if err := ctx.Err(); err != nil {
		return Score{}, err
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	scores, complete, err := bo.Stage(ctx, names, a, bound)
	if err != nil {
		return Score{}, fmt.Errorf("scoring %s: %w", a.key(), err)
	}
	if len(scores) != len(fs) {
		return Score{}, fmt.Errorf("scoring %s: %d scores for %d factors", a.key(), len(scores), len(fs))
	}
	s.evals++
	s.lookups += len(fs)
	var t Score
	k := a.key()
	for i, f := range fs {
		sc := scores[i]
		if math.IsNaN(sc.Err) {
			sc.Err = math.Inf(1)
		}
		sc.Bound = !complete
		if old, ok := s.cache.get(f.Name, k); !ok || old.Bound {
			s.cache.put(f.Name, k, sc)
		}
		t.Err += sc.Err
		t.TieBreak += sc.TieBreak
	}
	t.Bound = !complete
	return t, nil
}

func combos(fs []Factor) int {
	n := 1
	for _, f := range fs {
		n *= len(f.Values)
		if n > 1<<20 {
			return n
		}
	}
	return n
}

// each calls fn with every combination of the stage's values over base.
func each(fs []Factor, base Assignment, fn func(Assignment) error) error {
	idx := make([]int, len(fs))
	for {
		a := base.clone()
		for i, f := range fs {
			a[f.Name] = f.Values[idx[i]]
		}
		if err := fn(a); err != nil {
			return err
		}
		i := 0
		for ; i < len(fs); i++ {
			idx[i]++
			if idx[i] < len(fs[i].Values) {
				break
			}
			idx[i] = 0
		}
		if i == len(fs) {
			return nil
		}
	}
}

// joint tries every combination of the stage's factors.
func (s *searcher) joint(ctx context.Context, stage int, fs []Factor, a Assignment) (Assignment, error) {
	best, bestScore := a, Score{Err: math.Inf(1)}
	n, done := combos(fs), 0
	err := each(fs, a, func(c Assignment) error {
		if s.late() && !math.IsInf(bestScore.Err, 1) {
			return errLate // keep the best combination scored so far
		}
		t, err := s.total(ctx, fs, c, bestScore.Err)
		if err != nil {
			return err
		}
		if !t.Bound && t.less(bestScore) {
			best, bestScore = c, t
		}
		done++
		if s.opts.Progress != nil {
			s.opts.Progress(stage, 0, done, n)
		}
		return nil
	})
	if errors.Is(err, errLate) {
		err = nil
	}
	return best, err
}

// descend changes one factor at a time to its best value until no single
// change improves the stage's total; a value a Pruner rules out against
// the assignment in hand is not scored.
func (s *searcher) descend(ctx context.Context, stage int, fs []Factor, a Assignment) (Assignment, error) {
	cur, err := s.total(ctx, fs, a, math.Inf(1))
	if err != nil {
		return nil, err
	}
	perRound := 0
	for _, f := range fs {
		perRound += len(f.Values)
	}
	for round := 0; round < s.opts.MaxRounds && !s.late(); round++ {
		changed, done := false, 0
		for _, f := range fs {
			for _, v := range f.Values {
				if s.late() {
					return a, nil // the best assignment so far
				}
				reason, err := s.prune(ctx, f.Name, v, a)
				if err != nil {
					return nil, err
				}
				if reason != "" {
					s.pruned++
				} else {
					c := a.clone()
					c[f.Name] = v
					t, err := s.total(ctx, fs, c, cur.Err)
					if err != nil {
						return nil, err
					}
					if !t.Bound && t.less(cur) {
						a, cur, changed = c, t, true
					}
				}
				done++
				if s.opts.Progress != nil {
					s.opts.Progress(stage, round+1, done, perRound)
				}
			}
		}
		if !changed {
			break
		}
	}
	return a, nil
}

// report scores every candidate of f (holding f at the candidate, the rest
// of the stage at its best for it when the stage was searched jointly, at
// the final assignment otherwise) and decides margin and decisiveness.
// A value a Pruner rules out against the final assignment (coordinate
// descent only) is listed unscored, with the reason and the bound it
// gives, and left out of the margin.
func (s *searcher) report(ctx context.Context, f Factor, fs []Factor, a Assignment) (semantics.Factor, *semantics.Undetermined, error) {
	others := make([]Factor, 0, len(fs)-1)
	for _, g := range fs {
		if g.Name != f.Name {
			others = append(others, g)
		}
	}
	jointly := combos(fs) <= s.opts.MaxJoint
	scores := make([]Score, len(f.Values))
	pruned := make([]string, len(f.Values))
	unscored := make([]bool, len(f.Values)) // out of time before their turn
	for i, v := range f.Values {
		if !jointly {
			var err error
			if pruned[i], err = s.prune(ctx, f.Name, v, a); err != nil {
				return semantics.Factor{}, nil, err
			}
			if pruned[i] != "" {
				continue
			}
		}
		base := a.clone()
		base[f.Name] = v
		best := Score{Err: math.Inf(1)}
		try := func(c Assignment) error {
			sc, ok := s.cache.get(f.Name, c.key()) // a bound too: the evidence says so
			var err error
			switch {
			case !ok && s.late() && !reflect.DeepEqual(c[f.Name], a[f.Name]):
				return nil // out of time: left unscored (the assignment's own value is always scored)
			case !ok:
				sc, err = s.score(ctx, f.Name, c)
			default:
				s.lookups++
			}
			// the first score stands even when it is +Inf (every
			// candidate failed, NaN data): its boundary and metric are
			// the evidence of an undetermined factor
			if err == nil && (best.Metric == "" || sc.less(best)) {
				best = sc
			}
			return err
		}
		var err error
		if jointly && len(others) > 0 {
			err = each(others, base, try)
		} else {
			err = try(base)
		}
		if err != nil {
			return semantics.Factor{}, nil, err
		}
		scores[i] = best
		if best.Metric == "" && s.late() {
			unscored[i] = true
			s.unscored++
		}
	}
	// A bound is not a score to win with: it only says the candidate
	// could not beat the assignment's own value, which is scored whole.
	win := -1
	for i := range scores {
		if pruned[i] == "" && !unscored[i] && !scores[i].Bound && (win < 0 || scores[i].less(scores[win])) {
			win = i
		}
	}
	if win < 0 {
		win = 0
	}
	out := semantics.Factor{
		Name: f.Name, Scope: f.Scope, Value: f.Values[win],
		Evidence: semantics.Evidence{Boundary: scores[win].Boundary, Metric: scores[win].Metric},
	}
	runnerUp := math.Inf(1)
	own := win // a's value of f, whose score bounds a pruned value's (Pruner)
	for i, v := range f.Values {
		if pruned[i] == "" && reflect.DeepEqual(v, a[f.Name]) {
			own = i
		}
	}
	scored, left := 0, 0
	for i, sc := range scores {
		if unscored[i] {
			left++
			continue
		}
		if pruned[i] != "" {
			out.Candidates = append(out.Candidates, semantics.Candidate{Value: f.Values[i], Score: finite(scores[own].Err),
				AtLeast: true, Pruned: pruned[i]})
			continue
		}
		scored++
		out.Candidates = append(out.Candidates, semantics.Candidate{Value: f.Values[i], Score: finite(sc.Err), AtLeast: sc.Bound})
		if i != win {
			runnerUp = min(runnerUp, sc.Err)
		}
	}
	out.Margin = 1 // a lone candidate is declared, not decided
	if scores[win].Metric == "" {
		// nothing was scored (every value ruled out, or no score came
		// back): no evidence to cite, so the factor is undetermined
		out.Evidence = semantics.Evidence{Metric: "declared", Note: "no candidate could be scored"}
		return out, &semantics.Undetermined{Name: f.Name, Scope: f.Scope, Reason: "no candidate could be scored: every value was ruled out or failed"}, nil
	}
	if scored > 1 {
		out.Margin = semantics.Margin(margin(scores[win].Err, runnerUp))
	}
	out.Decisive = float64(out.Margin) >= s.opts.DecisiveMargin
	if scores[win].Metric != MetricExact && scores[win].Err > s.opts.Unexplained {
		out.Decisive = false
		return out, &semantics.Undetermined{Name: f.Name, Scope: f.Scope, Reason: fmt.Sprintf(
			"no candidate reproduces %s: the best, %v, has %s %.3g", scores[win].Boundary, f.Values[win], scores[win].Metric, scores[win].Err)}, nil
	}
	if !out.Decisive {
		out.Evidence.Note = fmt.Sprintf("margin %.3g below %.3g: the trace does not tell the candidates apart", float64(out.Margin), s.opts.DecisiveMargin)
	}
	if left > 0 {
		// the best of those scored: one left unscored might beat it
		out.Decisive = false
		out.Evidence.Note = strings.TrimPrefix(out.Evidence.Note+fmt.Sprintf("; %d of %d candidates not scored: the search ran out of time", left, len(f.Values)), "; ")
	}
	return out, nil, nil
}

// margin is runnerUp / winner: +Inf for an exact winner beaten by anyone,
// 1 when both are exact or there is no runner-up.
func margin(winner, runnerUp float64) float64 {
	switch {
	case math.IsInf(runnerUp, 1) && math.IsInf(winner, 1):
		return 1
	case winner == 0 && runnerUp == 0:
		return 1
	case winner == 0:
		return math.Inf(1)
	}
	return runnerUp / winner
}

// finite maps an infinite score (a candidate that gave NaN or failed to
// fit) to the largest float, since JSON has no Inf.
func finite(x float64) float64 {
	if math.IsInf(x, 1) {
		return math.MaxFloat64
	}
	return x
}
