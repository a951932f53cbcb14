package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// DiscoverOptions tune Discover; the zero value runs every model call and
// search's defaults.
type DiscoverOptions struct {
	Eval   Options        // Steps: model calls per evaluation (0: all); FreeRunning and Keep are ignored
	Search search.Options // DecisiveMargin also decides per-role rules
	// SampleRows: how many rows the candidates of an op that computes each
	// row on its own (a linear, an attention's queries) are scored on,
	// where a boundary holds more than twice as many (0:
	// DefaultSampleRows; < 0: every row). The plans before and after are
	// measured on every row.
	SampleRows int
	// Exhaustive scores every candidate in full: no run stops once its
	// plan cannot win, so every candidate's score and every margin is
	// exact (at the price of the runs of the candidates that lose).
	Exhaustive bool
	// Progress, when set, is told each stage's progress.
	Progress func(stage string, done, total int)
}

// Report is what Discover found.
type Report struct {
	Before, After semantics.Precision
	// Classes: one row per op class the program has, in Classes() order.
	Classes []ClassReport
	// Roles: the per-role rules kept because the trace shows a difference
	// from their class's plan; Tried: every role factor searched.
	Roles, Tried []RoleReport
	// BeforeRecords are the teacher-forced boundaries under Before as the
	// candidates were scored (sampled rows where a record says so);
	// AfterRecords under After, every row.
	BeforeRecords, AfterRecords []Record
	Evaluations                 int // program runs (cache misses)
	// Stopped: of those, the runs given up once the plan could not win.
	Stopped int
	// Pruned: candidate values coordinate descent did not score because
	// they could not win (Prune: a costly candidate of a factor whose
	// values are all bit-exact already); each factor's report lists its
	// own (semantics.Candidate.Pruned).
	Pruned int
	// Scoring: the boundaries the candidates were scored at, and on how
	// many of their rows (precision.scoring).
	Scoring map[string]semantics.Scored
	// OutOfTime: the search's Hurry was done before it ended (After's
	// status "partial"): the best plan found by then, the stages and
	// candidates not reached left out.
	OutOfTime bool
}

// ClassReport is one op class's factor.
type ClassReport struct {
	Class         string
	Before, After string // candidate labels ("" when the class was not searched)
	// Boundaries: records made by an op of the class (OpClass == Class);
	// Scored: records whose value depends on the class (its factor's
	// evidence, which includes boundaries after other ops).
	Boundaries, Scored int
	// ExactBefore, ExactAfter: pooled over Boundaries, or over Scored when
	// Boundaries is 0, on the rows the candidates were scored on (Report's
	// Scoring).
	ExactBefore, ExactAfter float64
	// Margin: error of the best candidate that scores differently / the
	// winner's error (+Inf when the winner is exact, 1 when every candidate
	// scores the same); Equivalent: candidates scoring exactly as the
	// winner.
	Margin             float64
	MarginAtLeast      bool // the runner-up's score is a bound: the margin is at least Margin
	Decisive, Observed bool
	Equivalent         []string
	Candidates         []semantics.Candidate // label → 1 − exact fraction
	Note               string
}

// RoleReport is one per-role factor.
type RoleReport struct {
	Class, Role string // role glob
	Value       string // winner
	ClassValue  string // the class's plan
	Err         float64
	ClassErr    float64 // error under the class's plan
	Margin      float64 // ClassErr / Err
	// ClassAtLeast: ClassErr is a bound (the class's plan could not win
	// here), so the margin is at least Margin.
	ClassAtLeast bool
	Equivalent   []string
	Candidates   []semantics.Candidate
	scored       int
}

// factor is one search factor: a class, or a class over one role group.
type factor struct {
	name  string // search name: the class, or "class@glob"
	class string
	glob  string // "" for the whole class
	// roles: the group's nodes where it is a program's node in every
	// block of one shape (roleGroups), each given the rule by its own
	// role; nil where glob is a role glob of its own
	roles []string
	cands []Candidate
	cover bits // units it sets
	// recs: the template's records whose cone meets cover, by index
	// (tmplRecs), once the template is run
	recs []int
}

type discovery struct {
	e      *Evaluator
	start  semantics.Precision
	acts   string
	units  []Unit
	ids    []int // unit ids, parallel to units
	byName map[string]*factor
	order  []*factor // class factors, in Classes() order
	roles  []*factor
	kept   []semantics.PrecisionRule // start rules of classes not searched
	cache  map[runKey][]Record
	evals  int
	stops  int
	opts   DiscoverOptions
	sample int // runOpts.sample of the candidates' runs
	// tmpl: the records of the first complete candidates' run, which every
	// later one repeats (the same boundaries, of the same sizes), for the
	// bound on a run stopped part way.
	tmpl []Record
	// stage names the whole runs' progress.
	stage string
	// scopes: the units each rule scope matches (scopeUnits)
	scopes map[string]bits
	// likeRecs, likeOK: likeTmpl's last answer
	likeRecs *Record
	likeOK   bool
}

// runKey is a plan (its JSON) and whether its run sampled rows.
type runKey struct {
	plan    string
	sampled bool
}

// Prepare makes a document's precision section complete enough to build
// its program: a missing rope_table gets the formats the search starts
// from (f32 throughout) when the structure has positions.
func Prepare(doc *semantics.Document) {
	if doc.Structure.Positions != nil && doc.Precision.RopeTable == nil {
		doc.Precision.RopeTable = &semantics.RopeTableFormats{Freq: "f32", Angle: "f32", Out: "f32"}
	}
	if doc.Precision.Status == "" {
		doc.Precision.Status = "placeholder"
	}
}

// Discover searches the precision plan of doc against the reference trace,
// starting from doc's plan, and returns the report; Report.After is the
// plan found (status "searched", with each boundary's exact fraction).
func Discover(ctx context.Context, b exec.Backend, ref *trace.Trace, doc *semantics.Document, o DiscoverOptions) (*Report, error) {
	d := *doc
	Prepare(&d)
	o.Eval.FreeRunning, o.Eval.Keep = false, false
	sample := o.SampleRows
	if sample == 0 {
		sample = DefaultSampleRows
	}
	var ds *discovery // the pass in hand, whose stage the progress names
	if o.Progress != nil {
		o.Eval.Progress = func(done, total int) {
			if ds != nil && ds.stage != "" { // the candidates' runs count as candidates
				o.Progress(ds.stage, done, total)
			}
		}
	}
	e, err := NewEvaluator(b, ref, &d, o.Eval)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	cache := map[runKey][]Record{}
	return passes(d.Precision, o.Search.Hurry, func(start semantics.Precision) (*Report, error) {
		ds = &discovery{e: e, start: start, acts: d.Precision.Activations, byName: map[string]*factor{},
			cache: cache, opts: o, sample: max(sample, 0)}
		return ds.discover(ctx)
	})
}

// passes runs pass from start, and again from the plan it found while the
// pass kept per-role rules and left values inexact, up to maxPasses; a
// later pass is taken only where it makes more values bit-exact. With a
// budget (hurry's deadline), a pass is begun only where twice the last
// one's time is left: the plan in hand is kept whole rather than a later
// pass cut short.
func passes(start semantics.Precision, hurry context.Context, pass func(start semantics.Precision) (*Report, error)) (*Report, error) {
	began := time.Now()
	rep, err := pass(start)
	if err != nil {
		return nil, err
	}
	for range maxPasses - 1 {
		if len(rep.Roles) == 0 || rep.OutOfTime || exactValues(rep.AfterRecords) == values(rep.AfterRecords) {
			break
		}
		took := time.Since(began)
		if deadline, ok := deadlineOf(hurry); ok && time.Until(deadline) < 2*took {
			break
		}
		began = time.Now()
		next, err := pass(rep.After) // the classes again, under the roles' rules
		if err != nil {
			return nil, err
		}
		if exactValues(next.AfterRecords) <= exactValues(rep.AfterRecords) {
			rep.Evaluations, rep.Stopped = rep.Evaluations+next.Evaluations, rep.Stopped+next.Stopped
			break
		}
		next.following(rep)
		rep = next
	}
	return rep, nil
}

// deadlineOf is hurry's deadline, if it has one.
func deadlineOf(hurry context.Context) (time.Time, bool) {
	if hurry == nil {
		return time.Time{}, false
	}
	return hurry.Deadline()
}

// maxPasses bounds the searches of the classes and roles in turn: a
// role's rule found in one pass (a projection's rounding) can change which
// class plan wins in the next (a tie between a rope's formats that only
// the projection's exact values break).
const maxPasses = 3

// following makes r, a later pass, report from where the first of prev's
// passes began: its plan and records before, its classes' starting values,
// and the runs of every pass.
func (r *Report) following(prev *Report) {
	r.Before, r.BeforeRecords = prev.Before, prev.BeforeRecords
	r.Evaluations += prev.Evaluations
	r.Stopped += prev.Stopped
	r.Pruned += prev.Pruned
	for i := range r.Classes {
		for _, p := range prev.Classes {
			if p.Class == r.Classes[i].Class {
				r.Classes[i].Before, r.Classes[i].ExactBefore = p.Before, p.ExactBefore
			}
		}
	}
}

// exactValues counts the bit-exact values of recs; values counts them all.
func exactValues(recs []Record) int {
	n := 0
	for i := range recs {
		n += recs[i].Exact
	}
	return n
}

func values(recs []Record) int {
	n := 0
	for i := range recs {
		n += recs[i].N
	}
	return n
}

func (ds *discovery) discover(ctx context.Context) (*Report, error) {
	e, start, o := ds.e, ds.start, ds.opts
	if o.Search.DecisiveMargin == 0 {
		ds.opts.Search.DecisiveMargin = 2
	}
	ds.units = e.Units()
	for _, u := range ds.units {
		ds.ids = append(ds.ids, e.units.id(u))
	}
	ds.stage = "scoring the document's plan: nodes"
	before, err := ds.run(start, true)
	if err != nil {
		return nil, fmt.Errorf("plan: the document's own plan: %w", err)
	}
	rep := &Report{Before: start, BeforeRecords: before}
	ds.stage = ""

	// Stage 1: one factor per op class, coordinate descent over all.
	startA := search.Assignment{}
	var factors []search.Factor
	for _, class := range Classes() {
		us := ds.classUnits(class, "")
		if len(us) == 0 {
			continue
		}
		f := &factor{name: class, class: class, cover: ds.coverOf(us)}
		for _, c := range classCandidates(class, ds.acts) {
			if c.applies(ds.unitsOf(us)) {
				f.cands = append(f.cands, c)
			}
		}
		sv := ds.startValue(f, us)
		ds.byName[f.name] = f
		ds.order = append(ds.order, f)
		startA[f.name] = sv
		if ds.scored(before, f) == 0 {
			continue // not observable at any boundary: keep the document's plan
		}
		factors = append(factors, search.Factor{Name: f.name, Scope: "*", Values: labels(f.cands)})
	}
	for _, f := range ds.order {
		if !slices.ContainsFunc(factors, func(sf search.Factor) bool { return sf.Name == f.name }) {
			ds.keepStart(f)
		}
	}
	so := ds.opts.Search
	if o.Progress != nil {
		so.Progress = func(stage, round, done, total int) {
			o.Progress(fmt.Sprintf("op classes, round %d: candidates", round), done, total)
		}
	}
	res1, err := search.Run(ctx, factors, ds, startA, so)
	if err != nil {
		return nil, err
	}
	a := res1.Assignment
	rep.OutOfTime = res1.OutOfTime
	for i := range res1.Factors {
		if rep.OutOfTime {
			break // no time to score the bounds exactly: they stay bounds
		}
		f := ds.byName[res1.Factors[i].Name]
		if res1.Factors[i].Candidates, err = ds.resolve(ctx, f, a, res1.Factors[i].Candidates); err != nil {
			return nil, err
		}
	}

	// Stage 2: per role group, where the class's plan leaves a role's
	// boundaries inexact.
	mid, err := ds.run(ds.precisionOf(a), true)
	if err != nil {
		return nil, err
	}
	var roleFactors []search.Factor
	for _, f := range ds.order {
		if rep.OutOfTime {
			break // out of time: the classes' plan is the plan
		}
		if !slices.ContainsFunc(factors, func(sf search.Factor) bool { return sf.Name == f.name }) {
			continue
		}
		groups := ds.roleGroups(f.class)
		if len(groups) < 2 {
			continue
		}
		for _, g := range groups {
			us := g.units
			rf := &factor{name: f.class + "@" + g.name, class: f.class, glob: g.name, roles: g.roles, cover: ds.coverOf(us)}
			if ds.scored(mid, rf) == 0 || ds.errOf(mid, rf).Err == 0 {
				continue
			}
			rf.cands = roleCandidates(f, ds.acts, ds.unitsOf(us))
			ds.byName[rf.name] = rf
			ds.roles = append(ds.roles, rf)
			a[rf.name] = a[f.name]
			roleFactors = append(roleFactors, search.Factor{Name: rf.name, Scope: g.name, Values: labels(rf.cands)})
		}
	}
	var res2 *search.Result
	if len(roleFactors) > 0 {
		if o.Progress != nil {
			so.Progress = func(stage, round, done, total int) {
				o.Progress(fmt.Sprintf("roles, round %d: candidates", round), done, total)
			}
		}
		if res2, err = search.Run(ctx, roleFactors, ds, a, so); err != nil {
			return nil, err
		}
		a = res2.Assignment
		rep.OutOfTime = res2.OutOfTime
		for i, rf := range roleFactors {
			f := ds.byName[rf.Name]
			cv := a[f.class].(string)
			if rep.OutOfTime && !slices.ContainsFunc(res2.Factors[i].Candidates, func(c semantics.Candidate) bool { return c.Value == cv }) {
				a[rf.Name] = cv // the role was not reached: the class's plan holds
				continue
			}
			if !rep.OutOfTime {
				if res2.Factors[i].Candidates, err = ds.resolve(ctx, f, a, res2.Factors[i].Candidates, cv); err != nil {
					return nil, err
				}
			}
			rr := RoleReport{Class: f.class, Role: f.glob, Value: a[rf.Name].(string), ClassValue: cv,
				Candidates: res2.Factors[i].Candidates}
			classScored := false
			for _, c := range res2.Factors[i].Candidates {
				if c.Value == rr.Value {
					rr.Err = c.Score
				}
				if c.Value == cv {
					rr.ClassErr, rr.ClassAtLeast, classScored = c.Score, c.AtLeast, true
				}
			}
			if !classScored {
				return nil, fmt.Errorf("plan: role %s: the class's value %q was not scored", rf.Name, cv)
			}
			rr.Margin = ratio(rr.ClassErr, rr.Err)
			_, _, rr.Equivalent = decide(rr.Candidates, rr.Value)
			rep.Tried = append(rep.Tried, rr)
			if rr.Value == cv || rr.Margin < ds.opts.Search.DecisiveMargin {
				a[rf.Name] = cv // the trace shows no difference: the class's plan holds
				continue
			}
			rep.Roles = append(rep.Roles, rr)
		}
	}

	after := ds.precisionOf(a)
	scored, err := ds.run(after, true)
	if err != nil {
		return nil, err
	}
	ds.stage = "scoring the plan found: nodes"
	recs, err := ds.run(after, false)
	if err != nil {
		return nil, err
	}
	after.Exact = exactByBoundary(recs)
	after.Scoring = scoringOf(scored)
	after.Status = "searched"
	if rep.OutOfTime {
		after.Status = "partial"
	}
	rep.After, rep.AfterRecords, rep.Scoring = after, recs, after.Scoring
	rep.Evaluations, rep.Stopped, rep.Pruned = ds.evals, ds.stops, res1.Pruned
	if res2 != nil {
		rep.Pruned += res2.Pruned
	}
	for _, f := range ds.order {
		row := ClassReport{Class: f.class, Before: startA[f.name].(string), After: a[f.name].(string)}
		for _, sf := range res1.Factors {
			if sf.Name == f.name {
				row.Observed = true
				row.Candidates = sf.Candidates
				_, row.Margin, row.Equivalent = decide(sf.Candidates, row.After)
				// A bound over an exact winner still makes the margin +Inf.
				row.MarginAtLeast = runnerUpBound(sf.Candidates, row.After) && !math.IsInf(row.Margin, 1)
				row.Decisive = row.Margin >= ds.opts.Search.DecisiveMargin
				if !row.Decisive {
					row.Note = fmt.Sprintf("margin %.3g below %.3g: the trace does not tell the candidates apart", row.Margin, ds.opts.Search.DecisiveMargin)
				}
				if n := len(f.cands) - len(sf.Candidates); n > 0 {
					// the best of those scored, not of all
					row.Decisive = false
					row.Note = fmt.Sprintf("%d of %d candidates not scored: the search ran out of time", n, len(f.cands))
				}
			}
		}
		if !row.Observed {
			row.Note = "no captured boundary depends on this class: the document's plan is kept"
		}
		row.Boundaries, row.ExactBefore = classExact(before, f.class)
		_, row.ExactAfter = classExact(scored, f.class)
		row.Scored = ds.scored(recs, f)
		if row.Boundaries == 0 {
			row.ExactBefore = 1 - ds.errOf(before, f).Err
			row.ExactAfter = 1 - ds.errOf(scored, f).Err
		}
		rep.Classes = append(rep.Classes, row)
	}
	ds.attachEvidence(rep, recs)
	return rep, nil
}

// roleCandidates are a role group's candidates: every candidate of its
// class that applies to its units (a norm kind's own ones too, which a
// class of mixed kinds does not offer), and the class's declared plan
// where the start plan matched no candidate: a role's reading is measured
// against the class's value, so that value is scored too (without it a
// role that needs another rule keeps the class's).
func roleCandidates(class *factor, acts string, us []Unit) []Candidate {
	var out []Candidate
	for _, c := range classCandidates(class.class, acts) {
		if c.applies(us) {
			out = append(out, c)
		}
	}
	for _, c := range class.cands {
		if c.applies(us) && !slices.ContainsFunc(out, func(o Candidate) bool { return o.Label == c.Label }) {
			out = append(out, c)
		}
	}
	return out
}

// decide reads a factor's scored candidates: the winner's error, the
// margin over the best candidate that scores differently, and the
// candidates that score exactly as the winner (the pruned ones, not
// scored, are neither).
func decide(cands []semantics.Candidate, winner string) (err, margin float64, equivalent []string) {
	err = math.Inf(1)
	for _, c := range cands {
		if c.Value == winner {
			err = c.Score
		}
	}
	runnerUp := math.Inf(1)
	for _, c := range cands {
		switch {
		case c.Value == winner, c.Pruned != "":
		case c.Score == err:
			equivalent = append(equivalent, fmt.Sprint(c.Value))
		case c.Score > err:
			runnerUp = min(runnerUp, c.Score)
		}
	}
	switch {
	case math.IsInf(runnerUp, 1) || runnerUp == math.MaxFloat64 && err == math.MaxFloat64:
		margin = 1
		if err == 0 && !math.IsInf(runnerUp, 1) {
			margin = math.Inf(1)
		}
	default:
		margin = ratio(runnerUp, err)
	}
	return err, margin, equivalent
}

// runnerUpBound says whether the candidate decide takes for the runner-up
// has only a bound for its score.
func runnerUpBound(cands []semantics.Candidate, winner string) bool {
	e, _, _ := decide(cands, winner)
	best := -1
	for i, c := range cands {
		if c.Value != winner && c.Pruned == "" && c.Score > e && (best < 0 || c.Score < cands[best].Score) {
			best = i
		}
	}
	return best >= 0 && cands[best].AtLeast
}

// attachEvidence gives each searched rule of rep.After its factor's
// evidence.
func (ds *discovery) attachEvidence(rep *Report, recs []Record) {
	roles := map[string]RoleReport{}
	for _, rr := range rep.Roles {
		roles[rr.Class+"@"+rr.Role] = rr
	}
	classes := map[string]ClassReport{}
	for _, c := range rep.Classes {
		classes[c.Class] = c
	}
	for i := range rep.After.Rules {
		r := &rep.After.Rules[i]
		class := Unit{Op: r.Op, Role: r.Role}.Class()
		name := class
		if r.Role != "" {
			if _, ok := roles[class+"@"+r.Role]; ok {
				name = class + "@" + r.Role
			}
		}
		f, ok := ds.byName[name]
		if !ok {
			continue
		}
		sc := ds.errOf(recs, f)
		ev := &semantics.RuleEvidence{Metric: search.MetricExact, Boundaries: ds.scored(recs, f), Exact: 1 - sc.Err}
		if rr, ok := roles[name]; ok {
			ev.Margin, ev.Equivalent, ev.Candidates = semantics.Margin(rr.Margin), rr.Equivalent, rr.Candidates
			ev.MarginAtLeast = rr.ClassAtLeast && !math.IsInf(rr.Margin, 1)
		} else if c, ok := classes[class]; ok && c.Observed {
			ev.Margin, ev.Equivalent, ev.Candidates = semantics.Margin(c.Margin), c.Equivalent, c.Candidates
			ev.MarginAtLeast = c.MarginAtLeast
		} else {
			continue
		}
		// a class some of whose candidates the time left unscored is the
		// best of those scored, never decisive
		ev.Decisive = float64(ev.Margin) >= ds.opts.Search.DecisiveMargin && len(ev.Candidates) == len(f.cands)
		r.Evidence = ev
	}
}

func labels(cs []Candidate) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		out[i] = c.Label
	}
	return out
}

func ratio(a, b float64) float64 {
	switch {
	case a == 0 && b == 0:
		return 1
	case b == 0:
		return math.Inf(1)
	}
	return a / b
}

// classUnits lists the indexes of the units of class whose role matches
// glob ("" for all).
func (ds *discovery) classUnits(class, glob string) []int {
	var out []int
	for i, u := range ds.units {
		if u.Class() == class && (glob == "" || semantics.MatchScope(glob, u.Role)) {
			out = append(out, i)
		}
	}
	return out
}

func (ds *discovery) unitsOf(idx []int) []Unit {
	out := make([]Unit, len(idx))
	for i, j := range idx {
		out[i] = ds.units[j]
	}
	return out
}

func (ds *discovery) coverOf(idx []int) bits {
	var b bits
	for _, j := range idx {
		b.set(ds.ids[j])
	}
	return b
}

// groups lists a class's role groups in first-seen order.
// roleGroup is the units of one per-role factor: a role glob's, or one
// node of a program in every block of one shape.
type roleGroup struct {
	name  string
	units []int
	roles []string // a program's: each unit's role (nil: name is a glob)
}

// roleGroups are class's role groups: a document's roles by RoleGroup;
// a program's node with the same node of the other blocks of its shape
// (blockNode: its module path with the blocks' indices wildcards, its op,
// and which node of that op it is in its module), since blocks of one
// shape round alike; any other node alone.
func (ds *discovery) roleGroups(class string) []roleGroup {
	var out []roleGroup
	index := map[string]int{}
	nth := map[string]int{} // a module's nodes of one op so far
	for _, j := range ds.classUnits(class, "") {
		role := ds.units[j].Role
		name, roles := RoleGroup(role), []string(nil)
		if name == role {
			if pattern, module, op, ok := blockNode(role); ok {
				k := nth[module+"|"+op]
				nth[module+"|"+op] = k + 1
				name, roles = fmt.Sprintf("%s[%d]", pattern, k), []string{role}
			}
		}
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, roleGroup{name: name})
		}
		out[i].units = append(out[i].units, j)
		if roles != nil {
			out[i].roles = append(out[i].roles, roles...)
		}
	}
	return out
}

// startValue is the candidate of f that the start plan gives its first
// unit; a plan no candidate matches becomes a candidate of its own.
func (ds *discovery) startValue(f *factor, us []int) string {
	if f.class == "rope_table" {
		t := ds.start.RopeTable
		for _, c := range f.cands {
			if t != nil && *c.Table == *t {
				return c.Label
			}
		}
		if t == nil {
			return f.cands[0].Label
		}
		c := Candidate{Label: "declared " + tableLabel(t), Table: t}
		f.cands = append(f.cands, c)
		return c.Label
	}
	for _, c := range f.cands {
		if ds.sameSpecs(c, ds.start, us) {
			return c.Label
		}
	}
	u := ds.units[us[0]]
	s, err := program.SpecFor(&ds.start, u.Op, u.Role)
	if err != nil {
		return f.cands[0].Label
	}
	var rules []semantics.PrecisionRule
	for _, op := range classOps(f) {
		s2, _ := program.SpecFor(&ds.start, op.Op, op.Role)
		rules = append(rules, ruleOf(op.Op, op.Role, s2, ds.acts))
	}
	c := Candidate{Label: "declared " + specLabel(s, ds.acts), Rules: rules}
	f.cands = append(f.cands, c)
	return c.Label
}

// classOps lists the (op, role) templates of a factor's candidates.
func classOps(f *factor) []semantics.PrecisionRule {
	var out []semantics.PrecisionRule
	for _, r := range f.cands[0].Rules {
		out = append(out, semantics.PrecisionRule{Op: r.Op, Role: r.Role})
	}
	return out
}

// sameSpecs reports whether candidate c gives units us the specs plan p
// gives them.
func (ds *discovery) sameSpecs(c Candidate, p semantics.Precision, us []int) bool {
	cp := semantics.Precision{Activations: ds.acts, Rules: c.Rules}
	for _, j := range us {
		u := ds.units[j]
		a, err1 := program.SpecFor(&cp, u.Op, u.Role)
		b, err2 := program.SpecFor(&p, u.Op, u.Role)
		if err1 != nil || err2 != nil || a != b {
			return false
		}
	}
	return true
}

func ruleOf(op, role string, s exec.Spec, acts string) semantics.PrecisionRule {
	r := semantics.PrecisionRule{Op: op, Role: role}
	if o := s.Out.String(); o != acts {
		r.Out = o
	}
	if s.Round != 0 {
		r.Round = s.Round.String()
	}
	if s.Math != 0 {
		r.Math = s.Math.String()
	}
	return r
}

func specLabel(s exec.Spec, acts string) string {
	r := ruleOf("", "", s, acts)
	return spec{r.Out, r.Round, r.Math}.label()
}

// keepStart keeps the start plan's rules for the ops of a class that is
// not searched.
func (ds *discovery) keepStart(f *factor) {
	for _, r := range ds.start.Rules {
		for _, t := range classOps(f) {
			if r.Op == t.Op && (t.Role == "" || r.Role == t.Role) && !slices.Contains(ds.kept, r) {
				ds.kept = append(ds.kept, r)
			}
		}
	}
}

// precisionOf is the plan of an assignment: per-role rules first, then
// the classes' rules, then the start's rules for classes not searched;
// rules that change no unit's spec are dropped.
func (ds *discovery) precisionOf(a search.Assignment) semantics.Precision {
	p := semantics.Precision{Status: "searched", Activations: ds.acts, RopeTable: ds.start.RopeTable}
	for _, r := range ds.start.Rules {
		if r.Pinned {
			p.Rules = append(p.Rules, r)
		}
	}
	emit := func(f *factor, glob string) {
		label, _ := a[f.name].(string)
		for _, c := range f.cands {
			if c.Label != label {
				continue
			}
			if c.Table != nil {
				t := *c.Table
				p.RopeTable = &t
			}
			for _, r := range c.Rules {
				if r.Role == "" {
					r.Role = glob
				}
				p.Rules = append(p.Rules, r)
			}
		}
	}
	for _, f := range ds.roles {
		if a[f.name] == nil || a[f.name] == a[f.class] {
			continue
		}
		if f.roles == nil {
			emit(f, f.glob)
		}
		for _, r := range f.roles {
			emit(f, r)
		}
	}
	for _, f := range ds.order {
		emit(f, "")
	}
	p.Rules = append(p.Rules, ds.kept...)
	withArithmetic(p.Rules)
	p.Rules = ds.simplify(p)
	return p
}

// withArithmetic gives each pinned rule without rounding points or math
// variants those of the first searched rule after it that matches its node:
// a pinned rule fixes a node's storage format (an f32 norm in a bf16
// model), and shadows every rule after it, so without this the class's
// arithmetic (CUDA's Welford statistics, the CPU kernel's) could never
// reach that node.
func withArithmetic(rules []semantics.PrecisionRule) {
	for i, r := range rules {
		if !r.Pinned || r.Round != "" || r.Math != "" {
			continue
		}
		for _, q := range rules[i+1:] {
			if !q.Pinned && q.Op == r.Op && (q.Role == "" || semantics.MatchScope(q.Role, r.Role)) {
				rules[i].Round, rules[i].Math = q.Round, q.Math
				break
			}
		}
	}
}

// run evaluates a plan (memoised by the plan): on every row, or as the
// candidates are scored (sampled rows where they decide alike).
func (ds *discovery) run(p semantics.Precision, sampled bool) ([]Record, error) {
	recs, _, err := ds.runWithin(p, sampled, nil, 0)
	return recs, err
}

// runWithin is run that gives up, when names is not nil, once the sum of
// those factors' errors is certain to exceed bound (complete false: the
// records so far).
func (ds *discovery) runWithin(p semantics.Precision, sampled bool, names []string, bound float64) (recs []Record, complete bool, err error) {
	p.Exact, p.Scoring = nil, nil
	js, err := json.Marshal(p)
	if err != nil {
		return nil, false, err
	}
	k := runKey{plan: string(js), sampled: sampled && ds.sample > 0}
	if recs, ok := ds.cache[k]; ok {
		return recs, true, nil
	}
	ro := runOpts{}
	if k.sampled {
		ro.sample = ds.sample
	}
	if names != nil && ds.tmpl != nil && !math.IsInf(bound, 1) && !ds.opts.Exhaustive {
		ro.stop = ds.stopper(names, bound)
	}
	recs, err = ds.e.run(p, ro)
	ds.evals++
	if errors.Is(err, errStopped) {
		ds.stops++
		return recs, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	ds.cache[k] = recs
	if k.sampled && ds.tmpl == nil {
		ds.tmpl = recs
	}
	return recs, true, nil
}

// Score is the search objective: 1 − the fraction of values bit-exact over
// the boundaries whose value depends on the factor's units, rel-RMS over
// them as the tie breaker (on the candidates' sampled rows).
func (ds *discovery) Score(ctx context.Context, name string, a search.Assignment) (search.Score, error) {
	f, ok := ds.byName[name]
	if !ok {
		return search.Score{}, fmt.Errorf("plan: unknown factor %q", name)
	}
	recs, err := ds.run(ds.precisionOf(a), true)
	if err != nil {
		if errors.Is(err, exec.ErrUnsupported) {
			return search.Score{Err: math.Inf(1), TieBreak: math.Inf(1), Metric: search.MetricExact}, nil
		}
		return search.Score{}, err
	}
	return ds.errOf(recs, f), nil
}

// Stage scores every factor of a stage under a at once (one run), and
// stops the run once the sum of their errors is certain to exceed bound:
// an error only grows with the values seen (search.BoundedObjective).
func (ds *discovery) Stage(ctx context.Context, names []string, a search.Assignment, bound float64) ([]search.Score, bool, error) {
	fs := make([]*factor, len(names))
	for i, n := range names {
		if fs[i] = ds.byName[n]; fs[i] == nil {
			return nil, false, fmt.Errorf("plan: unknown factor %q", n)
		}
	}
	recs, complete, err := ds.runWithin(ds.precisionOf(a), true, names, bound)
	scores := make([]search.Score, len(fs))
	switch {
	case errors.Is(err, exec.ErrUnsupported):
		for i := range scores {
			scores[i] = search.Score{Err: math.Inf(1), TieBreak: math.Inf(1), Metric: search.MetricExact}
		}
		return scores, true, nil
	case err != nil:
		return nil, false, err
	case complete:
		for i, f := range fs {
			scores[i] = ds.errOf(recs, f)
		}
		return scores, true, nil
	}
	// Stopped: each factor's inexact values so far over all it scores.
	for i, f := range fs {
		n, bad := 0, 0
		for _, j := range ds.tmplRecs(f) {
			n += ds.tmpl[j].N
			if j < len(recs) { // the records so far: the template's first
				bad += recs[j].N - recs[j].Exact
			}
		}
		scores[i] = search.Score{Metric: search.MetricExact, Bound: true}
		if n > 0 { // errOf's expression, so that a bound that saw everything is the score
			scores[i].Err = 1 - float64(n-bad)/float64(n)
		}
	}
	return scores, false, nil
}

// Prune rules out a costly candidate (Candidate.costly: a tensor core's
// sums) where every value the factor's ops can change is bit-exact under
// a already, as is their rel-RMS: another rounding of those ops can only
// make some of them worse, and no other value depends on them, so the
// stage's total cannot fall (search.Pruner). The reason names the value
// in hand. Never pruned: a role factor's class value (the role's rule is
// kept only where it scores differently from that), and anything when
// Exhaustive.
func (ds *discovery) Prune(ctx context.Context, name string, v any, a search.Assignment) (string, error) {
	f, ok := ds.byName[name]
	if !ok {
		return "", fmt.Errorf("plan: unknown factor %q", name)
	}
	if ds.opts.Exhaustive {
		return "", nil
	}
	c, ok := f.candidate(v)
	if !ok || !c.costly {
		return "", nil
	}
	if f.glob != "" && v == a[f.class] {
		return "", nil // a role's rule is kept against its class's value, scored
	}
	recs, err := ds.run(ds.precisionOf(a), true)
	switch {
	case errors.Is(err, exec.ErrUnsupported):
		return "", nil
	case err != nil:
		return "", err
	}
	sc := ds.errOf(recs, f)
	if c.far {
		// judged on the class's own outputs: every boundary after a
		// convolution depends on it, and its attention's misses are not
		// the convolution's; with none captured it is not tried
		if e := classRelRMS(recs, f.class); e <= unitRoundoff(ds.acts) {
			return fmt.Sprintf("%s: the class's outputs are within a rounding of the trace under %v (rel-RMS %.3g)", PrunedExact, a[name], e), nil
		}
	}
	if ds.scored(recs, f) == 0 || sc.Err != 0 || sc.TieBreak != 0 {
		return "", nil
	}
	return fmt.Sprintf("%s: every value it can change is bit-exact under %v", PrunedExact, a[name]), nil
}

// unitRoundoff is the activations' format's unit roundoff (2⁻⁸ in bf16),
// +Inf for f32 and unknown formats (no stored-sum candidate there).
func unitRoundoff(acts string) float64 {
	f, err := precision.ParseFormat(acts)
	if err != nil {
		return math.Inf(1)
	}
	switch f {
	case precision.BF16:
		return 0x1p-8
	case precision.F16:
		return 0x1p-11
	}
	return math.Inf(1)
}

// PrunedExact begins the reason of a candidate Prune did not score.
const PrunedExact = "not scored"

// candidate is f's candidate labelled v.
func (f *factor) candidate(v any) (Candidate, bool) {
	for _, c := range f.cands {
		if c.Label == v {
			return c, true
		}
	}
	return Candidate{}, false
}

// stopper is a run's stop for a stage of factors names and the best total
// so far: each record adds its inexact values times the weight they have
// in the total (Σ over the factors whose units it depends on of 1 / the
// values the factor scores, from the template run), and the run stops
// once that exceeds bound. A run whose records are not the template's
// (another program) is not stopped.
func (ds *discovery) stopper(names []string, bound float64) func(*Record, bool) bool {
	n := make([]int, len(names))
	covering := make([][]int, len(ds.tmpl)) // the factors of each record, in names' order
	for k, name := range names {
		f := ds.byName[name]
		for _, j := range ds.tmplRecs(f) {
			n[k] += ds.tmpl[j].N
			covering[j] = append(covering[j], k)
		}
	}
	i, lb, off := 0, 0.0, false
	limit := bound*(1+1e-9) + 1e-15 // never on a tie
	// weigh is r's inexact values in the total; r is the template's record i
	weigh := func(r *Record) float64 {
		w := 0.0
		if bad := r.N - r.Exact; bad > 0 {
			for _, k := range covering[i] {
				if n[k] > 0 {
					w += float64(bad) / float64(n[k])
				}
			}
		}
		return w
	}
	return func(r *Record, partial bool) bool {
		if off || i >= len(ds.tmpl) || ds.tmpl[i].Key != r.Key || r.N > ds.tmpl[i].N || !partial && r.N != ds.tmpl[i].N {
			off = off || !partial
			return false
		}
		if partial {
			return lb+weigh(r) > limit
		}
		lb += weigh(r)
		i++
		return lb > limit
	}
}

// resolve scores exactly the candidates whose score is only a bound where
// the bound leaves the factor's reading open: a bound not above the
// winner's error (equivalent, or not), the runner-up's when it does not
// already make the margin decisive, and those of must (a class's value
// against a role's) when it does not. A pruned candidate stays unscored:
// it could not win.
func (ds *discovery) resolve(ctx context.Context, f *factor, a search.Assignment, cands []semantics.Candidate, must ...string) ([]semantics.Candidate, error) {
	if f == nil {
		return cands, nil
	}
	m := ds.opts.Search.DecisiveMargin
	winner, _ := a[f.name].(string)
	exact := func(i int) error {
		c := maps.Clone(a)
		c[f.name] = cands[i].Value
		sc, err := ds.Score(ctx, f.name, c)
		if err != nil {
			return err
		}
		cands[i].Score, cands[i].AtLeast = finite(sc.Err), false
		return nil
	}
	errOf := func() float64 {
		for _, c := range cands {
			if c.Value == winner {
				return c.Score
			}
		}
		return math.Inf(1)
	}
	open := func(c semantics.Candidate, e float64) bool {
		return c.AtLeast && (c.Score <= e*(1+1e-9) || e > 0 && c.Score < m*e)
	}
	for i := range cands {
		if cands[i].Value == winner && cands[i].AtLeast {
			if err := exact(i); err != nil {
				return nil, err
			}
		}
	}
	for {
		e := errOf()
		next := -1
		runnerUp := -1
		for i, c := range cands {
			if c.Value == winner || c.Pruned != "" {
				continue
			}
			if c.AtLeast && c.Score <= e*(1+1e-9) || c.AtLeast && slices.Contains(must, fmt.Sprint(c.Value)) && open(c, e) {
				next = i
				break
			}
			if c.Score > e && (runnerUp < 0 || c.Score < cands[runnerUp].Score) {
				runnerUp = i
			}
		}
		if next < 0 && runnerUp >= 0 && open(cands[runnerUp], e) {
			next = runnerUp
		}
		if next < 0 {
			return cands, nil
		}
		if err := exact(next); err != nil {
			return nil, err
		}
	}
}

// finite maps +Inf (JSON has none) to the largest float, as search does.
func finite(x float64) float64 {
	if math.IsInf(x, 1) {
		return math.MaxFloat64
	}
	return x
}

// scoringOf is, per boundary, how many of its rows the candidates were
// scored on (every row where the run did not sample it).
func scoringOf(recs []Record) map[string]semantics.Scored {
	out := map[string]semantics.Scored{}
	for i := range recs {
		r := &recs[i]
		s := semantics.Scored{Rows: r.Rows, Of: r.OfRows}
		if !r.Sampled() {
			rows := 1
			if len(r.Shape) > 0 && r.Shape[len(r.Shape)-1] > 0 {
				rows = max(1, r.N/r.Shape[len(r.Shape)-1])
			}
			s = semantics.Scored{Rows: rows, Of: rows}
		}
		if old, ok := out[r.Boundary()]; !ok || old.Rows < s.Rows {
			out[r.Boundary()] = s
		}
	}
	return out
}

// errOf pools f's records.
func (ds *discovery) errOf(recs []Record, f *factor) search.Score {
	var n, exact int
	var sd, sr float64
	worst, worstFrac := "", 2.0
	for _, i := range ds.recsOf(recs, f) {
		r := &recs[i]
		n += r.N
		exact += r.Exact
		sd += r.SumD2
		sr += r.SumR2
		if fr := r.ExactFraction(); fr < worstFrac {
			worst, worstFrac = r.Key, fr
		}
	}
	sc := search.Score{Metric: search.MetricExact, Boundary: worst}
	if n > 0 {
		sc.Err = 1 - float64(exact)/float64(n)
		sc.TieBreak = precision.RelRMSFromSums(sd, sr)
	}
	return sc
}

// scored counts f's records.
func (ds *discovery) scored(recs []Record, f *factor) int {
	return len(ds.recsOf(recs, f))
}

// recsOf lists the indexes of f's records in recs, those whose cone meets
// f's cover: the template's list where recs are the template's records
// (every complete run of the program), else found anew.
func (ds *discovery) recsOf(recs []Record, f *factor) []int {
	if ds.likeTmpl(recs) {
		return ds.tmplRecs(f)
	}
	var out []int
	for i := range recs {
		if recs[i].cone.intersects(f.cover) {
			out = append(out, i)
		}
	}
	return out
}

// tmplRecs lists the indexes of the template's records whose cone meets
// f's cover (kept on f: every candidate's run asks).
func (ds *discovery) tmplRecs(f *factor) []int {
	if f.recs == nil {
		f.recs = []int{}
		for j := range ds.tmpl {
			if ds.tmpl[j].cone.intersects(f.cover) {
				f.recs = append(f.recs, j)
			}
		}
	}
	return f.recs
}

// likeTmpl reports whether recs are the template's records: the same
// boundaries in the same order (and so the same cones). The last answer
// is kept: one run's records are asked about once per factor.
func (ds *discovery) likeTmpl(recs []Record) bool {
	if ds.tmpl == nil || len(recs) != len(ds.tmpl) {
		return false
	}
	if len(recs) > 0 && &recs[0] == ds.likeRecs {
		return ds.likeOK
	}
	ok := true
	for i := range recs {
		if recs[i].Key != ds.tmpl[i].Key || !slices.Equal(recs[i].cone, ds.tmpl[i].cone) {
			ok = false
			break
		}
	}
	if len(recs) > 0 {
		ds.likeRecs, ds.likeOK = &recs[0], ok
	}
	return ok
}

// classExact pools the records made by an op of class.
func classExact(recs []Record, class string) (int, float64) {
	var n, b, exact int
	for i := range recs {
		if recs[i].OpClass == class {
			b++
			n += recs[i].N
			exact += recs[i].Exact
		}
	}
	if n == 0 {
		return b, 1
	}
	return b, float64(exact) / float64(n)
}

// classRelRMS pools the rel-RMS of the records an op of class made (0
// where there are none).
func classRelRMS(recs []Record, class string) float64 {
	var sd, sr float64
	for i := range recs {
		if recs[i].OpClass == class {
			sd += recs[i].SumD2
			sr += recs[i].SumR2
		}
	}
	if sr == 0 {
		return 0
	}
	return precision.RelRMSFromSums(sd, sr)
}

// exactByBoundary pools each boundary's exact fraction over the steps.
func exactByBoundary(recs []Record) map[string]float64 {
	n, ex := map[string]int{}, map[string]int{}
	for i := range recs {
		k := recs[i].Boundary()
		n[k] += recs[i].N
		ex[k] += recs[i].Exact
	}
	out := make(map[string]float64, len(n))
	for k, v := range n {
		out[k] = 1
		if v > 0 {
			out[k] = float64(ex[k]) / float64(v)
		}
	}
	return out
}

// String summarises a role report.
func (r RoleReport) String() string {
	return fmt.Sprintf("%s %s: %s (class plan %s: %.4g%% → %.4g%% exact)", r.Class, r.Role, r.Value, r.ClassValue,
		100*(1-r.ClassErr), 100*(1-r.Err))
}
