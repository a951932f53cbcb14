package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/check"
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/search/discover"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/search/synth"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

type discoverOpts struct {
	trace     string
	out       string
	format    string
	json      bool // --json: --format json
	backend   string
	precision bool
	check     bool
	engine    string
	// programBudget bounds the program search (auto then keeps the
	// recipes' partial document).
	programBudget time.Duration
	// precisionBudget bounds the rounding-plan search (--precision): past
	// it the best plan found so far is written, status "partial".
	precisionBudget time.Duration
}

func newDiscoverCmd() *cobra.Command {
	var o discoverOpts
	cmd := &cobra.Command{
		Use:   "discover --trace TRACE [-o semantics.json]",
		Short: "Find a reference's semantics from one trace, with every factor's evidence",
		Long: `discover reads one reference trace and finds, from its call tree, shapes and
captured values alone, the model's structure and every factor of the catalogue
(search/FACTORS.md) it shows: each scored teacher-forced where it is first
observable, with every candidate's error and the margin (runner-up error /
winner error). A factor is decisive at margin ≥ 2; below that the trace does not
tell its candidates apart and the document says so. What the trace cannot
decide is listed as undetermined, with the reason; a part of the structure it
cannot read (a block whose dataflow is outside what it knows, a missing
embedder) is left out and named there: the document is then partial.

Before writing, it checks the document (package check): its program runs
teacher forced on the trace, every captured boundary compared within its
format's tolerance (rel-RMS 1e-4 for f32, 2e-2 for bf16). Each boundary it
does not reproduce becomes an undetermined entry (the boundary, the
diagnosis signature, rel-RMS and cosine), and the document's status is
"complete" or "incomplete"; the last line on stdout says which:
"incomplete: N boundaries not reproduced, first <boundary> (<signature>)".
zflow generate refuses an incomplete document.

It writes the semantics document (-o, atomically) and prints a table of the
factors (value, margin, decisive) on stdout, or with --format json (or
--json) the document itself (the status line then goes to stderr); progress
goes to stderr. The document's
precision is a placeholder (activations in the trace's format, the timestep and
RoPE-table formats the search saw) unless --precision runs the rounding-plan
search on it (for at most --precision-budget: then the best plan found so far,
status "partial"). --check generates the trace's own request with the discovered
document and reports how close the result is to the reference's output (a
measurement: it runs an incomplete document too, where it builds, and says so).

Exit codes: 0 a document was written (complete or incomplete), 2 bad input
(unreadable trace, nothing discoverable, unwritable output), 3 an internal
error.`,
		Example: `  zflow discover --trace fixtures/dit/dit-f32.npz -o /tmp/dit-semantics.json
  zflow discover --trace fixtures/dit/dit-bf16.npz -o /tmp/dit-bf16-semantics.json --check
  zflow discover --trace fixtures/dit/dit-f32.npz -o /tmp/dit-semantics.json --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.format, err = resolveFormat(cmd, o.format, o.json, tableJSON); err != nil {
				return badInput(err)
			}
			return runDiscover(cmd.Context(), cmd.OutOrStdout(), newUI(cmd), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "the reference trace (.npz or .safetensors)")
	f.StringVarP(&o.out, "out", "o", "semantics.json", "where to write the semantics document")
	addFormatFlag(cmd, &o.format, tableJSON, &o.json)
	f.StringVar(&o.backend, "backend", "cpu", "backend for every run of the model: the auto engine's choice, the self-check, --precision and --check (cpu)")
	f.BoolVar(&o.precision, "precision", false, "also search the rounding plan (search/plan) and write it")
	f.BoolVar(&o.check, "check", false, "generate the trace's request with the discovered document and report rel-RMS")
	f.DurationVar(&o.precisionBudget, "precision-budget", 10*time.Minute, "the longest the rounding-plan search (--precision) may try plans; past it the best plan found so far is written (precision.status \"partial\", the stages and candidates not reached left out)")
	f.DurationVar(&o.programBudget, "program-budget", 5*time.Minute, "the longest the program search may run; at four fifths of it the search for expressions ends and the boundaries left are taken from the trace (listed as not searched), so that a partial document is still written")
	f.StringVar(&o.engine, "engine", "auto", "recipes (the known block shapes), program (the dataflow searched call by call), or auto (recipes when they reproduce the trace, else program)")
	completeValues(cmd, "backend", backends)
	completeValues(cmd, "engine", []string{"auto", "recipes", "program"})
	cmd.MarkFlagRequired("trace")
	return cmd
}

func runDiscover(ctx context.Context, stdout io.Writer, u ui, o discoverOpts) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.out == "" {
		return badInput(fmt.Errorf("-o: empty path"))
	}
	if o.programBudget <= 0 {
		return badInput(fmt.Errorf("--program-budget %s: want a duration > 0", o.programBudget))
	}
	if o.precisionBudget <= 0 {
		return badInput(fmt.Errorf("--precision-budget %s: want a duration > 0", o.precisionBudget))
	}
	if sameFile(o.out, o.trace) {
		return badInput(fmt.Errorf("%s: would overwrite the trace", o.out))
	}
	if err := checkOutputPath("-o", o.out); err != nil {
		return badInput(err)
	}
	b, err := newBackend(o.backend)
	if err != nil {
		return badInput(err)
	}
	tr, err := u.openTrace(o.trace)
	if err != nil {
		return badInput(err)
	}
	defer tr.Close()
	start := time.Now()
	doc, err := discoverDoc(ctx, u, b, tr, o)
	if errors.Is(err, context.DeadlineExceeded) {
		return &exitError{code: exitFailed, err: err} // not bad input: the search ran out of time
	}
	if err != nil {
		return badInput(err)
	}
	if o.precision {
		if err := discoverPrecision(ctx, u, b, tr, doc, o.precisionBudget); err != nil {
			return err
		}
	}
	if err := selfCheck(u, b, tr, doc); err != nil {
		return badInput(err)
	}
	doc.Source.StampZflowVersion(versionString())
	if err := doc.Write(o.out); err != nil {
		return badInput(err)
	}
	if o.format == "json" {
		if err := writeJSON(stdout, doc); err != nil {
			return err
		}
		fmt.Fprintln(u.info(), "discover:", doc.StatusLine())
	} else {
		printFactors(stdout, doc)
		fmt.Fprintf(stdout, "wrote %s (%.2fs)\n", o.out, time.Since(start).Seconds())
		fmt.Fprintln(stdout, doc.StatusLine())
	}
	if o.check {
		return discoverCheck(u.stderr, b, tr, o.out)
	}
	return nil
}

// discoverDoc runs the engine o names. auto runs the recipes first and
// keeps their document when it builds and reproduces the trace's output
// (end to end, within the format's tolerance); otherwise the program
// search's, when it reproduces the output more closely.
func discoverDoc(ctx context.Context, u ui, b exec.Backend, tr *trace.Trace, o discoverOpts) (*semantics.Document, error) {
	stderr := u.info()
	recipes := func() (*semantics.Document, error) {
		pg := u.progress("discover")
		res, err := discover.Run(ctx, tr, discover.Options{Progress: pg.Func()})
		pg.Close()
		if err != nil {
			return nil, err
		}
		for _, p := range res.Phases {
			fmt.Fprintf(stderr, "discover: %-9s %6.2fs  %d searches, %d evaluations\n", p.Name, p.Duration.Seconds(), p.Searches, p.Evaluations)
		}
		if err := res.Doc.Validate(); err != nil {
			return nil, err
		}
		return res.Doc, nil
	}
	programs := func() (doc *semantics.Document, err error) {
		t0 := time.Now()
		// a failure inside the program search is reported as one, so that
		// auto still writes the recipes' (partial) document
		defer func() {
			if r := recover(); r != nil {
				doc, err = nil, fmt.Errorf("program search: internal error: %v (please report)%s", r, traceback())
			}
		}()
		sctx, cancel := context.WithTimeout(ctx, o.programBudget)
		defer cancel()
		// at four fifths of the budget the search for expressions ends and
		// the boundaries left are taken from the trace, so that the rest
		// of the walk writes a partial document within the budget
		hurry, stop := context.WithTimeout(sctx, o.programBudget*4/5)
		defer stop()
		pg := u.progress("discover")
		defer pg.Close() // after a panic too (Close twice is once)
		pg.Stage("program search")
		// a bug met while explaining one boundary leaves it unexplained
		// (the document says incomplete) instead of ending the search
		fault := func(boundary string, err error) {
			fmt.Fprintf(u.stderr, "discover: internal error explaining %s: %v (please report); left unexplained%s\n", boundary, err, traceback())
		}
		res, err := synth.Discover(sctx, tr, o.trace, synth.Options{Progress: pg.Under("program search"), Log: searchLog(u.stderr), Fault: fault, Hurry: hurry})
		pg.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("program search: out of time after %s (--program-budget): %w", o.programBudget, err)
		}
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "discover: program search %.2fs, %d evaluations, %d boundaries taken from the trace\n", time.Since(t0).Seconds(), res.Evals, len(res.Opaque))
		if res.Unsearched > 0 {
			fmt.Fprintf(stderr, "discover: the search ran short of time (%s of --program-budget %s): %d boundaries taken from the trace unsearched; a larger budget may explain them\n", o.programBudget*4/5, o.programBudget, res.Unsearched)
		}
		if n := len(res.Unexplained); n > 0 {
			first := res.Unexplained[:min(n, 3)]
			fmt.Fprintf(stderr, "discover: %d boundaries no expression explains; first %s\n", n, strings.Join(first, ", "))
		}
		return res.Doc, nil
	}
	switch o.engine {
	case "recipes":
		return recipes()
	case "program":
		return programs()
	case "auto":
	default:
		return nil, fmt.Errorf("--engine: %q is not recipes, program or auto", o.engine)
	}
	rdoc, rerr := recipes()
	var rrel = math.Inf(1)
	if rerr == nil {
		rrel = outputRelRMS(b, tr, rdoc)
		if rrel <= outputTolerance(rdoc) {
			return rdoc, nil
		}
		fmt.Fprintf(stderr, "discover: the recipes' document misses the output by rel-RMS %.3g; searching the program\n", rrel)
	} else {
		fmt.Fprintf(stderr, "discover: the recipes do not fit (%v); searching the program\n", rerr)
	}
	pdoc, perr := programs()
	if perr != nil {
		if rerr == nil {
			fmt.Fprintf(stderr, "discover: the program search failed: %v\n", perr)
			return rdoc, nil
		}
		return nil, fmt.Errorf("%w (and the recipes: %v)", perr, rerr)
	}
	// A program that takes boundaries from the trace reproduces only the
	// captured run: it is written (incomplete, saying which) but not
	// preferred to a recipe document that runs from the request and comes
	// near the output. One that misses it as a wrong factor does (0.78 for
	// a causal text encoder read without its positions) is wrong where the
	// program is exact but for the values it names: the program is kept.
	// A recipe document that does not run at all (+Inf) is never kept over
	// a program: that holds what the search read, boundary by boundary.
	if rerr == nil && !math.IsInf(rrel, 1) && (len(pdoc.Program.FromTrace()) > 0 && rrel <= recipesNearMiss || rrel <= outputRelRMS(b, tr, pdoc)) {
		return rdoc, nil
	}
	return pdoc, nil
}

// recipesNearMiss is how far from the reference's output a recipe
// document may land and still be kept over a program that takes values
// from the trace: a near miss (a rounding plan still a placeholder, a
// factor that barely matters), not the 0.3 to 1 a wrong factor leaves in
// the shared traces.
const recipesNearMiss = 0.1

// outputRelRMS generates the trace's request with doc on b, the backend
// the user chose (at real width this is a whole generation), and returns
// the rel-RMS of the result against the trace's output (+Inf when it
// cannot run).
func outputRelRMS(b exec.Backend, tr *trace.Trace, doc *semantics.Document) float64 {
	rep, err := program.Reproduce(b, doc, tr)
	if err != nil || math.IsNaN(rep.RelRMS) {
		return math.Inf(1)
	}
	return rep.RelRMS
}

// outputTolerance is how close a document's generated output must be to
// the reference's for auto to keep the recipes: f32 1e-5; lower
// precisions 5e-2, since the document's precision is still a placeholder
// here (the rounding search comes after) and a wrong factor leaves far
// more (0.3 to 1 in the shared traces).
func outputTolerance(doc *semantics.Document) float64 {
	if doc.Precision.Activations == "f32" {
		return 1e-5
	}
	return 5e-2
}

// discoverPrecision searches the rounding plan into doc, for at most
// budget. A document the search cannot run (one with holes, one whose
// program does not build) keeps its placeholder plan; the self-check says
// why it cannot run.
func discoverPrecision(ctx context.Context, u ui, b exec.Backend, tr *trace.Trace, doc *semantics.Document, budget time.Duration) error {
	stderr := u.info()
	if hs := doc.Holes(); len(hs) > 0 {
		fmt.Fprintf(stderr, "precision: not searched: the document is incomplete (%s is not expressed)\n", hs[0].Address)
		return nil
	}
	fmt.Fprintln(stderr, "discover: searching the rounding plan (search/plan) ...")
	start := time.Now()
	rep, err := searchPlan(ctx, u, b, tr, doc, plan.Options{}, budget, "--precision-budget")
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, trace.ErrFormat) || errors.Is(err, trace.ErrManifest):
		return badInput(fmt.Errorf("precision search: %w", err))
	case err != nil:
		fmt.Fprintf(stderr, "precision: not searched: %v\n", err)
		return nil
	}
	fmt.Fprintf(stderr, "discover: %-9s %6.2fs  %d program runs (%d stopped once their plan could not win; %d candidates not run, as they could not win)\n", "precision",
		time.Since(start).Seconds(), rep.Evaluations, rep.Stopped, rep.Pruned)
	doc.Precision = rep.After
	return nil
}

// gpuCacheBytes is what the rounding search keeps on a GPU backend
// between candidates (plan.Options.CacheBytes): some 36 activations of a
// real-width block (4608 × 3072 in f32).
const gpuCacheBytes = 2 << 30

// searchPlan is plan.Discover with its progress shown: a stage while the
// evaluator loads and scores the document's own plan, then the search's
// stages ("op classes", "roles"). Past budget (0: none) it keeps the best
// plan found and says so, naming flag.
func searchPlan(ctx context.Context, u ui, b exec.Backend, tr *trace.Trace, doc *semantics.Document, eval plan.Options, budget time.Duration, flag string) (*plan.Report, error) {
	if b.Name() != "cpu" && eval.CacheBytes == 0 {
		// A GPU's memory is not the host's: keep a real-width block's
		// re-read tensors there between candidates.
		eval.CacheBytes = gpuCacheBytes
	}
	pg := u.progress("precision")
	defer pg.Close()
	pg.Stage("scoring the document's plan")
	o := plan.DiscoverOptions{Eval: eval, Progress: pg.Func()}
	if budget > 0 {
		hurry, cancel := context.WithTimeout(ctx, budget)
		defer cancel()
		o.Search.Hurry = hurry
	}
	rep, err := plan.Discover(ctx, b, tr, doc, o)
	if err == nil && rep.OutOfTime {
		fmt.Fprintf(u.info(), "precision: out of time after %s (%s): the best plan found by then, status partial; the stages and candidates not reached are left out\n", budget, flag)
	}
	return rep, err
}

// selfCheck runs the document teacher forced at every captured boundary
// and writes what it finds into it (package check).
func selfCheck(u ui, b exec.Backend, tr *trace.Trace, doc *semantics.Document) error {
	start := time.Now()
	pg := u.progress("discover")
	pg.Stage("self-check")
	res, err := check.Self(b, doc, tr, pg.Steps("self-check: nodes run"))
	pg.Close()
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	check.Apply(doc, res)
	fmt.Fprintf(u.info(), "discover: %-9s %6.2fs  %d boundary values compared, %d skipped, %s not reproduced\n",
		"self-check", time.Since(start).Seconds(), res.Compared, res.Skipped, plural(len(res.Failures), "boundary", "boundaries"))
	return nil
}

// discoverCheck generates the trace's request with the written document
// and reports the result against the reference's output (on stderr, so
// that --json's stdout stays the document). It is a measurement: it runs
// an incomplete document too, where the document builds, and says the
// document is incomplete; one that does not build is reported, not an
// error (the document is written and says why).
func discoverCheck(w io.Writer, bk exec.Backend, tr *trace.Trace, path string) error {
	doc, err := semantics.Read(path)
	if err != nil {
		return err
	}
	if doc.Program != nil {
		if ft := doc.Program.FromTrace(); len(ft) > 0 {
			fmt.Fprintf(w, "check: not run: %s is incomplete: its program takes %d values from the trace (first %s), so it reproduces only the captured run; to rel-RMS inf\n", path, len(ft), ft[0])
			return nil
		}
	}
	if doc.Incomplete() {
		defer fmt.Fprintf(w, "check: the document is %s\n", doc.StatusLine())
	}
	rep, err := program.Reproduce(bk, doc, tr)
	if err != nil {
		fmt.Fprintf(w, "check: not run: the discovered document does not run: %v\n", err)
		return nil
	}
	fmt.Fprintf(w, "check: generate with %s reproduces output/%s to rel-RMS %.4g, %.2f%% bit-exact (%d model calls on %s)\n",
		path, rep.Output, rep.RelRMS, 100*rep.Exact, rep.Steps, bk.Name())
	return nil
}

// printFactors prints the factor table, the undetermined list and the
// precision plan's status.
func printFactors(w io.Writer, doc *semantics.Document) {
	decisive := 0
	for _, f := range doc.Factors {
		if f.Decisive {
			decisive++
		}
	}
	fmt.Fprintf(w, "%s: %d factors (%d decisive), %d undetermined, %d blocks, hidden %d\n\n",
		doc.Source.Trace, len(doc.Factors), decisive, len(doc.Undetermined), len(doc.Structure.Blocks), doc.Structure.Hidden)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FACTOR\tSCOPE\tVALUE\tMARGIN\tDECISIVE")
	for _, f := range doc.Factors {
		label, value := discover.Describe(f)
		margin, dec := discover.Margin(float64(f.Margin)), "yes"
		switch {
		case f.Evidence.Metric == "declared":
			margin, dec = "—", "structure"
		case len(f.Candidates) == 1:
			margin, dec = "—", "one candidate"
		case !f.Decisive:
			dec = "no: does not matter here"
		}
		fmt.Fprintf(tw, "%s:\t%s\t%s\t%s\t%s\n", label, f.Scope, value, margin, dec)
	}
	tw.Flush()
	if len(doc.Undetermined) > 0 {
		fmt.Fprintln(w, "\nundetermined:")
		for _, u := range doc.Undetermined {
			if u.Boundary != "" {
				fmt.Fprintf(w, "  %s %s at %s (%s): %s\n", u.Name, u.Boundary, u.Scope, u.Signature, u.Reason)
				continue
			}
			fmt.Fprintf(w, "  %s at %s: %s\n", u.Name, u.Scope, u.Reason)
		}
	}
	p := doc.Precision
	var rules []string
	for _, r := range p.Rules {
		s := r.Op
		if r.Role != "" {
			s += " " + r.Role
		}
		for _, kv := range [][2]string{{"out", r.Out}, {"round", r.Round}, {"math", r.Math}} {
			if kv[1] != "" {
				s += " " + kv[0] + "=" + kv[1]
			}
		}
		rules = append(rules, s)
	}
	fmt.Fprintf(w, "\nprecision: %s, activations %s", p.Status, p.Activations)
	if len(rules) > 0 {
		fmt.Fprintf(w, "; rules: %s", strings.Join(rules, "; "))
	}
	if t := p.RopeTable; t != nil {
		fmt.Fprintf(w, "; RoPE tables: frequencies %s, angles %s, stored %s", t.Freq, t.Angle, t.Out)
	}
	fmt.Fprintln(w)
}

// searchLog is the program search's log when ZFLOW_SEARCH_LOG is set (a
// developer's view of where the search spends its time), nil otherwise.
func searchLog(w io.Writer) func(format string, args ...any) {
	if os.Getenv("ZFLOW_SEARCH_LOG") == "" {
		return nil
	}
	return func(format string, args ...any) { fmt.Fprintf(w, "search: "+format+"\n", args...) }
}
