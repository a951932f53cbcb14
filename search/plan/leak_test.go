package plan

import (
	"errors"
	"github.com/zflow/zflow/internal/backendtest"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
)

// TestEvaluatorFreesEverything: after each run the only tensors alive on
// the backend are the runner's (weights, inputs, constants) and those the
// cache keeps, whatever the run (every plan a search tries, whole and
// sampled, stopped part way, free running); after Close, none.
func TestEvaluatorFreesEverything(t *testing.T) {
	for _, mode := range []struct {
		name string
		opt  Options
		ro   runOpts
	}{
		{"teacher forced", Options{}, runOpts{}},
		{"sampled", Options{}, runOpts{sample: 4}},
		{"stopped", Options{}, runOpts{sample: 4, stop: func(r *Record, partial bool) bool { return r.Exact < r.N }}},
		{"small cache", Options{CacheBytes: 4 << 10}, runOpts{sample: 4}},
		{"free running, kept", Options{FreeRunning: true, Keep: true}, runOpts{}},
		{"one step", Options{Steps: 1}, runOpts{}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			tr, doc := load(t, ditCase())
			Prepare(doc)
			b := backendtest.NewCounting(cpu.New(1))
			e, err := NewEvaluator(b, tr, doc, mode.opt)
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			for i, pr := range candidatePlans(doc)[:20] {
				if _, err := e.run(pr, mode.ro); err != nil && !errors.Is(err, errStopped) {
					continue // a plan the backend refuses: freed all the same
				}
				runs++
				// The runner's: the weights, the inputs, the constants (a plan
				// that rebuilds the program uploads its constants anew) and a
				// flow's first latents.
				base := 0
				for _, v := range e.r.P.Values {
					if v.Kind == program.Weight || v.Kind == program.Input || v.Kind == program.Const {
						base++
					}
				}
				if e.flow {
					base++
				}
				if want := base + e.cache.lru.Len(); b.Live != want {
					t.Fatalf("plan %d: %d tensors live, want %d (%d the runner's, %d cached)", i, b.Live, want, base, e.cache.lru.Len())
				}
			}
			e.Close()
			if runs == 0 || b.Live != 0 {
				t.Fatalf("%d runs; %d tensors live after Close", runs, b.Live)
			}
			t.Logf("%d runs, peak %d tensors", runs, b.Peak)
		})
	}
}

// TestFreeRunningMakesEachValueOnce: free running with nothing cached
// (as a one-shot verify runs), the evaluator makes no more tensors than
// the plain interpreter's run does, record for record: each value once,
// not again with its inputs for every later boundary that needs it.
func TestFreeRunningMakesEachValueOnce(t *testing.T) {
	tr, doc := load(t, ditCase())
	Prepare(doc)
	ref := backendtest.NewCounting(cpu.New(1))
	want, err := referenceRun(ref, tr, doc, doc.Precision, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := backendtest.NewCounting(cpu.New(1))
	e, err := NewEvaluator(b, tr, doc, Options{FreeRunning: true, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.Run(doc.Precision)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, the interpreter's run %d", len(got), len(want))
	}
	if b.Made > ref.Made {
		t.Errorf("%d tensors made, the interpreter's run %d", b.Made, ref.Made)
	}
}
