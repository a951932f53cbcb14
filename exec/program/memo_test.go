package program_test

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/internal/backendtest"
)

// TestMemoKeepsInvariantNodes: a plain run makes each step-invariant node
// (one that reads no temp and no step input) once, where a watched run
// makes it every step; both give the same bits, and the plain run frees
// all it kept.
func TestMemoKeepsInvariantNodes(t *testing.T) {
	for _, c := range fixtureCases() {
		tr, doc := open(t, c)
		run := func(watch bool, limit int) ([]float32, map[int]int, int) {
			b := backendtest.NewCounting(cpu.New(0))
			r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
			if err != nil {
				t.Fatal(err)
			}
			r.MemoLimit = limit
			calls := map[int]int{}
			r.It.Hooks.Run = func(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
				calls[i]++
				return program.RunNode(b, n, in)
			}
			if watch { // a hook that sees every value: nothing may be kept
				r.It.Hooks.Observe = func(int, program.Tap, exec.Tensor) error { return nil }
			}
			out, err := r.Run(nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := b.Download(out)
			if err != nil {
				t.Fatal(err)
			}
			b.Free(out)
			steps := r.Steps()
			r.Close()
			if b.Live != 0 {
				t.Errorf("%s (watched %v): %d tensors left alive", c.trace, watch, b.Live)
			}
			return d, calls, steps
		}
		plain, once, steps := run(false, 0)
		watched, every, _ := run(true, 0)
		_, bounded, _ := run(false, 1) // a budget of one byte keeps nothing
		for i, n := range every {
			if bounded[i] != n {
				t.Errorf("%s: node %d ran %d times with nothing kept, %d watched", c.trace, i, bounded[i], n)
			}
		}
		if steps < 2 {
			t.Fatalf("%s: %d steps: nothing to keep across steps", c.trace, steps)
		}
		kept := 0
		for i, n := range every {
			if once[i] < n {
				kept++
				if once[i] != 1 || n != steps {
					t.Errorf("%s: node %d ran %d times plain, %d watched (%d steps)", c.trace, i, once[i], n, steps)
				}
			}
		}
		if kept == 0 {
			t.Errorf("%s: no node kept across steps", c.trace)
		}
		bad := 0
		for i := range plain {
			if math.Float32bits(plain[i]) != math.Float32bits(watched[i]) {
				bad++
			}
		}
		if bad > 0 || len(plain) != len(watched) {
			t.Errorf("%s: %d of %d outputs differ with nodes kept", c.trace, bad, len(plain))
		}
		t.Logf("%s: %d nodes made once instead of %d times", c.trace, kept, steps)
	}
}
