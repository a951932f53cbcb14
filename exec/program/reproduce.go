package program

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Reproduction is a document's run of a trace's own request against the
// trace's output (every output, for a run of several latents: the worst).
type Reproduction struct {
	RelRMS float64 // of the generated output against output/<Output> (the largest over the outputs)
	Exact  float64 // fraction bit-exact in the output's format (the smallest)
	Output string  // the output's name (names, joined by ", ")
	Steps  int     // model calls made
}

// Reproduce runs doc's program on the request and weights the trace holds
// (free running, every step) and compares each result with the trace's
// output of that name.
func Reproduce(b exec.Backend, doc *semantics.Document, tr *trace.Trace) (*Reproduction, error) {
	if len(doc.Structure.Outputs) == 0 {
		return nil, fmt.Errorf("program: the document names no output")
	}
	r, err := NewRunner(b, doc, TraceParams(tr), TraceInputs(tr))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	outs, err := r.RunAll(nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, t := range outs {
			b.Free(t)
		}
	}()
	if len(outs) != len(doc.Structure.Outputs) {
		return nil, fmt.Errorf("program: %d results for the document's %d outputs", len(outs), len(doc.Structure.Outputs))
	}
	rep := &Reproduction{Exact: 1, Steps: r.Steps()}
	var names []string
	for k, out := range outs {
		ours, err := b.Download(out)
		if err != nil {
			return nil, err
		}
		name := doc.Structure.Outputs[k].Name
		ref, err := tr.Tensor(tr.Manifest.Outputs[name])
		if err != nil {
			return nil, err
		}
		rv, err := ref.Float32()
		if err != nil {
			return nil, err
		}
		rel, err := precision.RelRMS(out.Format(), ours, rv)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		exact, err := precision.ExactFraction(out.Format(), ours, rv)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		rep.RelRMS, rep.Exact = max(rep.RelRMS, rel), min(rep.Exact, exact)
		names = append(names, name)
	}
	rep.Output = strings.Join(names, ", ")
	return rep, nil
}
