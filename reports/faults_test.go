package reports

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zflow/zflow/trace"
)

// plantedFaults are fixtures/faults (capture/examples/planted_faults.py):
// each port changes one thing; its README names the first differing
// boundary and the signature DESIGN.md's taxonomy gives the fault.
var plantedFaults = []struct {
	file, first string
	index       int
	want        Signature
}{
	{"swap_shift_scale.npz", "s0/transformer.blocks.0.attn/arg0", 35, Bias},
	{"wrong_activation.npz", "s0/transformer.blocks.0.ff.act/out", 57, Activation},
	{"transposed_unpatchify.npz", "s0/transformer/out.0", 112, Topology},
	{"no_norm_offset.npz", "s0/transformer.blocks.0.attn/arg0", 35, Magnitude},
	{"f16_overflow.npz", "s0/transformer.blocks.0.ff.proj_in/out", 55, Numerics},
	// not committed: `planted_faults.py --faults wrong_activation_erf`
	// writes it; the test reads it when it is there
	{"wrong_activation_erf.npz", "s0/transformer.blocks.0.ff.act/out", 57, Activation},
}

const faultsDir = "../fixtures/faults"

// TestPlantedFaults: with the default gates, each planted fault's first
// failing boundary is the first differing one and its signature is the
// fault's; the clean port passes.
func TestPlantedFaults(t *testing.T) {
	ref := openFault(t, "ref.npz")
	if ref == nil {
		t.Skip("fixtures/faults is missing")
	}
	clean := openFault(t, "clean.npz")
	r, err := Diff(clean, ref, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass() || len(r.Boundaries) != 114 || len(r.Unpaired) != 0 {
		t.Errorf("clean: pass %v, %d boundaries, %d unpaired", r.Pass(), len(r.Boundaries), len(r.Unpaired))
	}
	for _, f := range plantedFaults {
		ours := openFault(t, f.file)
		if ours == nil {
			t.Logf("%s: not there, skipped", f.file)
			continue
		}
		r, err := Diff(ours, ref, DiffOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.FirstFailing != f.index || r.Boundaries[r.FirstFailing].Key != f.first {
			t.Errorf("%s: first failing #%d, want #%d %s", f.file, r.FirstFailing, f.index, f.first)
			continue
		}
		if r.Finding == nil {
			t.Errorf("%s: no diagnosis", f.file)
			continue
		}
		d := r.Finding.Diagnosis
		if d.Signature != f.want {
			t.Errorf("%s: %v (%s), want %v\n%+v", f.file, d.Signature, d.Reason, f.want, d.Evidence)
		} else {
			t.Logf("%s: %s: %v: %s", f.file, f.first, d.Signature, d.Reason)
		}
	}
}

func openFault(t *testing.T, name string) *trace.Trace {
	path := filepath.Join(faultsDir, name)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	return open(t, path)
}

// TestConformancePairs diffs each model's bf16 trace (GPU) against its f32
// trace (CPU): every boundary pairs up, and what fails first is the
// timestep, where the models really differ between dtypes (DESIGN.md's
// conformance README: σ in the model dtype), not rounding drift.
func TestConformancePairs(t *testing.T) {
	dir := "../../shared/conformance"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("../shared/conformance is absent")
	}
	for _, c := range []struct {
		model, first string
	}{
		{"flux", "s1/transformer.time_text_embed.time_proj/out"},
		{"qwenimage", "s2/transformer.time_text_embed.time_proj/out"},
		{"llama", ""},
	} {
		ours, ref := open(t, filepath.Join(dir, c.model+"-bf16.npz")), open(t, filepath.Join(dir, c.model+"-f32.npz"))
		r, err := Diff(ours, ref, DiffOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first := ""
		if r.FirstFailing >= 0 {
			first = r.Boundaries[r.FirstFailing].Key
		}
		if len(r.Unpaired) != 0 || first != c.first {
			t.Errorf("%s: %d unpaired, first failing %q, want %q", c.model, len(r.Unpaired), first, c.first)
		}
		if r.Finding != nil && r.Finding.Diagnosis.Signature != Numerics {
			t.Errorf("%s: %v (%s), want numerics", c.model, r.Finding.Diagnosis.Signature, r.Finding.Diagnosis.Reason)
		}
	}
}

// TestDiffDeflated: issue 12, item 8. A deflated trace (its entries
// decoded as they are read, a pair in one segment) gives the report the
// stored one gives: every boundary's metrics, the first failure and its
// diagnosis, on both sides.
func TestDiffDeflated(t *testing.T) {
	ref := openFault(t, "ref.npz")
	ours := openFault(t, "wrong_activation.npz")
	if ref == nil || ours == nil {
		t.Skip("fixtures/faults is missing")
	}
	dir := t.TempDir()
	deflate := func(tr *trace.Trace, name string) *trace.Trace {
		p := filepath.Join(dir, name)
		w, err := trace.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w.Deflate = true
		for _, k := range tr.Keys() {
			x, err := tr.Tensor(k)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Add(k, x.DType, x.Shape, x.Bytes()); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(tr.Manifest); err != nil {
			t.Fatal(err)
		}
		d := open(t, p)
		if in, _ := d.Info(d.Keys()[0]); !in.Compressed {
			t.Fatalf("%s: not deflated", p)
		}
		return d
	}
	want, err := Diff(ours, ref, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		ours, ref *trace.Trace
	}{
		{"ours deflated", deflate(ours, "ours.npz"), ref},
		{"ref deflated", ours, deflate(ref, "ref.npz")},
	} {
		got, err := Diff(c.ours, c.ref, DiffOptions{Workers: 2, SegmentLen: 1000})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.FirstFailing != want.FirstFailing || len(got.Boundaries) != len(want.Boundaries) {
			t.Fatalf("%s: first failing %d of %d, want %d of %d", c.name, got.FirstFailing, len(got.Boundaries), want.FirstFailing, len(want.Boundaries))
		}
		for i, b := range got.Boundaries {
			w := want.Boundaries[i]
			if (b.Metrics == nil) != (w.Metrics == nil) || b.Metrics != nil && fmt.Sprintf("%+v", *b.Metrics) != fmt.Sprintf("%+v", *w.Metrics) {
				t.Errorf("%s: %s: %+v, want %+v", c.name, b.Key, b.Metrics, w.Metrics)
			}
		}
		if got.Finding == nil || want.Finding == nil || got.Finding.Diagnosis.Signature != want.Finding.Diagnosis.Signature {
			t.Errorf("%s: finding %+v, want %+v", c.name, got.Finding, want.Finding)
		}
	}
}
