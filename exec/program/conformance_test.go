package program_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// conformanceDir holds the traces of real third-party models (../shared).
const conformanceDir = "../../../shared/conformance"

// generateCase is one trace with its hand-written semantics document.
type generateCase struct {
	trace string // path
	doc   string // path
	tol   float64
}

func conformanceCases(t *testing.T) []generateCase {
	t.Helper()
	if _, err := os.Stat(conformanceDir); err != nil {
		t.Skipf("conformance traces not available (%s): %v", conformanceDir, err)
	}
	return conformanceCasesOrNone()
}

// conformanceCasesOrNone lists the conformance cases, none when the traces
// are absent.
func conformanceCasesOrNone() []generateCase {
	if _, err := os.Stat(conformanceDir); err != nil {
		return nil
	}
	var cases []generateCase
	for _, m := range []string{"flux", "qwenimage", "llama"} {
		cases = append(cases,
			generateCase{filepath.Join(conformanceDir, m+"-f32.npz"), "../../semantics/testdata/" + m + "-f32.json", 1e-5},
			generateCase{filepath.Join(conformanceDir, m+"-bf16.npz"), "../../semantics/testdata/" + m + "-bf16.json", 2e-2})
	}
	return cases
}

func fixtureCases() []generateCase {
	return []generateCase{
		{"../../fixtures/dit/dit-f32.npz", "../../semantics/testdata/dit-f32.json", 1e-5},
		{"../../fixtures/dit/dit-bf16.npz", "../../semantics/testdata/dit-bf16.json", 2e-2},
	}
}

// open opens a case's trace and document.
func open(t *testing.T, c generateCase) (*trace.Trace, *semantics.Document) {
	t.Helper()
	tr, err := trace.Open(c.trace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	doc, err := semantics.Read(c.doc)
	if err != nil {
		t.Fatal(err)
	}
	return tr, doc
}

// generate runs a case end to end and returns (rel-RMS, fraction exact)
// of the result against the trace's output.
func generate(t *testing.T, c generateCase, hooks program.Hooks) (float64, float64) {
	t.Helper()
	tr, doc := open(t, c)
	b := cpu.New(0)
	r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.It.Hooks = hooks
	out, err := r.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(out)
	ours, err := b.Download(out)
	if err != nil {
		t.Fatal(err)
	}
	name := doc.Structure.Outputs[0].Name
	ref, err := tr.Tensor(tr.Manifest.Outputs[name])
	if err != nil {
		t.Fatal(err)
	}
	rv, err := ref.Float32()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := precision.RelRMS(out.Format(), ours, rv)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := precision.ExactFraction(out.Format(), ours, rv)
	if err != nil {
		t.Fatal(err)
	}
	return rel, exact
}

func TestGenerateFixtures(t *testing.T) {
	runGenerate(t, fixtureCases())
}

func TestGenerateConformance(t *testing.T) {
	runGenerate(t, conformanceCases(t))
}

func runGenerate(t *testing.T, cases []generateCase) {
	for _, c := range cases {
		t.Run(strings.TrimSuffix(filepath.Base(c.trace), ".npz"), func(t *testing.T) {
			rel, exact := generate(t, c, program.Hooks{})
			t.Logf("%s: output rel-RMS %.3g (gate %.0e), %.2f%% bit-exact", filepath.Base(c.trace), rel, c.tol, 100*exact)
			if !(rel <= c.tol) {
				t.Errorf("rel-RMS %.3g > %.0e", rel, c.tol)
			}
		})
	}
}

func TestTeacherForcedBlocks(t *testing.T) {
	cases := fixtureCases()
	if _, err := os.Stat(conformanceDir); err == nil {
		cases = append(cases, conformanceCases(t)...)
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(filepath.Base(c.trace), ".npz"), func(t *testing.T) {
			tr, doc := open(t, c)
			b := cpu.New(0)
			r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			modules := map[string]bool{}
			for _, s := range r.P.Segments {
				if s.Address != "model" {
					modules[s.Module] = true
				}
			}
			// Force every segment's inputs (blocks, conditioning, positions,
			// final) and the model's per-step latents; compare every tapped
			// output: segment outputs (the block-level table) and, at step
			// 0, the roles inside them (linears, norms).
			force := &program.Force{B: b, Ref: tr, Filter: func(tp program.Tap) bool { return tp.In }}
			cmp := &program.Compare{B: b, Ref: tr, Filter: func(tp program.Tap) bool { return !tp.In }}
			r.It.Hooks = program.Hooks{Override: force.Override, Observe: cmp.Observe}
			out, err := r.Run(nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Free(out)
			var blocks, roles []program.Diff
			for _, d := range cmp.Diffs {
				switch {
				case modules[d.Tap.Module]:
					blocks = append(blocks, d)
				case d.Step == 0:
					roles = append(roles, d)
				}
			}
			if len(blocks) == 0 {
				t.Fatal("no boundary compared")
			}
			worst := 0.0
			for _, d := range blocks {
				worst = max(worst, d.RelRMS)
			}
			slices.SortStableFunc(blocks, func(a, b program.Diff) int { return a.Step - b.Step })
			t.Log(diffTable(fmt.Sprintf("teacher-forced block-level boundaries of %s (%d inputs forced)", filepath.Base(c.trace), force.Forced), blocks))
			t.Log(diffTable(fmt.Sprintf("role-level boundaries inside them, step 0, %s", filepath.Base(c.trace)), roles))
			if !(worst <= c.tol) {
				t.Errorf("worst teacher-forced boundary rel-RMS %.3g > %.0e", worst, c.tol)
			}
		})
	}
}

func diffTable(title string, diffs []program.Diff) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s:\n  %-66s %10s %9s\n", title, "boundary", "rel-RMS", "exact")
	for _, d := range diffs {
		fmt.Fprintf(&sb, "  %-66s %10.3g %8.2f%%\n", d.Key, d.RelRMS, 100*d.Exact)
	}
	return sb.String()
}
