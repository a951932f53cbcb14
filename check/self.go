package check

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// The self-check's gate: the rel-RMS, teacher forced, within which a
// boundary stored in a format is reproduced. Teacher forcing recomputes
// each boundary from the reference's own values just before it, so the
// error is one op's rounding, not a model's accumulated drift (that is
// what reports.AutoRelRMS* allow free running).
//
// Measured on the discovered documents of the shared conformance traces
// that reproduce (flux, qwenimage, llama) and of fixtures/dit, every
// boundary, every step: f32 at most 2.7e-6 (a timestep sinusoid in f32
// against the reference's f64 frequencies); bf16 at most 5.1e-4 with the
// searched rounding plan and 6.0e-3 with the placeholder plan (torch 1.13's
// bf16 kernels on fixtures/dit). A wrong factor is far beyond: an embedding
// scaled by √hidden reads as 0.88, a wrong activation or gate function as
// 1e-2 to 1.
//
//   - f32, f64: 1e-4, 37× the worst seen; a summation order cannot reach it.
//   - bf16: 2e-2, about five bf16 unit roundoffs (2⁻⁸ ≈ 3.9e-3) and 3.3×
//     the placeholder plan's worst: a document is checked before its
//     rounding plan is searched, and rounding is not semantics.
//   - f16: 4e-3, the same five unit roundoffs of f16's finer 2⁻¹¹ and a
//     little more (no f16 trace to measure yet).
var tolerances = map[precision.Format]float64{
	precision.F32:  1e-4,
	precision.F64:  1e-4,
	precision.BF16: 2e-2,
	precision.F16:  4e-3,
}

// Tolerance is the self-check's rel-RMS gate for a boundary stored in f.
func Tolerance(f precision.Format) float64 {
	if t, ok := tolerances[f]; ok {
		return t
	}
	return tolerances[precision.F32]
}

// Failure is one boundary the document does not reproduce, at the first
// step it fails.
type Failure struct {
	Boundary  string // "<module>/<port>" or "output/<name>"
	Module    string // "" for a request output
	Scope     string // the address of the part that computes it
	Step      int
	Steps     int // steps at which it fails
	Format    precision.Format
	RelRMS    float64 // over the ordinary pairs; +Inf when Mismatched > 0
	Cosine    float64
	Tolerance float64
	// Masked and Mismatched count the pairs compared apart from the
	// rel-RMS (precision's mask-sized values): those that match, and
	// those that do not (a mask or a NaN on one side only).
	Masked, Mismatched int
	Diagnosis          reports.Diagnosis
}

// Result is a self-check: what was compared and what was not reproduced.
type Result struct {
	Compared, Skipped int
	Failures          []Failure // execution order
	// NotRun says why the check could not run: the program does not build
	// or cannot run (the document's own failing); empty when it ran.
	NotRun string
}

// Self runs the self-check of doc against the trace it was made from
// (teacher forced, all steps). A document that cannot be run is a result
// (NotRun), not an error: the error is for a trace that cannot be read.
// progress, when not nil, is Options.Progress.
func Self(b exec.Backend, doc *semantics.Document, tr *trace.Trace, progress func(done, total int)) (*Result, error) {
	// Only a boundary the check fails needs its values (its diagnosis).
	failing := func(r *plan.Record) bool { return r.RelRMS() > Tolerance(r.Format) }
	rep, err := Run(b, doc, tr, Options{Progress: progress, KeepIf: failing})
	if err != nil {
		if errors.Is(err, trace.ErrFormat) || errors.Is(err, trace.ErrManifest) {
			return nil, err
		}
		return &Result{NotRun: oneLine(err.Error())}, nil
	}
	res := &Result{Compared: len(rep.Records), Skipped: len(rep.Skipped)}
	scope := scopes(doc, tr)
	at := map[string]int{} // boundary → index in Failures
	for i := range rep.Records {
		r := &rep.Records[i]
		tol := Tolerance(r.Format)
		rel := r.RelRMS()
		if rel <= tol {
			continue
		}
		bd := r.Boundary()
		if j, ok := at[bd]; ok {
			res.Failures[j].Steps++
			continue
		}
		at[bd] = len(res.Failures)
		f := failure(r, rel, tol)
		f.Scope = scope(r.Module)
		res.Failures = append(res.Failures, f)
	}
	return res, nil
}

// failure diagnoses a record beyond its tolerance.
func failure(r *plan.Record, rel, tol float64) Failure {
	rowLen := 1
	if len(r.Shape) > 0 && r.Shape[len(r.Shape)-1] > 0 {
		rowLen = r.Shape[len(r.Shape)-1]
	}
	f := Failure{Boundary: r.Boundary(), Module: r.Module, Step: r.Step, Steps: 1, Format: r.Format, RelRMS: rel,
		Cosine: math.NaN(), Tolerance: tol, Masked: r.Masked, Mismatched: r.Mismatched}
	if m, err := reports.Compare(r.Ours, r.Ref, r.Format, rowLen); err == nil {
		f.Cosine = m.Cosine
	}
	f.Diagnosis = reports.DiagnoseRows(r.Ours, r.Ref, rowLen, r.Format)
	if f.Diagnosis.Signature == reports.NoSignature {
		// Within the format's rounding by Diagnose's own measure, yet
		// beyond the gate: random error, read as numerics.
		f.Diagnosis.Signature = reports.Numerics
	}
	return f
}

// masks says how the mask-sized values of a failure compared, when it
// has any: the rel-RMS leaves them out.
func masks(f Failure) string {
	switch {
	case f.Mismatched > 0:
		return fmt.Sprintf(", %d values mask-sized or NaN on one side only (%d masked values match)", f.Mismatched, f.Masked)
	case f.Masked > 0:
		return fmt.Sprintf(" over the values not mask-sized (%d masked values match)", f.Masked)
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Apply writes res into doc: an undetermined entry per boundary not
// reproduced (execution order), the check, and the status: complete when
// every boundary was reproduced, nothing was left out and the check ran.
func Apply(doc *semantics.Document, res *Result) {
	for _, f := range res.Failures {
		step := f.Step
		doc.Undetermined = append(doc.Undetermined, semantics.Undetermined{
			Name: semantics.UndeterminedBoundary, Scope: f.Scope, Boundary: f.Boundary,
			Reason: fmt.Sprintf("not reproduced teacher forced: rel-RMS %.3g > %.3g (%s)%s; %s", f.RelRMS, f.Tolerance, f.Format,
				masks(f), oneLine(f.Diagnosis.Reason)),
			Step: &step, Steps: f.Steps, Signature: f.Diagnosis.Signature.String(),
			RelRMS: semantics.NumberOf(f.RelRMS), Cosine: semantics.NumberOf(f.Cosine), Tolerance: f.Tolerance,
		})
	}
	tols := map[string]float64{}
	for f, t := range tolerances {
		tols[f.String()] = t
	}
	doc.Check = &semantics.Check{Mode: "teacher_forced", Boundaries: res.Compared, NotReproduced: len(res.Failures),
		Skipped: res.Skipped, Tolerances: tols, NotRun: res.NotRun}
	doc.Status = semantics.StatusComplete
	// a program that takes values from the trace reproduces only the
	// captured run, whatever the boundaries say
	fromTrace := doc.Program != nil && len(doc.Program.FromTrace()) > 0
	if len(res.Failures) > 0 || res.NotRun != "" || len(doc.Holes()) > 0 || fromTrace {
		doc.Status = semantics.StatusIncomplete
	}
}

// scopes maps a module to the address of the part that computes it: the
// part whose role or boundary names the module, or its nearest ancestor's
// in tr's call tree ("model" when none does).
func scopes(doc *semantics.Document, tr *trace.Trace) func(module string) string {
	st := &doc.Structure
	by := map[string]string{}
	bind := func(addr, module string) {
		if _, ok := by[module]; module != "" && !ok {
			by[module] = addr
		}
	}
	roles := func(addr string, rs map[string]semantics.Role) {
		for _, r := range rs {
			bind(addr, r.Module)
		}
	}
	for _, e := range st.Embedders {
		roles(semantics.EmbedAddress(e.Stream), e.Roles)
	}
	if c := st.Conditioning; c != nil {
		roles("conditioning", c.Roles)
		if c.Boundary != nil {
			bind("conditioning", c.Boundary.Module)
		}
	}
	if p := st.Positions; p != nil && p.Boundary != nil {
		bind("positions", p.Boundary.Module)
	}
	for i, b := range st.Blocks {
		roles(semantics.BlockAddress(i), b.Roles)
		if b.Boundary != nil {
			bind(semantics.BlockAddress(i), b.Boundary.Module)
		}
	}
	roles("final", st.Final.Roles)
	if st.Final.Boundary != nil {
		bind("final", st.Final.Boundary.Module)
	}
	top := "model"
	if st.Run == "flow_euler" {
		top = "sampler"
	}
	parent := map[string]string{}
	tree := tr.Tree()
	for _, c := range tree.Calls() {
		if _, ok := parent[c.Module]; ok {
			continue
		}
		parent[c.Module] = ""
		if p, ok := tree.Parent(c.ID); ok {
			parent[c.Module] = p.Module
		}
	}
	return func(module string) string {
		if module == "" {
			return top
		}
		for m, hops := module, 0; m != "" && hops <= len(parent); m, hops = parent[m], hops+1 {
			if a, ok := by[m]; ok {
				return a
			}
		}
		return "model"
	}
}
