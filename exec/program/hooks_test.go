package program_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

func TestRelayout(t *testing.T) {
	// Heads first [1, H=2, S=3, D=2] → our [1, S, H·D].
	ref := []float32{
		0, 1, 2, 3, 4, 5, // head 0: rows 0..2
		10, 11, 12, 13, 14, 15, // head 1
	}
	got, ok := program.Relayout(ref, []int{1, 2, 3, 2}, []int{1, 3, 4})
	want := []float32{0, 1, 10, 11, 2, 3, 12, 13, 4, 5, 14, 15}
	if !ok || !slices.Equal(got, want) {
		t.Errorf("heads first: %v %v, want %v", got, ok, want)
	}
	if got, ok := program.Relayout(ref, []int{1, 3, 4}, []int{3, 4}); !ok || !slices.Equal(got, ref) {
		t.Errorf("same layout: %v %v", got, ok)
	}
	if _, ok := program.Relayout(ref, []int{2, 6}, []int{3, 4}); ok {
		t.Error("[2 6] read as [3 4]")
	}
}

// TestSetPrecision: a runner rebuilt under another plan runs like one
// built under it, and back.
func TestSetPrecision(t *testing.T) {
	c := fixtureCases()[1] // dit-bf16
	tr, doc := open(t, c)
	b := cpu.New(1)
	other := doc.Precision
	other.Rules = append([]semantics.PrecisionRule{{Op: "norm", Role: "blocks.*.norm1", Round: "stats"}, {Op: "act", Round: "each"}}, other.Rules...)
	run := func(r *program.Runner) []float32 {
		out, err := r.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free(out)
		v, err := b.Download(out)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	base := run(r)
	d2 := *doc
	d2.Precision = other
	r2, err := program.NewRunner(b, &d2, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	want := run(r2)
	if slices.Equal(base, want) {
		t.Fatal("the two plans give the same result: the test shows nothing")
	}
	if err := r.SetPrecision(other); err != nil {
		t.Fatal(err)
	}
	if got := run(r); !slices.Equal(got, want) {
		t.Error("SetPrecision: result differs from a runner built under the plan")
	}
	if err := r.SetPrecision(doc.Precision); err != nil {
		t.Fatal(err)
	}
	if got := run(r); !slices.Equal(got, base) {
		t.Error("SetPrecision back: result differs")
	}
}

// TestSetPrecisionProgram: a document that carries its program, set to
// another plan, has the nodes a runner built under that plan has, and
// runs like it, and back.
func TestSetPrecisionProgram(t *testing.T) {
	c := fixtureCases()[1] // dit-bf16
	tr, doc := open(t, c)
	b := cpu.New(1)
	p, err := program.Build(doc, shapesOf(t, doc, tr))
	if err != nil {
		t.Fatal(err)
	}
	carried := *doc
	carried.Program = program.ToDoc(p)
	other := doc.Precision
	other.Rules = append([]semantics.PrecisionRule{{Op: "norm", Role: "blocks.*.norm1", Round: "stats"}, {Op: "act", Round: "each"}}, other.Rules...)
	runner := func(d *semantics.Document) *program.Runner {
		r, err := program.NewRunner(b, d, program.TraceParams(tr), program.TraceInputs(tr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	run := func(r *program.Runner) []float32 {
		out, err := r.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free(out)
		v, err := b.Download(out)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	r := runner(&carried)
	base := run(r)
	d2 := carried
	d2.Precision = other
	r2 := runner(&d2)
	want := run(r2)
	if slices.Equal(base, want) {
		t.Fatal("the two plans give the same result: the test shows nothing")
	}
	if err := r.SetPrecision(other); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.P.Nodes, r2.P.Nodes) {
		t.Error("SetPrecision: the nodes differ from those of a runner built under the plan")
	}
	if got := run(r); !slices.Equal(got, want) {
		t.Error("SetPrecision: result differs from a runner built under the plan")
	}
	if err := r.SetPrecision(doc.Precision); err != nil {
		t.Fatal(err)
	}
	if got := run(r); !slices.Equal(got, base) {
		t.Error("SetPrecision back: result differs")
	}
	bad := other
	bad.Rules = append([]semantics.PrecisionRule{{Op: "act", Out: "no format"}}, bad.Rules...)
	if err := r.SetPrecision(bad); err == nil {
		t.Error("SetPrecision: a rule whose format does not parse was taken")
	}
}

// TestOverrideOutputs: with OverrideOutputs every tapped output is offered
// to Override after Observe, and what it returns is what later nodes read.
func TestOverrideOutputs(t *testing.T) {
	c := fixtureCases()[0] // dit-f32
	tr, doc := open(t, c)
	b := cpu.New(1)
	r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var observed, offered int
	force := &program.Force{B: b, Ref: tr}
	r.It.Hooks = program.Hooks{
		Observe: func(step int, tp program.Tap, _ exec.Tensor) error {
			if !tp.In {
				observed++
			}
			return nil
		},
		Override: func(step int, tp program.Tap, like exec.Tensor) (exec.Tensor, bool, error) {
			if !tp.In {
				offered++
			}
			return force.Override(step, tp, like)
		},
		OverrideOutputs: true,
	}
	out, err := r.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Free(out)
	if offered == 0 || offered != observed {
		t.Errorf("%d output taps observed, %d offered to Override", observed, offered)
	}
	if force.Forced < offered { // every output tap of dit-f32 is in the trace
		t.Errorf("%d forced of %d offered", force.Forced, offered)
	}
}
