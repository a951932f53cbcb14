package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/trace"
)

type diffOpts struct {
	step           int
	module, port   string
	gates          []string
	format         string
	reports        []string
	plot           string
	channels       int
	onlyFailing    bool
	listUnpaired   bool
	failUnpaired   bool
	allowNonFinite bool
	oursDType      string
	atol, rtol     float64
	equalNaN       bool
	tolGiven       bool
	jobs           int
	ref            string
	keyMap         string
}

func newDiffCmd() *cobra.Command {
	var o diffOpts
	cmd := &cobra.Command{
		Use:   "diff [OURS [REF]]",
		Short: "Compare a port's trace with the reference's, boundary by boundary, with gates and a diagnosis",
		Long: `diff pairs the boundaries (captured tensors) of OURS and REF by key, in the
reference's execution order: the run's inputs; each call's arguments when it
is entered, its children, its results when it returns; the run's outputs.
For each pair it reports max |diff|, mean |diff|, rel-RMS, cosine, PSNR,
the fraction bit-exact in the reference's dtype, ULP distances (median, p99,
max), NaN/Inf counts and the worst row, and applies the gates. The first
failing boundary is named, with its per-channel table and the signature of
its error (magnitude, bias, activation, topology, numerics) and the numbers
that decided it. Boundaries present on one side only are counted and the
first 5 listed (--list-unpaired lists them all; json, csv and junit always
do). A uint16 tensor paired with a bf16 one fails (bf16 bits written without the manifest's dtypes entry)
unless --ours-dtype bf16 declares OURS' uint16 tensors bf16.

OURS may be a port's trace without a manifest (np.savez, safetensors from
any language, capture/c/zflow_trace.h): its tensor names are its keys,
paired with the reference's in the reference's execution order (a line on
stderr says so). REF must be a reference trace, manifest included; the
format is in docs/trace-format.md.

--map FILE renames OURS's keys before pairing, so a port keeps its own
names: one rule a line, REGEX => TEMPLATE, REGEX a Go regexp over the whole
key, $1 (or ${1}) in TEMPLATE its groups; the first matching rule wins, a
key no rule matches keeps its name, # starts a comment line. A rule that
matches no key is reported on stderr. For example
  ^(s\d+)/blk(\d+)\.q/(.*)$ => $1/transformer.transformer_blocks.$2.attn.to_q/$3

Gates (--gate, repeatable) are [GLOB:]METRIC OP VALUE, OP one of <= < >= > ==;
metrics: max_abs mean_abs rel_rms cosine psnr exact (fraction bit-exact)
ulp_median ulp_p99 ulp_max nan inf nonfinite (positions NaN/Inf on one side
only). GLOB limits a gate to boundaries whose key or module path matches
('*' crosses dots). "rel_rms<=auto" takes the threshold from the pair's
dtypes (the coarser side): bf16 1/16, f16 1/64, f32 1e-4, integers exact.
Element-wise tolerance the way PyTorch states it: --atol A --rtol R (or the
gate allclose(atol=A,rtol=R), or a bare "allclose" for torch.testing.
assert_close's defaults per dtype: bf16 atol 1e-5 rtol 1.6e-2, f16 1e-5 1e-3,
f32 1e-5 1.3e-6, integers exact) fails a boundary where any element has
|ours-ref| > atol + rtol·|ref|, and reports mismatched elements as
count / total (percent) with the greatest absolute and relative differences
and their indexes. NaN is unequal to NaN unless --equal-nan.
Without --gate the gates are "rel_rms<=auto" and "nonfinite==0"; with
--gate, "nonfinite==0" is still applied (a NaN or Inf on one side only fails
whatever the other gates say) unless --allow-nonfinite. A --step, --module,
--port or gate glob that matches no boundary is bad input (exit 2), and a
run that pairs no boundary fails.

With no paths, OURS is the workspace's generated trace and REF its reference
(zflow workspace); one path is OURS, against --ref or the workspace's
reference.

--report FORMAT=PATH also writes a format to a file, atomically, replacing
it; --report FORMAT+=PATH appends (markdown and table only), in one write
after a blank line, as a CI job summary wants:
--report markdown+=$GITHUB_STEP_SUMMARY.

Exit codes: 0 every boundary passes, 1 a gate failed (or --fail-unpaired and
a boundary is unpaired), 2 bad input (a trace, a flag, a gate expression).`,
		Example: `  zflow diff fixtures/faults/no_norm_offset.npz fixtures/faults/ref.npz   # exit 1: a planted fault, caught
  zflow diff fixtures/dit/dit-bf16.npz fixtures/dit/dit-f32.npz --step 0 --module 'transformer.blocks.*'
  zflow diff fixtures/faults/clean.npz fixtures/faults/ref.npz --gate 'rel_rms<=2e-3' --gate 'exact>=0.999'
  zflow diff fixtures/dit/dit-bf16.npz fixtures/dit/dit-f32.npz --gate 'transformer.blocks.*:rel_rms<=1e-2' --format json   # exit 1: step 2's timestep differs
  zflow diff fixtures/faults/clean.npz fixtures/faults/ref.npz --atol 1e-5 --rtol 1.3e-6
  zflow diff fixtures/faults/wrong_activation.npz fixtures/faults/ref.npz --report junit=/tmp/zflow.xml --report markdown+=/tmp/zflow.md --plot /tmp/zflow-plots   # exit 1: a planted fault
  zflow diff fixtures/ports/dit-own-names.safetensors fixtures/dit/dit-bf16.npz --map fixtures/ports/dit-own-names.map --step 0`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("step") {
				o.step = -1
			}
			o.tolGiven = cmd.Flags().Changed("atol") || cmd.Flags().Changed("rtol")
			if o.tolGiven && !(cmd.Flags().Changed("atol") && cmd.Flags().Changed("rtol")) {
				return badInput(errors.New("--atol and --rtol: give both or neither, as torch.testing.assert_close wants"))
			}
			return runDiff(cmd.OutOrStdout(), newUI(cmd), args, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.step, "step", -1, "only boundaries of this sampler step")
	f.StringVar(&o.module, "module", "", "only calls whose module path matches this glob ('*' crosses dots)")
	f.StringVar(&o.port, "port", "", "only ports (and inputs/outputs) whose name matches this glob")
	f.StringArrayVar(&o.gates, "gate", nil, "a gate, [GLOB:]METRIC OP VALUE (repeatable; default rel_rms<=auto and nonfinite==0)")
	addFormatFlag(cmd, &o.format, reportFormats, nil)
	f.StringArrayVar(&o.reports, "report", nil, "also write FORMAT=PATH, e.g. junit=report.xml, or append with FORMAT+=PATH (markdown, table), e.g. markdown+=$GITHUB_STEP_SUMMARY (repeatable)")
	f.StringVar(&o.plot, "plot", "", "write PNG plots into this folder")
	f.IntVar(&o.channels, "channels", 16, "channels in the per-channel table, worst first (0: all)")
	f.BoolVar(&o.onlyFailing, "only-failing", false, "list only failing boundaries in table and markdown output")
	f.BoolVar(&o.listUnpaired, "list-unpaired", false, "list every unpaired boundary in table and markdown output (default: the count and the first 5)")
	f.BoolVar(&o.failUnpaired, "fail-unpaired", false, "exit 1 when a boundary is present on one side only")
	f.BoolVar(&o.allowNonFinite, "allow-nonfinite", false, "do not fail a boundary for NaN/Inf positions that differ between the sides (checked whatever --gate says otherwise)")
	f.Float64Var(&o.atol, "atol", 0, "element-wise tolerance: adds the gate allclose(atol=A,rtol=R) (give --rtol too)")
	f.Float64Var(&o.rtol, "rtol", 0, "element-wise relative tolerance (with --atol): |ours-ref| <= atol + rtol·|ref|, torch.testing.assert_close's test")
	f.BoolVar(&o.equalNaN, "equal-nan", false, "allclose gates count NaN against NaN as equal")
	f.StringVar(&o.oursDType, "ours-dtype", "", "bf16: read OURS' uint16 tensors as bf16 bit patterns (a port that wrote bf16 without the manifest's dtypes entry)")
	f.IntVar(&o.jobs, "jobs", 0, "worker goroutines, 1 to 1024 (default: one per core)")
	f.StringVar(&o.ref, "ref", "", "the reference trace (instead of REF or the workspace's)")
	f.StringVar(&o.keyMap, "map", "", "rename OURS's keys by the rules of this file (lines REGEX => TEMPLATE)")
	completeReports(cmd, reportFormats)
	completeValues(cmd, "ours-dtype", []string{"bf16"})
	return cmd
}

// diffFormats maps --format names to the writers of a report.
var diffFormats = map[string]func(r *reports.DiffReport, w io.Writer, o reports.RenderOptions) error{
	"table":    (*reports.DiffReport).WriteTable,
	"markdown": (*reports.DiffReport).WriteMarkdown,
	"junit":    (*reports.DiffReport).WriteJUnit,
	"csv":      (*reports.DiffReport).WriteCSV,
	"json": func(r *reports.DiffReport, w io.Writer, o reports.RenderOptions) error {
		return writeJSON(w, r.Document(o.Channels))
	},
}

func formatNames() string { return orList(reportFormats) }

// diffPaths resolves OURS and REF from the arguments, --ref and the
// workspace, in that order of precedence.
func diffPaths(args []string, ref string) (string, string, error) {
	if len(args) == 2 && ref != "" {
		return "", "", errors.New("REF given twice: as an argument and as --ref")
	}
	var ours string
	if len(args) > 0 {
		ours = args[0]
	}
	if len(args) == 2 {
		ref = args[1]
	}
	if ours != "" && ref != "" {
		return ours, ref, nil
	}
	ws, err := loadWorkspace()
	if err != nil {
		return "", "", err
	}
	if ours == "" {
		ours = ws.Generated
	}
	if ref == "" {
		ref = ws.Reference
	}
	switch {
	case ours == "" && ref == "":
		return "", "", fmt.Errorf("no traces to compare: give OURS REF, or set the workspace (zflow workspace --ref REF --generated OURS)")
	case ours == "":
		return "", "", fmt.Errorf("no trace of ours: give OURS, or set the workspace's generated trace (zflow workspace --generated OURS)")
	case ref == "":
		return "", "", fmt.Errorf("no reference: give REF or --ref, or set the workspace's (zflow workspace --ref REF)")
	}
	return ours, ref, nil
}

// openOurs opens a port's trace (a manifest optional) and renames its
// keys by km, saying on stderr which of km's rules matched no key.
func openOurs(stderr io.Writer, path string, km *trace.KeyMap, o trace.Options) (*trace.Trace, error) {
	ours, err := trace.OpenPortWith(path, o)
	if err != nil || km == nil {
		return ours, err
	}
	unused, err := ours.Rename(km)
	if err != nil {
		ours.Close()
		return nil, err
	}
	for _, r := range unused {
		fmt.Fprintf(stderr, "note: --map %s %s matched no key of %s\n", km.File, r, path)
	}
	return ours, nil
}

// portNote says, in one line, that OURS has no call tree (a port trace
// without a manifest) and how its keys are paired.
func portNote(stderr io.Writer, ours, ref *trace.Trace) {
	if !ours.Bare() {
		return
	}
	why := "no manifest"
	if ours.HasManifest() {
		why = "its manifest names no calls"
	}
	msg := fmt.Sprintf("note: OURS %s had no call tree (%s): its %d keys are paired with the reference's by name, in the reference's execution order", ours.Path, why, len(ours.Keys()))
	if bf := ours.AdoptBF16(ref); len(bf) > 0 {
		msg += fmt.Sprintf("; %d uint16 entries read as bfloat16, as the reference stores them", len(bf))
	}
	fmt.Fprintln(stderr, msg)
}

func runDiff(stdout io.Writer, u ui, args []string, o diffOpts) error {
	stderr := u.info()
	write, ok := diffFormats[o.format]
	if !ok {
		return badInput(fmt.Errorf("--format %q: want %s", o.format, formatNames()))
	}
	var files []reportSpec
	for _, spec := range o.reports {
		rs, err := parseReportSpec(spec, func(f string) bool { _, ok := diffFormats[f]; return ok }, formatNames())
		if err != nil {
			return badInput(err)
		}
		files = append(files, rs)
	}
	if o.plot != "" {
		if err := checkOutputDir("--plot", o.plot); err != nil {
			return badInput(err)
		}
	}
	var gates []reports.Gate
	for _, s := range o.gates {
		g, err := reports.ParseGate(s)
		if err != nil {
			return badInput(err)
		}
		gates = append(gates, g)
	}
	if o.tolGiven {
		g, err := reports.ParseGate(fmt.Sprintf("allclose(atol=%g,rtol=%g)", o.atol, o.rtol))
		if err != nil {
			return badInput(fmt.Errorf("--atol/--rtol: %w", err))
		}
		gates = append(gates, g)
	}
	if o.equalNaN {
		for i := range gates {
			gates[i].Tol.EqualNaN = gates[i].Tol.EqualNaN || gates[i].Metric == "allclose"
		}
	}
	sel := reports.Selection{Module: o.module, Port: o.port}
	if o.step >= 0 {
		sel.Step = &o.step
	}
	if err := sel.Validate(); err != nil {
		return badInput(err)
	}
	switch o.oursDType {
	case "", "bf16", "bfloat16":
	default:
		return badInput(fmt.Errorf("--ours-dtype %q: the only dtype it declares is bf16 (uint16 tensors read as bf16)", o.oursDType))
	}
	oursPath, refPath, err := diffPaths(args, o.ref)
	if err != nil {
		return badInput(err)
	}
	var km *trace.KeyMap
	if o.keyMap != "" {
		if km, err = trace.ReadKeyMap(o.keyMap); err != nil {
			return badInput(fmt.Errorf("--map: %w", err))
		}
	}
	ours, err := openOurs(stderr, oursPath, km, u.open)
	if err != nil {
		return badInput(err)
	}
	defer ours.Close()
	if o.oursDType != "" {
		ours.Uint16AsBFloat16()
	}
	ref, err := u.openTrace(refPath)
	if err != nil {
		return badInput(err)
	}
	defer ref.Close()
	portNote(stderr, ours, ref)

	pg := u.progress("diff")
	r, err := reports.Diff(ours, ref, reports.DiffOptions{Selection: sel, Gates: gates, Workers: o.jobs, AllowNonFinite: o.allowNonFinite,
		Progress: pg.Steps("boundaries")})
	pg.Close()
	if err != nil {
		return badInput(err)
	}
	ro := reports.RenderOptions{Channels: o.channels, OnlyFailing: o.onlyFailing, ListUnpaired: o.listUnpaired}
	wrote, err := writeReports(files, func(format string, w io.Writer) error { return diffFormats[format](r, w, ro) })
	if err != nil {
		return badInput(err)
	}
	if o.plot != "" {
		paths, err := r.WritePlots(o.plot)
		if err != nil {
			removeAll(wrote) // WritePlots removed its own
			return badInput(fmt.Errorf("--plot: %w", err))
		}
		for _, p := range paths {
			fmt.Fprintln(stderr, "wrote", p)
		}
	}
	if err := write(r, stdout, ro); err != nil {
		return err
	}
	switch {
	case r.NothingPaired():
		return &exitError{code: exitFailed, err: fmt.Errorf("no boundary compared: none of %s pairs with one of %s (%d unpaired)", oursPath, refPath, len(r.Unpaired))}
	case !r.Pass():
		d := r.Boundaries[r.FirstFailing]
		msg := fmt.Sprintf("%d of %d boundaries failed; first failing %s", r.Failed(), len(r.Boundaries), d.Key)
		if r.Finding != nil {
			msg += fmt.Sprintf(" (signature: %s)", r.Finding.Diagnosis.Signature)
		}
		return &exitError{code: exitFailed, err: errors.New(msg)}
	case o.failUnpaired && len(r.Unpaired) > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("%d boundaries are unpaired (--fail-unpaired)", len(r.Unpaired))}
	}
	return nil
}
