package check

import (
	"fmt"
	"maps"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Mode names, as verify reports them.
const (
	TeacherForced = "teacher-forced"
	FreeRunning   = "free-running"
)

// Options configure Run.
type Options struct {
	// Steps is how many model calls of a flow_euler run to make (0: all).
	Steps int
	// FreeRunning runs on our own values from the request on; otherwise
	// teacher forced.
	FreeRunning bool
	// Progress, when set, is told after each program node run how many
	// of the run's nodes (the program's, once per model call) have run.
	Progress func(done, total int)
	// KeepIf, when set, keeps both sides' values only in the records it
	// accepts (the others have Ours and Ref nil): a check that looks at
	// the boundaries it fails holds those, not the trace.
	KeepIf func(*plan.Record) bool
}

// Report is one run of a document against its trace.
type Report struct {
	Mode string
	// Records are the compared boundaries in execution order, with both
	// sides' values (Ours, Ref; those KeepIf accepts when it is set).
	Records []plan.Record
	// Skipped are the boundaries inside parts the document leaves
	// undetermined (a partial program's passed blocks): not computed, so
	// not compared.
	Skipped []plan.Record
	// Class is each record's op class by trace key (plan.Record.OpClass).
	Class map[string]string
	// Unmatched are the keys the program tapped where the reference
	// holds another shape (not compared), with our value's shape.
	Unmatched map[string][]int
	// Partial says the program was built around holes (BuildPartial).
	Partial bool
}

// Run runs doc's program on tr's weights and request and compares every
// boundary tr holds. A document with holes runs as a partial program,
// teacher forced only. The error is the document's or the trace's: the
// program does not build, a reference tensor cannot be read, an op the
// backend cannot run.
func Run(b exec.Backend, doc *semantics.Document, tr *trace.Trace, o Options) (*Report, error) {
	rep := &Report{Mode: TeacherForced, Class: map[string]string{}}
	if o.FreeRunning {
		rep.Mode = FreeRunning
	}
	holes := doc.Holes()
	if len(holes) > 0 && o.FreeRunning {
		return nil, fmt.Errorf("the document is incomplete (%s: %s): free running needs every part of the program", holes[0].Address, holes[0].Problem)
	}
	rep.Partial = len(holes) > 0
	// One run: nothing is worth keeping on the backend for a next one.
	e, err := plan.NewEvaluator(b, tr, doc, plan.Options{Steps: o.Steps, FreeRunning: o.FreeRunning, Keep: true, KeepIf: o.KeepIf,
		Partial: rep.Partial, CacheBytes: -1, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	recs, err := e.Run(doc.Precision)
	if err != nil {
		return nil, err
	}
	rep.Unmatched = e.Unmatched()
	taps := e.Program().PassedTaps()
	passed := map[string]bool{}
	for _, tp := range taps {
		passed[tp.Module+"/"+tp.Port] = true
	}
	for _, r := range recs {
		if passed[r.Module+"/"+r.Port] {
			rep.Skipped = append(rep.Skipped, r)
			continue
		}
		rep.Records = append(rep.Records, r)
		rep.Class[r.Key] = r.OpClass
	}
	if err := checkPassed(doc, taps, rep.Skipped, recs); err != nil {
		return nil, err
	}
	return rep, nil
}

// checkPassed: teacher forcing must have replaced every passed block's
// output at every step the run made (a record is made exactly when it
// is), or what follows the block was computed from its inputs, not its
// outputs.
func checkPassed(doc *semantics.Document, taps []program.Tap, skipped, recs []plan.Record) error {
	if len(taps) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, r := range skipped {
		have[r.Key] = true
	}
	steps := map[int]bool{}
	for _, r := range recs {
		if r.Module != "" && r.Module != doc.Structure.Model.Module {
			steps[r.Step] = true
		}
	}
	for _, s := range slices.Sorted(maps.Keys(steps)) {
		for _, tp := range taps {
			if !tp.In && !have[tp.Key(s)] {
				return fmt.Errorf("the reference does not hold %s, the output of a block the document leaves undetermined: the check cannot pass the block", tp.Key(s))
			}
		}
	}
	return nil
}
