package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
)

type precisionOpts struct {
	trace, semantics, out string
	fromScratch           bool
	steps                 int
	format                string
	jobs                  int
	budget                time.Duration // 0: no limit
}

// newPrecisionCmd is `zflow precision`: precision discovery (DESIGN.md,
// Discovery step 4).
func newPrecisionCmd() *cobra.Command {
	var o precisionOpts
	cmd := &cobra.Command{
		Use:   "precision --trace REF --semantics S.json [-o S2.json]",
		Short: "Discover where the reference rounds: search the precision plan until boundaries are bit-exact",
		Long: `precision searches the rounding plan of a semantics document against the
reference trace it describes: for each op class (norm, modulate,
gated_residual, act, glu, linear, attention, rope, rope_table,
timestep_embed, add, mul, euler_step, timestep_cast) the candidate
precisions (where it stores to the activations' format: after every
primitive or only at the end; norm statistics and the normalised value;
fast or precise exp; a GEMM's bias before or after rounding; flash-style or
math attention; a residual stream in f32 or not), each scored teacher
forced: every boundary the trace holds is computed from the reference's own
values at the boundaries before it, and the score is 1 − the fraction of
values bit-exact in the stored format (rel-RMS breaks ties). Coordinate
descent runs over all classes at once, then, where a class's plan leaves a
role's boundaries inexact, over that role group (q/k norms apart from block
norms, ...); a per-role rule is kept only when its margin over the class's
plan is decisive.

It starts from the document's plan (--from-scratch: from an empty one) and
prints one row per op class: the plan before and after, the exact fraction
over the class's boundaries before and after, and the margin (error of the
best candidate that scores differently / the winner's). With -o it writes
the document with the plan found (precision.status "searched", each rule's
evidence, each boundary's exact fraction in precision.exact), atomically.
--budget bounds the search: past it the plan is the best found by then
(precision.status "partial"; stages and candidates not reached left out).

Exit codes: 0 done, 2 bad input (a trace, a document, a flag).`,
		Example: `  zflow precision --trace fixtures/dit/dit-bf16.npz --semantics semantics/testdata/dit-bf16.json --from-scratch
  zflow precision --trace fixtures/dit/dit-bf16.npz --semantics semantics/testdata/dit-bf16.json -o /tmp/dit-bf16.json --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPrecision(cmd.OutOrStdout(), newUI(cmd), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "the reference trace (default: the workspace's reference)")
	f.StringVar(&o.semantics, "semantics", "", "the semantics document (default: the workspace's)")
	f.StringVarP(&o.out, "out", "o", "", "write the document with the discovered plan here")
	f.BoolVar(&o.fromScratch, "from-scratch", false, "start from an empty plan (no rules, no rope_table) instead of the document's")
	f.IntVar(&o.steps, "steps", 0, "model calls per evaluation of a flow_euler run (0: all)")
	f.DurationVar(&o.budget, "budget", 0, "the longest the search may try plans (0: no limit); past it the best plan found so far is kept (precision.status \"partial\")")
	addFormatFlag(cmd, &o.format, tableJSON, nil)
	f.IntVar(&o.jobs, "jobs", 0, "CPU worker goroutines, 1 to 1024 (default: one per core)")
	return cmd
}

// workspacePaths fills a trace and a document path from the workspace.
func workspacePaths(tr, doc string) (string, string, error) {
	if tr != "" && doc != "" {
		return tr, doc, nil
	}
	ws, err := loadWorkspace()
	if err != nil {
		return "", "", err
	}
	if tr == "" {
		tr = ws.Reference
	}
	if doc == "" {
		doc = ws.Semantics
	}
	switch {
	case tr == "":
		return "", "", fmt.Errorf("no reference trace: give --trace or set the workspace's (zflow workspace --ref REF)")
	case doc == "":
		return "", "", fmt.Errorf("no semantics document: give --semantics or set the workspace's")
	}
	return tr, doc, nil
}

func runPrecision(stdout io.Writer, u ui, o precisionOpts) error {
	if !slices.Contains(tableJSON, o.format) {
		return badInput(fmt.Errorf("--format %q: want %s", o.format, orList(tableJSON)))
	}
	if o.steps < 0 {
		return badInput(fmt.Errorf("--steps %d: want 0 (all) or more", o.steps))
	}
	if o.budget < 0 {
		return badInput(fmt.Errorf("--budget %s: want 0 (no limit) or more", o.budget))
	}
	trPath, docPath, err := workspacePaths(o.trace, o.semantics)
	if err != nil {
		return badInput(err)
	}
	if o.out != "" && (sameFile(o.out, trPath) || o.out == trPath) {
		return badInput(fmt.Errorf("-o %s would overwrite the trace", o.out))
	}
	if o.out != "" {
		if err := checkOutputPath("-o", o.out); err != nil {
			return badInput(err)
		}
	}
	doc, err := semantics.Read(docPath)
	if err != nil {
		return badInput(err)
	}
	tr, err := u.openTrace(trPath)
	if err != nil {
		return badInput(err)
	}
	defer tr.Close()
	if o.fromScratch {
		doc.Precision = semantics.Precision{Status: "placeholder", Activations: doc.Precision.Activations}
	}
	rep, err := searchPlan(context.Background(), u, cpu.New(o.jobs), tr, doc, plan.Options{Steps: o.steps}, o.budget, "--budget")
	if err != nil {
		return badInput(fmt.Errorf("%s on %s: %w", docPath, trPath, err))
	}
	if o.out != "" {
		doc.Precision = rep.After
		doc.Source.StampZflowVersion(versionString())
		if err := doc.Write(o.out); err != nil {
			return badInput(err)
		}
	}
	if o.format == "json" {
		return writeJSON(stdout, precisionDocument(trPath, docPath, rep))
	}
	fmt.Fprintf(stdout, "precision of %s against %s\n\n", docPath, trPath)
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if o.out != "" {
		fmt.Fprintf(stdout, "\nwrote %s (precision.status searched, %d rules)\n", o.out, len(rep.After.Rules))
	}
	return nil
}

// precisionDoc is the --format json output of zflow precision, version 1.
type precisionDoc struct {
	Format       string              `json:"format"` // "zflow-precision"
	Version      int                 `json:"version"`
	ZflowVersion string              `json:"zflow_version"` // the tool's, as zflow --version prints it
	Trace        string              `json:"trace"`
	Semantics    string              `json:"semantics"`
	Classes      []precisionClassDoc `json:"classes"`
	Roles        []precisionRoleDoc  `json:"roles"`
	Before       semantics.Precision `json:"before"`
	After        semantics.Precision `json:"after"`
	Exact        precisionCountsDoc  `json:"exact"`
	Inexact      []precisionBoundDoc `json:"inexact"`
	Runs         int                 `json:"program_runs"`
	// Stopped: of the runs, those given up once their plan could not win.
	Stopped int `json:"program_runs_stopped"`
	// Pruned: candidate values not run because they could not win (each
	// listed, with the reason, in its class's candidates).
	Pruned int `json:"candidates_pruned"`
}

type precisionClassDoc struct {
	Class       string                `json:"class"`
	Before      string                `json:"before"`
	After       string                `json:"after"`
	Boundaries  int                   `json:"boundaries"`
	Scored      int                   `json:"scored"`
	ExactBefore float64               `json:"exact_before"`
	ExactAfter  float64               `json:"exact_after"`
	Observed    bool                  `json:"observed"`
	Margin      semantics.Margin      `json:"margin"`
	AtLeast     bool                  `json:"margin_at_least,omitempty"` // the runner-up's score is a bound
	Decisive    bool                  `json:"decisive"`
	Equivalent  []string              `json:"equivalent,omitempty"`
	Candidates  []semantics.Candidate `json:"candidates"`
	Note        string                `json:"note,omitempty"`
}

type precisionRoleDoc struct {
	Class      string  `json:"class"`
	Role       string  `json:"role"`
	Value      string  `json:"value"`
	ClassValue string  `json:"class_value"`
	Exact      float64 `json:"exact"`
	ClassExact float64 `json:"class_exact"`
	// ClassAtMost: the class's plan was scored until it could not win:
	// ClassExact is an upper bound, the margin a lower one.
	ClassAtMost bool             `json:"class_exact_at_most,omitempty"`
	Margin      semantics.Margin `json:"margin"`
}

type precisionCountsDoc struct {
	Boundaries int `json:"boundaries"`
	Exact      int `json:"exact"`
}

type precisionBoundDoc struct {
	Key     string        `json:"key"`
	OpClass string        `json:"op_class"`
	Exact   float64       `json:"exact_fraction"`
	RelRMS  reports.Float `json:"rel_rms"`
}

func precisionDocument(tr, doc string, rep *plan.Report) precisionDoc {
	d := precisionDoc{Format: "zflow-precision", Version: 1, ZflowVersion: versionString(), Trace: tr, Semantics: doc, Before: rep.Before, After: rep.After,
		Runs: rep.Evaluations, Stopped: rep.Stopped, Pruned: rep.Pruned, Classes: []precisionClassDoc{}, Roles: []precisionRoleDoc{}, Inexact: []precisionBoundDoc{}}
	for _, c := range rep.Classes {
		d.Classes = append(d.Classes, precisionClassDoc{Class: c.Class, Before: c.Before, After: c.After,
			Boundaries: c.Boundaries, Scored: c.Scored, ExactBefore: c.ExactBefore, ExactAfter: c.ExactAfter,
			Observed: c.Observed, Margin: semantics.Margin(c.Margin), AtLeast: c.MarginAtLeast, Decisive: c.Decisive, Equivalent: c.Equivalent,
			Candidates: c.Candidates, Note: c.Note})
	}
	for _, r := range rep.Roles {
		d.Roles = append(d.Roles, precisionRoleDoc{Class: r.Class, Role: r.Role, Value: r.Value, ClassValue: r.ClassValue,
			Exact: 1 - r.Err, ClassExact: 1 - r.ClassErr, ClassAtMost: r.ClassAtLeast, Margin: semantics.Margin(r.Margin)})
	}
	for i := range rep.AfterRecords {
		rec := &rep.AfterRecords[i]
		d.Exact.Boundaries++
		if rec.Exact == rec.N {
			d.Exact.Exact++
			continue
		}
		d.Inexact = append(d.Inexact, precisionBoundDoc{Key: rec.Key, OpClass: rec.OpClass, Exact: rec.ExactFraction(), RelRMS: reports.Float(rec.RelRMS())})
	}
	return d
}
