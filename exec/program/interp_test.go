package program_test

import (
	"github.com/zflow/zflow/internal/backendtest"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
)

// TestInterpreterFreesTemps: after a whole run only the result is live,
// and intermediates were freed along the way (the peak is well below the
// number of values the program makes).
func TestInterpreterFreesTemps(t *testing.T) {
	for _, c := range append(fixtureCases(), f32Conformance()...) {
		tr, doc := open(t, c)
		b := backendtest.NewCounting(cpu.New(0))
		r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
		if err != nil {
			t.Fatal(err)
		}
		resident := b.Live // weights, inputs, constants, latents
		temps := len(r.P.ValuesOf(program.Temp))
		// Teacher forcing replaces values; those must be freed too.
		force := &program.Force{B: b, Ref: tr, Filter: func(tp program.Tap) bool { return tp.In }}
		r.It.Hooks.Override = force.Override
		out, err := r.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		if b.Live != resident+1 {
			t.Errorf("%s: %d tensors live after the run, want %d resident + the result", c.trace, b.Live, resident)
		}
		if peak := b.Peak - resident; peak > temps/2 {
			t.Errorf("%s: peak of %d intermediates for %d temps: not freed after last use", c.trace, peak, temps)
		}
		t.Logf("%s: %d temps per forward, peak %d live beyond %d resident", c.trace, temps, b.Peak-resident, resident)
		b.Free(out)
		r.Close()
		if b.Live != 0 {
			t.Errorf("%s: %d tensors live after Close", c.trace, b.Live)
		}
	}
}

// f32Conformance lists the f32 conformance cases (none without the traces).
func f32Conformance() []generateCase {
	var out []generateCase
	for _, c := range conformanceCasesOrNone() {
		if c.tol == 1e-5 {
			out = append(out, c)
		}
	}
	return out
}
