package check

import (
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

func setFactor(d *semantics.Document, name string, v any) {
	for i := range d.Factors {
		if d.Factors[i].Name == name {
			d.Factors[i].Value = v
		}
	}
}

func hole(d *semantics.Document, addr string) {
	d.Status = semantics.StatusIncomplete
	d.Undetermined = append(d.Undetermined, semantics.Undetermined{Name: "structure.planted", Scope: addr, Reason: "planted"})
}

// TestSelf: the self-check of the DiT fixture's documents, as written and
// with planted faults. Each fault is found at the part it was planted in,
// first in execution order, beyond its format's tolerance, with a
// signature; an undetermined block is passed (its boundaries skipped)
// and the rest still checked; a hole the check cannot pass stops it, and
// says why.
func TestSelf(t *testing.T) {
	for _, tc := range []struct {
		name, trace, doc string
		plant            func(d *semantics.Document)
		first            string // scope of the first failure; "" none
		notRun           string // what NotRun names; "" it ran
		skipped          bool
	}{
		{"f32 as written", "dit-f32", "dit-f32", func(*semantics.Document) {}, "", "", false},
		{"bf16 as written", "dit-bf16", "dit-bf16", func(*semantics.Document) {}, "", "", false},
		{"gate function", "dit-f32", "dit-f32", func(d *semantics.Document) { setFactor(d, "gate_fn", "tanh") }, "blocks.0", "", false},
		{"sinusoid layout", "dit-f32", "dit-f32", func(d *semantics.Document) { setFactor(d, "timestep_flip_sin_to_cos", false) }, "conditioning", "", false},
		{"final chunk order", "dit-f32", "dit-f32", func(d *semantics.Document) { setFactor(d, "final_norm_order", "shift,scale") }, "final", "", false},
		{"bf16 activation", "dit-bf16", "dit-bf16", func(d *semantics.Document) { setFactor(d, "mlp_act", "relu") }, "blocks.0", "", false},
		{"undetermined block", "dit-f32", "dit-f32", func(d *semantics.Document) {
			d.Structure.Blocks[1].Kind = ""
			hole(d, "blocks.1")
		}, "", "", true},
		{"fault after an undetermined block", "dit-f32", "dit-f32", func(d *semantics.Document) {
			d.Structure.Blocks[0].Kind = ""
			hole(d, "blocks.0")
			setFactor(d, "final_norm_order", "shift,scale")
		}, "final", "", true},
		{"undetermined final stage", "dit-f32", "dit-f32", func(d *semantics.Document) {
			d.Structure.Final.Stream = ""
			hole(d, "final")
		}, "", "final is not expressed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := trace.Open("../fixtures/dit/" + tc.trace + ".npz")
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			doc, err := semantics.Read("../semantics/testdata/" + tc.doc + ".json")
			if err != nil {
				t.Fatal(err)
			}
			tc.plant(doc)
			res, err := Self(cpu.New(0), doc, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.notRun != "" {
				if !strings.Contains(res.NotRun, tc.notRun) {
					t.Errorf("not run %q, want it to name %q", res.NotRun, tc.notRun)
				}
			} else if res.NotRun != "" || res.Compared == 0 {
				t.Fatalf("compared %d; not run: %s", res.Compared, res.NotRun)
			}
			if (res.Skipped > 0) != tc.skipped {
				t.Errorf("skipped %d boundary values", res.Skipped)
			}
			if tc.first == "" && len(res.Failures) > 0 {
				f := res.Failures[0]
				t.Errorf("%d not reproduced, first %s at step %d: rel-RMS %.3g > %.3g", len(res.Failures), f.Boundary, f.Step, f.RelRMS, f.Tolerance)
			}
			if tc.first != "" {
				if len(res.Failures) == 0 {
					t.Fatal("the planted fault is not found")
				}
				f := res.Failures[0]
				if f.Scope != tc.first || !(f.RelRMS > f.Tolerance) || !slices.Contains(semantics.Signatures, f.Diagnosis.Signature.String()) {
					t.Errorf("first %s at %s: rel-RMS %.3g (tolerance %.3g), signature %s; want it at %s", f.Boundary, f.Scope, f.RelRMS, f.Tolerance, f.Diagnosis.Signature, tc.first)
				}
			}
			Apply(doc, res)
			if err := doc.Validate(); err != nil {
				t.Fatalf("the checked document does not validate: %v", err)
			}
			complete := tc.first == "" && tc.notRun == "" && !tc.skipped
			if got := doc.Status == semantics.StatusComplete; got != complete {
				t.Errorf("status %s: %s", doc.Status, doc.StatusLine())
			}
			if nr := doc.NotReproduced(); len(nr) != len(res.Failures) || doc.Check.NotReproduced != len(res.Failures) {
				t.Errorf("%d entries, check says %d, for %d failures", len(nr), doc.Check.NotReproduced, len(res.Failures))
			}
			line := doc.StatusLine()
			if tc.first != "" && !strings.Contains(line, "first "+res.Failures[0].Boundary+" (") {
				t.Errorf("status line %q does not name the first failure", line)
			}
		})
	}
}

// TestRunRefusesFreeRunningHoles: free running needs every part.
func TestRunRefusesFreeRunningHoles(t *testing.T) {
	tr, err := trace.Open("../fixtures/dit/dit-f32.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	doc, err := semantics.Read("../semantics/testdata/dit-f32.json")
	if err != nil {
		t.Fatal(err)
	}
	doc.Structure.Blocks[0].Kind = ""
	hole(doc, "blocks.0")
	if _, err := Run(cpu.New(0), doc, tr, Options{FreeRunning: true}); err == nil || !strings.Contains(err.Error(), "blocks.0") {
		t.Errorf("free running an incomplete document: %v", err)
	}
}

// TestProgress: the check's counter counts the program nodes run, one by
// one, up to its total, the program's nodes once per model call: all the
// trace's steps, or the first --steps.
func TestProgress(t *testing.T) {
	tr, err := trace.Open("../fixtures/dit/dit-f32.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	doc, err := semantics.Read("../semantics/testdata/dit-f32.json")
	if err != nil {
		t.Fatal(err)
	}
	steps := len(tr.Steps())
	if steps < 2 {
		t.Fatalf("the fixture has %d steps: the test needs several", steps)
	}
	totals := map[int]int{}
	for _, calls := range []int{1, steps} {
		done, total := 0, 0
		progress := func(d, n int) {
			if d != done+1 || (total != 0 && n != total) {
				t.Errorf("%d calls: %d/%d after %d/%d", calls, d, n, done, total)
			}
			done, total = d, n
		}
		if calls == steps {
			if _, err := Self(cpu.New(0), doc, tr, progress); err != nil {
				t.Fatal(err)
			}
		} else if _, err := Run(cpu.New(0), doc, tr, Options{Steps: calls, Progress: progress}); err != nil {
			t.Fatal(err)
		}
		if total == 0 || done != total {
			t.Errorf("%d calls: the counter ended at %d/%d", calls, done, total)
		}
		totals[calls] = total
	}
	if totals[steps] != steps*totals[1] {
		t.Errorf("%d nodes run over %d model calls, %d over one: want %d× as many", totals[steps], steps, totals[1], steps)
	}
}

// TestSelfMaskedBias: an attention bias of finfo.min masks beside small
// entries that discovery explained as 1 − σ (right at step 0, where it is
// 0; 0.25 and 0.6 at steps 1 and 2). The document, written before masks
// were compared apart, passed its own check: over all entries the masks
// make the rel-RMS about 1e-40. The masks must not hide the wrong entries.
func TestSelfMaskedBias(t *testing.T) {
	tr, err := trace.Open("../fixtures/unseen/omnigen-f32.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	doc, err := semantics.Read("testdata/omnigen-masked-bias.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Self(cpu.New(0), doc, tr, nil)
	if err != nil || res.NotRun != "" {
		t.Fatalf("%v; not run: %s", err, res.NotRun)
	}
	if len(res.Failures) == 0 {
		t.Fatal("the bias's wrong entries passed the self-check")
	}
	f := res.Failures[0]
	if f.Boundary != "transformer.layers.0/kw.attention_mask" || f.Step != 1 || f.Masked != 90 || f.Mismatched != 0 {
		t.Errorf("first failure %s at step %d, %d masked, %d mismatched; want the bias at step 1, its 90 masks matching",
			f.Boundary, f.Step, f.Masked, f.Mismatched)
	}
	Apply(doc, res)
	if doc.Status != semantics.StatusIncomplete || !strings.Contains(doc.Undetermined[len(doc.Undetermined)-len(res.Failures)].Reason, "90 masked values match") {
		t.Errorf("status %s, undetermined %+v", doc.Status, doc.Undetermined)
	}
}
