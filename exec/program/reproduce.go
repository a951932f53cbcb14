package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Reproduction is a document's run of a trace's own request against the
// trace's output.
type Reproduction struct {
	RelRMS float64 // of the generated output against output/<Output>
	Exact  float64 // fraction bit-exact in the output's format
	Output string  // the output's name
	Steps  int     // model calls made
}

// Reproduce runs doc's program on the request and weights the trace holds
// (free running, every step) and compares the result with the trace's
// output.
func Reproduce(b exec.Backend, doc *semantics.Document, tr *trace.Trace) (*Reproduction, error) {
	if len(doc.Structure.Outputs) == 0 {
		return nil, fmt.Errorf("program: the document names no output")
	}
	r, err := NewRunner(b, doc, TraceParams(tr), TraceInputs(tr))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out, err := r.Run(nil)
	if err != nil {
		return nil, err
	}
	defer b.Free(out)
	ours, err := b.Download(out)
	if err != nil {
		return nil, err
	}
	name := doc.Structure.Outputs[0].Name
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
		return nil, err
	}
	exact, err := precision.ExactFraction(out.Format(), ours, rv)
	if err != nil {
		return nil, err
	}
	return &Reproduction{RelRMS: rel, Exact: exact, Output: name, Steps: r.Steps()}, nil
}
