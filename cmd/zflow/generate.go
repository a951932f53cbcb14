package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

type generateOpts struct {
	semantics string
	inputs    string
	weights   string
	out       string
	traceOut  string
	timings   string
	timingOps bool
	backend   string
	format    string
	// allowIncomplete runs a document whose self-check found it
	// incomplete (where it builds), saying so on stderr.
	allowIncomplete bool
}

// newGenerateCmd is `zflow generate` (the lead wires it into the root).
func newGenerateCmd() *cobra.Command {
	var o generateOpts
	cmd := &cobra.Command{
		Use:   "generate --semantics S.json --inputs TRACE",
		Short: "Run a model with the semantics of a document, on the request held in a trace",
		Long: `generate builds the model a semantics document describes, with the weights
of a trace (--inputs, or --weights), runs the request in --inputs (a
flow-matching Euler loop over input/sigmas with the document's Euler sign
and timestep transform, or one forward) and writes the result as a trace
v1 file holding output/<name> (-o). With --trace-out it also writes every
boundary of its own run, keyed like the reference's ("s<step>/<module>/<port>"),
for comparison with the reference trace. With --timings it writes each model
call's wall time (the Euler update included; a queuing backend such as cuda
synchronised at both ends) as JSON ("format": "zflow-timings", "version": 1,
"steps": [{"step", "ms"}], "total_ms") and prints a line per step on stderr.

A request outside what the program supports (a missing input, a weight of the
wrong shape, a factor value the builder has no dataflow for, NaN in the
inputs) is refused with the reason and exit code 2; nothing is written. So is
a document whose status is "incomplete" (zflow discover's self-check found
boundaries it does not reproduce, or parts it could not read), unless
--allow-incomplete: then it runs where it builds, and stderr says how many
boundaries it does not reproduce.

On stdout it says what it wrote; --format json prints it as a document
("format": "zflow-generate", "version": 1, the zflow_version; the output tensor's name, key,
shape and dtype, the files written, the backend, the model calls and the
seconds). Progress goes to stderr.

A backend that fuses regions (a linear or a norm and the pointwise steps
after it; cuda) says on stderr which kinds of region it fused, which it left
unfused as measured faster so, and which it cannot fuse, with both routes'
device times; the JSON document holds the same under "fusion" ("mode":
auto, off with ZFLOW_UNFUSED=1, on with ZFLOW_FUSED=1; "regions").

Exit codes: 0 written, 2 bad input (a document, a trace, a refused request,
an unwritable path), 3 an internal error.`,
		Example: `  zflow generate --semantics semantics/testdata/dit-f32.json --inputs fixtures/dit/dit-f32.npz -o /tmp/dit-latents.npz
  zflow generate --semantics semantics/testdata/dit-bf16.json --inputs fixtures/dit/dit-bf16.npz -o /tmp/dit-latents-bf16.npz --trace-out /tmp/dit-ours.npz
  zflow generate --semantics semantics/testdata/dit-f32.json --inputs fixtures/dit/dit-f32.npz -o /tmp/dit-latents.npz --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(tableJSON, o.format) {
				return badInput(fmt.Errorf("--format %q: want %s", o.format, orList(tableJSON)))
			}
			return runGenerate(cmd.OutOrStdout(), newUI(cmd), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.semantics, "semantics", "", "semantics document (JSON, schema v1)")
	f.StringVar(&o.inputs, "inputs", "", "trace holding the request's inputs (and the weights, unless --weights)")
	f.StringVar(&o.weights, "weights", "", "trace holding the weights (default: --inputs)")
	f.StringVarP(&o.out, "out", "o", "out.npz", "where to write the result (.npz or .safetensors)")
	f.StringVar(&o.traceOut, "trace-out", "", "also write our own boundaries as a trace (.npz or .safetensors)")
	f.StringVar(&o.timings, "timings", "", "also write each step's wall time, the backend synchronised (JSON)")
	f.BoolVar(&o.timingOps, "timings-ops", false, "with --timings: also each op kind's time, the backend waited for around every node (slower steps; regions a backend fuses are not split: ZFLOW_UNFUSED=1 on cuda)")
	f.StringVar(&o.backend, "backend", "cpu", "backend to run on: cpu (the reference), cuda (linux, NVIDIA driver), metal (darwin)")
	f.BoolVar(&o.allowIncomplete, "allow-incomplete", false, "run a document whose self-check found it incomplete (it does not reproduce its reference)")
	addFormatFlag(cmd, &o.format, tableJSON, nil)
	completeValues(cmd, "backend", backends)
	cmd.MarkFlagRequired("semantics")
	cmd.MarkFlagRequired("inputs")
	return cmd
}

// moduleCalls counts the calls of each module in tr's call tree.
func moduleCalls(tr *trace.Trace) func(string) int {
	n := map[string]int{}
	for _, c := range tr.Manifest.Calls {
		n[c.Module]++
	}
	return func(m string) int { return n[m] }
}

func runGenerate(stdout io.Writer, u ui, o generateOpts) error {
	start := time.Now()
	if err := checkOutputs(o); err != nil {
		return badInput(err)
	}
	doc, err := semantics.Read(o.semantics)
	if err != nil {
		return badInput(err)
	}
	if doc.Incomplete() {
		if !o.allowIncomplete {
			return badInput(fmt.Errorf("%s is %s; generate refuses it (--allow-incomplete runs it anyway)", o.semantics, doc.StatusLine()))
		}
		fmt.Fprintf(u.stderr, "zflow: warning: running an incomplete document: %s does not reproduce %s of its reference (%s)\n",
			o.semantics, plural(len(doc.NotReproduced()), "boundary", "boundaries"), doc.StatusLine())
	}
	in, err := u.openTrace(o.inputs)
	if err != nil {
		return badInput(err)
	}
	defer in.Close()
	wt := in
	if o.weights != "" {
		if wt, err = u.openTrace(o.weights); err != nil {
			return badInput(err)
		}
		defer wt.Close()
	}
	if err := program.CheckBlockCalls(doc, moduleCalls(in)); err != nil {
		return badInput(fmt.Errorf("%s on %s: %w", o.semantics, o.inputs, err))
	}
	b, err := newBackend(o.backend)
	if err != nil {
		return badInput(err)
	}
	r, err := program.NewRunner(b, doc, program.TraceParams(wt), program.TraceInputs(in))
	if err != nil {
		return badInput(fmt.Errorf("%s on %s: %w", o.semantics, o.inputs, err))
	}
	defer r.Close()
	var rec *program.Recorder
	if o.traceOut != "" {
		rec = &program.Recorder{B: b, Like: func(key string) (trace.Info, bool) {
			info, err := in.Info(key)
			return info, err == nil
		}}
		r.It.Hooks.Observe = rec.Observe
	}
	var tm *stepTimer
	if o.timings != "" {
		if tm, err = newStepTimer(b); err != nil {
			return err
		}
		if o.timingOps {
			r.It.Hooks.Run = tm.runNode(b)
		}
	}
	pg := u.progress("generate")
	steps := pg.Steps("model calls")
	if tm != nil {
		steps = tm.wrap(steps, u.info())
	}
	results, err := r.RunAll(steps)
	pg.Close()
	if err == nil && tm != nil {
		err = tm.err
	}
	if err != nil {
		if errors.Is(err, exec.ErrUnsupported) {
			return badInput(err)
		}
		return err
	}
	defer func() {
		for _, t := range results {
			b.Free(t)
		}
	}()
	if len(results) > len(doc.Structure.Outputs) {
		return fmt.Errorf("generate: %d results for the document's %d outputs", len(results), len(doc.Structure.Outputs))
	}
	// every result under its output's name (a run of several latents
	// writes each); the report names the first
	outputs := map[string]program.HostTensor{}
	for k, t := range results {
		data, err := b.Download(t)
		if err != nil {
			return err
		}
		outputs[doc.Structure.Outputs[k].Name] = program.HostTensor{Data: data, Shape: t.Shape(), Format: t.Format()}
	}
	result, name := results[0], doc.Structure.Outputs[0].Name
	producer := map[string]any{"framework": "zflow", "framework_version": "generate (program v1)", "zflow_version": versionString(), "device": b.Name(),
		"semantics": o.semantics, "inputs": o.inputs, "dtype": doc.Precision.Activations}
	if err := (&program.Recorder{B: b}).Write(o.out, outputs, producer); err != nil {
		return fmt.Errorf("-o %s: %w", o.out, err)
	}
	gd := generateDoc{Format: "zflow-generate", Version: 1, ZflowVersion: versionString(), Semantics: o.semantics, Inputs: o.inputs, Weights: o.weights,
		Backend: b.Name(), ModelCalls: r.Steps(),
		Output: generatedTensor{Name: name, Key: "output/" + name, Shape: result.Shape(), DType: fmt.Sprint(result.Format())},
		Out:    o.out}
	if rec != nil {
		if err := rec.Write(o.traceOut, outputs, producer); err != nil {
			os.Remove(o.out) // nothing half-done: -o goes with the run that failed
			return fmt.Errorf("--trace-out: %w (%s removed)", err, o.out)
		}
		gd.TraceOut = &generatedTrace{Path: o.traceOut, Tensors: rec.Len()}
		// Let `zflow diff` with no paths compare this run with its reference.
		if err := updateWorkspace(func(w *workspace) {
			w.Reference, w.Semantics, w.Generated = o.inputs, o.semantics, o.traceOut
		}); err != nil {
			return fmt.Errorf("the run is written, but the workspace is not updated: %w", err)
		}
	}
	if tm != nil {
		for i, op := range tm.opList() {
			if i == 8 {
				break
			}
			fmt.Fprintf(u.info(), "generate: op %-16s %5d calls %10.2f ms\n", op.Op, op.Count, op.MS)
		}
		if err := tm.write(o.timings); err != nil {
			os.Remove(o.out) // nothing half-done: the outputs go with the run that failed
			if o.traceOut != "" {
				os.Remove(o.traceOut)
			}
			return fmt.Errorf("%w (the run's outputs removed)", err)
		}
		gd.Timings = o.timings
	}
	if fr, ok := b.(exec.FusionReporter); ok {
		gd.Fusion = &fusionReport{Mode: fr.FusionMode(), Regions: fr.Fusions()}
		gd.Fusion.print(u.info())
	}
	gd.Seconds = time.Since(start).Seconds()
	if o.format == "json" {
		return writeJSON(stdout, gd)
	}
	fmt.Fprintf(stdout, "wrote %s: %s %v %s (%d model calls on %s, %.2fs)\n",
		gd.Out, gd.Output.Key, gd.Output.Shape, gd.Output.DType, gd.ModelCalls, gd.Backend, gd.Seconds)
	if t := gd.TraceOut; t != nil {
		fmt.Fprintf(stdout, "wrote %s: %d boundary tensors\n", t.Path, t.Tensors)
	}
	return nil
}

// generateDoc is the --format json document of zflow generate, version 1.
type generateDoc struct {
	Format       string          `json:"format"` // "zflow-generate"
	Version      int             `json:"version"`
	ZflowVersion string          `json:"zflow_version"` // the tool's, as zflow --version prints it
	Semantics    string          `json:"semantics"`
	Inputs       string          `json:"inputs"`
	Weights      string          `json:"weights,omitempty"` // when not the inputs' trace
	Backend      string          `json:"backend"`
	ModelCalls   int             `json:"model_calls"`
	Seconds      float64         `json:"seconds"`
	Output       generatedTensor `json:"output"`            // the result, in Out
	Out          string          `json:"out"`               // -o
	TraceOut     *generatedTrace `json:"trace_out"`         // --trace-out; null without
	Timings      string          `json:"timings,omitempty"` // --timings
	Fusion       *fusionReport   `json:"fusion,omitempty"`  // a backend that fuses regions: what it chose
}

// fusionReport is what a fusing backend decided for each kind of region
// the run met (cuda: measured on the device under the auto mode).
type fusionReport struct {
	Mode    string                `json:"mode"` // auto, off (ZFLOW_UNFUSED=1) or on (ZFLOW_FUSED=1)
	Regions []exec.FusionDecision `json:"regions"`
}

// print writes one summary line and one line per region kind.
func (f *fusionReport) print(w io.Writer) {
	var fused, unfused, declined int
	for _, r := range f.Regions {
		switch {
		case r.Declined != "":
			declined++
		case r.Fused:
			fused++
		default:
			unfused++
		}
	}
	fmt.Fprintf(w, "generate: fusion %s: %s: %d fused, %d faster unfused, %d not fusable\n",
		f.Mode, plural(len(f.Regions), "region kind", "region kinds"), fused, unfused, declined)
	for _, r := range f.Regions {
		switch {
		case r.Declined != "":
			fmt.Fprintf(w, "generate:   not fusable  %s: %s\n", r.Region, r.Declined)
		case r.UnfusedMs == 0 && r.FusedMs == 0:
			fmt.Fprintf(w, "generate:   fused        %s (not measured)\n", r.Region)
		default:
			verdict := "fused      "
			if !r.Fused {
				verdict = "unfused    "
			}
			fmt.Fprintf(w, "generate:   %s  %s: fused %.3f ms, unfused %.3f ms\n", verdict, r.Region, r.FusedMs, r.UnfusedMs)
		}
	}
}

type generatedTensor struct {
	Name  string `json:"name"`
	Key   string `json:"key"`
	Shape []int  `json:"shape"`
	DType string `json:"dtype"` // the stored format: f32, bf16, f16
}

type generatedTrace struct {
	Path    string `json:"path"`
	Tensors int    `json:"tensors"` // boundary tensors written
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// checkOutputs refuses output paths a trace cannot be written to, and any
// that would replace an input.
func checkOutputs(o generateOpts) error {
	outs := []string{o.out}
	if o.traceOut != "" {
		outs = append(outs, o.traceOut)
	}
	for _, p := range outs {
		switch strings.ToLower(filepath.Ext(p)) {
		case ".npz", ".safetensors":
		default:
			return fmt.Errorf("%s: a trace is written as .npz or .safetensors", p)
		}
		for _, src := range []string{o.inputs, o.weights, o.semantics} {
			if src != "" && sameFile(p, src) {
				return fmt.Errorf("%s: would overwrite an input", p)
			}
		}
	}
	if o.traceOut != "" && (o.out == o.traceOut || sameFile(o.out, o.traceOut)) {
		return fmt.Errorf("-o and --trace-out name the same file %s", o.out)
	}
	if o.timingOps && o.timings == "" {
		return fmt.Errorf("--timings-ops: needs --timings FILE (the op times are written there)")
	}
	if t := o.timings; t != "" {
		for _, other := range []string{o.inputs, o.weights, o.semantics, o.out, o.traceOut} {
			if other != "" && (t == other || sameFile(t, other)) {
				return fmt.Errorf("--timings %s: names the same file as another argument", t)
			}
		}
		if err := checkOutputPath("--timings", t); err != nil {
			return err
		}
	}
	if err := checkOutputPath("-o", o.out); err != nil {
		return err
	}
	if o.traceOut != "" {
		return checkOutputPath("--trace-out", o.traceOut)
	}
	return nil
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
