package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/check"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

type verifyOpts struct {
	trace, semantics string
	teacherForced    bool
	freeRunning      bool
	steps            int
	gates            []string
	format           string
	reports          []string
	channels         int
	onlyFailing      bool
	listUnpaired     bool
	jobs             int
}

// newVerifyCmd is `zflow verify`: the bit-exactness report of a semantics
// document's program against the reference trace.
func newVerifyCmd() *cobra.Command {
	var o verifyOpts
	cmd := &cobra.Command{
		Use:   "verify --trace REF --semantics S.json [--teacher-forced | --free-running]",
		Short: "Run a document's program against the reference and report bit-exactness boundary by boundary",
		Long: `verify builds the program of a semantics document with the weights and
request of the reference trace, runs it, and compares every boundary the
trace holds: teacher forced (the default), each boundary is computed from
the reference's own values at the boundaries before it, so a difference is
where it arises; free running, the program runs on its own values.

It writes zflow diff's report (the same formats, gates, JSON contract and
exit codes; see zflow diff --help): per boundary the fraction bit-exact in
the reference's dtype, the ULP distances, rel-RMS and the rest, plus each
boundary's op_class (the class of the op that made the value: norm,
modulate, attention, linear, ...; "a+b" when a concatenation joins
several; "copy" for a request input or a reference value moved or cast),
the totals per op class (values, fraction bit-exact, ULP
histogram), and the first boundary that is not bit-exact. The JSON
document is zflow diff's ("format": "zflow-diff") with "verify",
"totals", "first_inexact", and "op_class" and "ulp_hist" on each boundary
added.

Exit codes: 0 every boundary passes its gates, 1 a gate failed, 2 bad input
(a trace, a document, a flag, a gate expression).`,
		Example: `  zflow verify --trace fixtures/dit/dit-bf16.npz --semantics semantics/testdata/dit-bf16.json
  zflow verify --trace fixtures/dit/dit-bf16.npz --semantics semantics/testdata/dit-bf16.json --free-running --gate 'rel_rms<=2e-2'
  zflow verify --trace fixtures/dit/dit-f32.npz --semantics semantics/testdata/dit-f32.json --format json --gate 'transformer.blocks.*:exact>=0.3'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(cmd.OutOrStdout(), newUI(cmd), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.trace, "trace", "", "the reference trace (default: the workspace's reference)")
	f.StringVar(&o.semantics, "semantics", "", "the semantics document (default: the workspace's)")
	f.BoolVar(&o.teacherForced, "teacher-forced", false, "compute each boundary from the reference's earlier boundaries (the default)")
	f.BoolVar(&o.freeRunning, "free-running", false, "run on our own values from the request on")
	f.IntVar(&o.steps, "steps", 0, "model calls of a flow_euler run (0: all)")
	f.StringArrayVar(&o.gates, "gate", nil, "a gate, [GLOB:]METRIC OP VALUE (repeatable; default rel_rms<=auto and nonfinite==0)")
	addFormatFlag(cmd, &o.format, reportFormats, nil)
	f.StringArrayVar(&o.reports, "report", nil, "also write FORMAT=PATH, e.g. junit=report.xml, or append with FORMAT+=PATH (markdown, table), e.g. markdown+=$GITHUB_STEP_SUMMARY (repeatable)")
	f.IntVar(&o.channels, "channels", 16, "channels in the per-channel table, worst first (0: all)")
	f.BoolVar(&o.onlyFailing, "only-failing", false, "list only failing boundaries in table and markdown output")
	f.BoolVar(&o.listUnpaired, "list-unpaired", false, "list every unpaired boundary in table and markdown output (default: the count and the first 5)")
	f.IntVar(&o.jobs, "jobs", 0, "worker goroutines, 1 to 1024 (default: one per core)")
	completeReports(cmd, reportFormats)
	return cmd
}

// verification is one verify run: the diff report of our boundaries and
// the evaluator's records behind it.
type verification struct {
	mode, trace, semantics string
	diff                   *reports.DiffReport
	recs                   []plan.Record
	class                  map[string]string // key → op class
	// skipped: boundary values inside blocks an incomplete document
	// leaves undetermined (check.Report.Skipped): not computed, not listed.
	skipped int
	// notCompared: the reference's boundaries the run neither compared
	// nor skipped (the program made no value there of the reference's
	// shape), listed as unpaired with the reason; refBoundaries counts
	// every boundary of the reference: compared + skipped + not compared.
	notCompared   []reports.Unpaired
	misshapen     []int // indexes into notCompared: the program's value has another shape
	refBoundaries int
}

// notCompared accounts for every boundary of the reference: those that
// the run neither compared nor skipped come back as unpaired, each with
// the reason, and misshapen indexes those where the program's value has
// another shape than the reference's (a boundary the program does not
// reproduce: it fails the run).
func notCompared(ref *trace.Trace, rep *check.Report, steps int) (out []reports.Unpaired, misshapen []int, err error) {
	ran := map[int]bool{} // the steps the run compared something in
	for _, r := range rep.Records {
		if r.Module != "" {
			ran[r.Step] = true
		}
	}
	all, err := reports.Boundaries(ref, reports.Selection{})
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, r := range rep.Records {
		seen[r.Key] = true
	}
	for _, r := range rep.Skipped {
		seen[r.Key] = true
	}
	for _, b := range all {
		if seen[b.Key] {
			continue
		}
		info, err := ref.Info(b.Key)
		if err != nil {
			return nil, nil, err
		}
		reason := fmt.Sprintf("not compared: the program taps no value here (reference %v %s)", info.Shape, info.DType)
		shape := false
		if ours, ok := rep.Unmatched[b.Key]; ok {
			reason = fmt.Sprintf("not compared: shapes differ: ours %v, ref %v %s", ours, info.Shape, info.DType)
			misshapen = append(misshapen, len(out))
			shape = true
		} else if steps > 0 && b.Step != nil && !ran[*b.Step] {
			reason = fmt.Sprintf("not compared: step %d was not run (--steps %d)", *b.Step, steps)
		} else if info.DType.Components() != 1 {
			reason = fmt.Sprintf("not compared: %s values are not compared", info.DType)
		}
		out = append(out, reports.Unpaired{Boundary: b, Side: "ref", Reason: reason, ShapeMismatch: shape})
	}
	return out, misshapen, nil
}

func runVerify(stdout io.Writer, u ui, o verifyOpts) error {
	start := time.Now()
	if o.teacherForced && o.freeRunning {
		return badInput(errors.New("--teacher-forced and --free-running exclude each other"))
	}
	write, ok := verifyFormats[o.format]
	if !ok {
		return badInput(fmt.Errorf("--format %q: want %s", o.format, formatNames()))
	}
	var files []reportSpec
	for _, spec := range o.reports {
		rs, err := parseReportSpec(spec, func(f string) bool { _, ok := verifyFormats[f]; return ok }, formatNames())
		if err != nil {
			return badInput(err)
		}
		files = append(files, rs)
	}
	var gates []reports.Gate
	for _, s := range o.gates {
		g, err := reports.ParseGate(s)
		if err != nil {
			return badInput(err)
		}
		gates = append(gates, g)
	}
	if o.steps < 0 {
		return badInput(fmt.Errorf("--steps %d: want 0 (all) or more", o.steps))
	}
	trPath, docPath, err := workspacePaths(o.trace, o.semantics)
	if err != nil {
		return badInput(err)
	}
	doc, err := semantics.Read(docPath)
	if err != nil {
		return badInput(err)
	}
	ref, err := u.openTrace(trPath)
	if err != nil {
		return badInput(err)
	}
	defer ref.Close()
	if err := program.CheckBlockCalls(doc, moduleCalls(ref)); err != nil {
		return badInput(fmt.Errorf("%s on %s: %w", docPath, trPath, err))
	}
	pg := u.progress("verify")
	defer pg.Close()
	stage := "running the program " + runMode(o.freeRunning)
	pg.Stage(stage)
	rep, err := check.Run(cpu.New(o.jobs), doc, ref, check.Options{Steps: o.steps, FreeRunning: o.freeRunning,
		Progress: pg.Steps(stage + ": nodes run")})
	if err != nil {
		return badInput(fmt.Errorf("%s on %s: %w", docPath, trPath, err))
	}
	v := &verification{mode: rep.Mode, trace: trPath, semantics: docPath, recs: rep.Records, class: rep.Class, skipped: len(rep.Skipped)}
	// The boundaries become two small traces, ours and the reference's
	// values at the same keys, so that zflow diff's comparison, gates,
	// diagnosis and renderers apply unchanged.
	dir, err := os.MkdirTemp("", "zflow-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	oursTr, refTr, err := boundaryTraces(dir, v.recs, doc)
	if err != nil {
		return err
	}
	defer oursTr.Close()
	defer refTr.Close()
	if v.diff, err = reports.Diff(oursTr, refTr, reports.DiffOptions{Gates: gates, Workers: o.jobs, Progress: pg.Steps("comparing boundaries")}); err != nil {
		return badInput(err)
	}
	pg.Close()
	if v.notCompared, v.misshapen, err = notCompared(ref, rep, o.steps); err != nil {
		return badInput(err)
	}
	v.diff.Unpaired = append(v.diff.Unpaired, v.notCompared...)
	v.refBoundaries = len(v.diff.Boundaries) + v.skipped + len(v.notCompared)
	v.diff.Elapsed = time.Since(start) // the run's, not only the comparison's
	v.diff.Ours = fmt.Sprintf("zflow verify (%s) of %s", v.mode, docPath)
	v.diff.Ref = trPath
	ro := reports.RenderOptions{Channels: o.channels, OnlyFailing: o.onlyFailing, ListUnpaired: o.listUnpaired}
	if _, err := writeReports(files, func(format string, w io.Writer) error { return verifyFormats[format](v, w, ro) }); err != nil {
		return badInput(err)
	}
	if err := write(v, stdout, ro); err != nil {
		return err
	}
	if v.diff.NothingPaired() {
		return &exitError{code: exitFailed, err: fmt.Errorf("no boundary compared: the program reproduces none of %s's boundaries", trPath)}
	}
	if n := len(v.misshapen); n > 0 {
		u := v.notCompared[v.misshapen[0]]
		return &exitError{code: exitFailed, err: fmt.Errorf("%d of the reference's %d boundaries have another shape in the program (first %s: %s)",
			n, v.refBoundaries, u.Key, u.Reason)}
	}
	if !v.diff.Pass() {
		d := v.diff.Boundaries[v.diff.FirstFailing]
		return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d boundaries failed; first failing %s (op class %s)",
			v.diff.Failed(), len(v.diff.Boundaries), d.Key, v.class[d.Key])}
	}
	return nil
}

// runMode names the mode a verify run computes its boundaries in.
func runMode(freeRunning bool) string {
	if freeRunning {
		return "free running"
	}
	return "teacher forced"
}

// boundaryTraces writes our values and the reference's at every record's
// key as two traces in dir and opens them.
func boundaryTraces(dir string, recs []plan.Record, doc *semantics.Document) (*trace.Trace, *trace.Trace, error) {
	ours, ref := &program.Recorder{}, &program.Recorder{}
	oursOut, refOut := map[string]program.HostTensor{}, map[string]program.HostTensor{}
	for i := range recs {
		r := &recs[i]
		o := program.HostTensor{Data: r.Ours, Shape: r.Shape, Format: r.OursFormat}
		f := program.HostTensor{Data: r.Ref, Shape: r.Shape, Format: r.Format}
		if r.Module == "" {
			oursOut[r.Port], refOut[r.Port] = o, f
			continue
		}
		tp := program.Tap{Module: r.Module, Port: r.Port}
		ours.Add(r.Step, tp, o)
		ref.Add(r.Step, tp, f)
	}
	producer := map[string]any{"framework": "zflow", "framework_version": "verify", "zflow_version": versionString(), "dtype": doc.Precision.Activations}
	op, rp := filepath.Join(dir, "ours.npz"), filepath.Join(dir, "ref.npz")
	if err := ours.Write(op, oursOut, producer); err != nil {
		return nil, nil, err
	}
	if err := ref.Write(rp, refOut, producer); err != nil {
		return nil, nil, err
	}
	ot, err := trace.Open(op)
	if err != nil {
		return nil, nil, err
	}
	rt, err := trace.Open(rp)
	if err != nil {
		ot.Close()
		return nil, nil, err
	}
	return ot, rt, nil
}

type verifyWriter func(v *verification, w io.Writer, o reports.RenderOptions) error

// verifyFormats are zflow diff's formats with verify's additions.
var verifyFormats = map[string]verifyWriter{
	"table":    func(v *verification, w io.Writer, o reports.RenderOptions) error { return v.writeText(w, o, false) },
	"markdown": func(v *verification, w io.Writer, o reports.RenderOptions) error { return v.writeText(w, o, true) },
	"junit":    func(v *verification, w io.Writer, o reports.RenderOptions) error { return v.diff.WriteJUnit(w, o) },
	"csv":      (*verification).writeCSV,
	"json": func(v *verification, w io.Writer, o reports.RenderOptions) error {
		return writeJSON(w, v.document(o.Channels))
	},
}

// The --format json document: zflow diff's (README.md, "zflow diff"), with
// op_class and ulp_hist on each boundary and three top-level fields.
type (
	verifyDoc struct {
		reports.DiffDoc
		Boundaries   []verifyBoundaryDoc `json:"boundaries"`
		FirstFailing *verifyBoundaryDoc  `json:"first_failing"`
		Verify       verifyRunDoc        `json:"verify"`
		Totals       []verifyTotalDoc    `json:"totals"`
		FirstInexact *verifyBoundaryDoc  `json:"first_inexact"`
	}
	verifyBoundaryDoc struct {
		reports.BoundaryDoc
		OpClass string         `json:"op_class"`
		ULPHist map[string]int `json:"ulp_hist,omitempty"` // bucket label → values, buckets with values only
	}
	verifyRunDoc struct {
		Mode      string `json:"mode"` // teacher-forced | free-running
		Trace     string `json:"trace"`
		Semantics string `json:"semantics"`
		// Skipped: boundary values inside undetermined blocks of an
		// incomplete document, not computed (absent when none).
		Skipped int `json:"skipped_undetermined,omitempty"`
		// ReferenceBoundaries counts every boundary of the reference:
		// compared (counts.boundaries) + skipped_undetermined +
		// not_compared (listed in unpaired with the reason).
		ReferenceBoundaries int `json:"reference_boundaries"`
		NotCompared         int `json:"not_compared"`
		Misshapen           int `json:"not_compared_shape"` // of not_compared: the program's value there has another shape (fails)
	}
	verifyTotalDoc struct {
		OpClass       string         `json:"op_class"`
		Boundaries    int            `json:"boundaries"`
		Values        int            `json:"values"`
		Exact         int            `json:"exact"`
		ExactFraction reports.Float  `json:"exact_fraction"`
		RelRMS        reports.Float  `json:"rel_rms"`
		ULPMax        uint64         `json:"ulp_max"`
		ULPHist       map[string]int `json:"ulp_hist"`
	}
)

func (v *verification) document(worst int) verifyDoc {
	d := verifyDoc{DiffDoc: v.diff.Document(worst), Verify: verifyRunDoc{Mode: v.mode, Trace: v.trace, Semantics: v.semantics, Skipped: v.skipped,
		ReferenceBoundaries: v.refBoundaries, NotCompared: len(v.notCompared), Misshapen: len(v.misshapen)}}
	for i, b := range d.DiffDoc.Boundaries {
		vb := verifyBoundaryDoc{BoundaryDoc: b, OpClass: v.class[b.Key]}
		if m := v.diff.Boundaries[i].Metrics; m != nil {
			vb.ULPHist = histDoc(m.ULP.Hist)
		}
		d.Boundaries = append(d.Boundaries, vb)
	}
	if d.Boundaries == nil {
		d.Boundaries = []verifyBoundaryDoc{}
	}
	if v.diff.FirstFailing >= 0 {
		d.FirstFailing = &d.Boundaries[v.diff.FirstFailing]
	}
	if i := v.firstInexact(); i >= 0 {
		d.FirstInexact = &d.Boundaries[i]
	}
	d.Totals = []verifyTotalDoc{}
	for _, t := range v.totals() {
		d.Totals = append(d.Totals, verifyTotalDoc{OpClass: t.class, Boundaries: t.pool.Boundaries, Values: t.pool.N,
			Exact: t.pool.Exact, ExactFraction: reports.Float(t.pool.Fraction()), RelRMS: reports.Float(t.pool.RelRMS()),
			ULPMax: t.ulpMax, ULPHist: histDoc(t.hist)})
	}
	return d
}

func histDoc(h [reports.NumULPBuckets]int) map[string]int {
	out := map[string]int{}
	for i, n := range h {
		if n > 0 {
			out[reports.ULPBucketLabel(i)] = n
		}
	}
	return out
}

// firstInexact is the index in the diff of the first boundary, in
// execution order, that is not bit-exact; -1 if every one is.
func (v *verification) firstInexact() int {
	for i := range v.diff.Boundaries {
		if m := v.diff.Boundaries[i].Metrics; m != nil && m.Exact != m.Count {
			return i
		}
	}
	return -1
}

type classTotal struct {
	class  string
	pool   plan.Pool
	hist   [reports.NumULPBuckets]int
	ulpMax uint64
}

// totals pools the boundaries by op class.
func (v *verification) totals() []classTotal {
	var out []classTotal
	idx := map[string]int{}
	order, _ := plan.ByClass(v.recs)
	for _, c := range order {
		idx[c] = len(out)
		out = append(out, classTotal{class: c})
	}
	for i := range v.diff.Boundaries {
		d := &v.diff.Boundaries[i]
		m := d.Metrics
		j, ok := idx[v.class[d.Key]]
		if !ok || m == nil {
			continue
		}
		t := &out[j]
		t.pool.Boundaries++
		t.pool.N += m.Count
		t.pool.Exact += m.Exact
		// rel-RMS pooled from each boundary's own: Σ(rel²·Σref²) needs
		// Σref², which Metrics does not keep; the records do.
		for k, n := range m.ULP.Hist {
			t.hist[k] += n
		}
		t.ulpMax = max(t.ulpMax, m.ULP.Max)
	}
	_, pools := plan.ByClass(v.recs)
	for i := range out {
		if p := pools[out[i].class]; p != nil {
			out[i].pool.SumD2, out[i].pool.SumR2 = p.SumD2, p.SumR2
		}
	}
	return out
}

// writeText is diff's table or Markdown, then the totals per op class and
// the first boundary that is not bit-exact.
func (v *verification) writeText(w io.Writer, o reports.RenderOptions, markdown bool) error {
	if markdown {
		if err := v.diff.WriteMarkdown(w, o); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n### Bit-exactness by op class (%s)\n\n", v.mode)
		fmt.Fprintln(w, "| op class | boundaries | values | bit-exact | rel-RMS | ULP max | ULP histogram |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|---|")
	} else {
		if err := v.diff.WriteTable(w, o); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nbit-exactness by op class (%s):\n", v.mode)
		fmt.Fprintf(w, "  %-26s %10s %9s %10s %10s %8s  %s\n", "op class", "boundaries", "values", "bit-exact", "rel-RMS", "ULP max", "ULP histogram")
	}
	for _, t := range v.totals() {
		name := t.class
		var hist []string
		for k, n := range t.hist {
			if n > 0 {
				hist = append(hist, fmt.Sprintf("%s:%d", reports.ULPBucketLabel(k), n))
			}
		}
		if markdown {
			fmt.Fprintf(w, "| %s | %d | %d | %s | %.3g | %d | %s |\n", name, t.pool.Boundaries, t.pool.N, plan.Pct(t.pool.Fraction()),
				t.pool.RelRMS(), t.ulpMax, strings.Join(hist, " "))
			continue
		}
		fmt.Fprintf(w, "  %-26s %10d %9d %10s %10.3g %8d  %s\n", name, t.pool.Boundaries, t.pool.N, plan.Pct(t.pool.Fraction()),
			t.pool.RelRMS(), t.ulpMax, strings.Join(hist, " "))
	}
	if v.skipped > 0 {
		fmt.Fprintf(w, "\n%d boundary values inside blocks the document leaves undetermined were skipped (not computed)\n", v.skipped)
	}
	fmt.Fprintf(w, "\nthe reference's %d boundaries: %d compared, %d skipped (undetermined), %d not compared (%d of them: the program's value has another shape)\n",
		v.refBoundaries, len(v.diff.Boundaries), v.skipped, len(v.notCompared), len(v.misshapen))
	i := v.firstInexact()
	switch {
	case i < 0:
		fmt.Fprintf(w, "\nevery boundary is bit-exact (%d)\n", len(v.diff.Boundaries))
	default:
		d := &v.diff.Boundaries[i]
		fmt.Fprintf(w, "\nfirst boundary not bit-exact: #%d %s (op class %s): %s bit-exact, ULP max %d\n", i, d.Key, v.class[d.Key],
			plan.Pct(d.Metrics.ExactFraction), d.Metrics.ULP.Max)
	}
	return nil
}

// writeCSV is diff's CSV with an op_class column appended.
func (v *verification) writeCSV(w io.Writer, o reports.RenderOptions) error {
	var buf bytes.Buffer
	if err := v.diff.WriteCSV(&buf, o); err != nil {
		return err
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	for i, row := range rows {
		extra := "op_class"
		if i > 0 && len(row) > 1 {
			extra = v.class[row[1]]
		}
		if err := cw.Write(append(row, extra)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
