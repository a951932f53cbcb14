package program_test

import (
	"math"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/internal/backendtest"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// runOutput runs doc's whole program on b over tr's request and returns
// the model output's values.
func runOutput(t *testing.T, b exec.Backend, doc *semantics.Document, tr *trace.Trace) []float32 {
	t.Helper()
	r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := r.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(out)
	d, err := b.Download(out)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRegionsOnAFixture runs the dit fixture's whole program with a fuser:
// the same bits as the plain run, regions offered, nothing leaked.
func TestRegionsOnAFixture(t *testing.T) {
	for _, c := range fixtureCases() {
		tr, doc := open(t, c)
		run := func(b exec.Backend) []float32 { return runOutput(t, b, doc, tr) }
		want := run(cpu.New(0))
		f := backendtest.NewFuser(cpu.New(0))
		got := run(f)
		if len(f.Offered) == 0 {
			t.Errorf("%s: no region offered", c.trace)
		}
		if f.Live != 0 {
			t.Errorf("%s: %d tensors left alive", c.trace, f.Live)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: [%d] = %v fused, %v unfused", c.trace, i, got[i], want[i])
			}
		}
		kinds := map[string]int{}
		for _, o := range f.Offered {
			kinds[o]++
		}
		t.Logf("%s: %d regions offered, bit-exact with the plain run: %v", c.trace, len(f.Offered), kinds)
	}
}

// TestJoinRegions runs the conformance documents (flux and qwenimage join
// their streams for attention) with a fuser that takes every region and
// with one that declines every region: both the plain run's bits, nothing
// leaked, and the joint models' q/k and v joins offered as join regions.
func TestJoinRegions(t *testing.T) {
	for _, c := range conformanceCases(t) {
		tr, doc := open(t, c)
		run := func(b exec.Backend) []float32 { return runOutput(t, b, doc, tr) }
		want := run(cpu.New(0))
		for _, decline := range []bool{false, true} {
			f := backendtest.NewFuser(cpu.New(0))
			f.Decline = decline
			got := run(f)
			if f.Live != 0 {
				t.Errorf("%s (decline %v): %d tensors left alive", c.trace, decline, f.Live)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s (decline %v): [%d] = %v, plain run %v", c.trace, decline, i, got[i], want[i])
				}
			}
			kinds := map[string]int{}
			for _, o := range f.Offered {
				kinds[o]++
			}
			joint := strings.Contains(c.trace, "flux") || strings.Contains(c.trace, "qwenimage")
			if joint && (kinds["join(norm, norm) → rope"] == 0 || kinds["join(linear, linear)"] == 0) {
				t.Errorf("%s: no q/k or v join offered: %v", c.trace, kinds)
			}
			if !decline {
				t.Logf("%s: %d regions offered, bit-exact with the plain run: %v", c.trace, len(f.Offered), kinds)
			}
		}
	}
}
