package program_test

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/internal/backendtest"
)

// TestRegionsOnAFixture runs the dit fixture's whole program with a fuser:
// the same bits as the plain run, regions offered, nothing leaked.
func TestRegionsOnAFixture(t *testing.T) {
	for _, c := range fixtureCases() {
		tr, doc := open(t, c)
		run := func(b exec.Backend) []float32 {
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
