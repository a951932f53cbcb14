package program_test

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// TestEulerStepSizeInFormat: under round=scale on "sampler.scale" the
// Euler update multiplies by the step size rounded to the multiply's
// format (a Python scalar that PyTorch ≤ 1.13's CPU casts to the bf16
// tensor's dtype), otherwise by the f32 step size: at σ 0.75 → 0.4 the two
// differ (−0.35 is not a bf16 number), and each update is the hand-made
// x + round(dt·v) with its dt.
func TestEulerStepSizeInFormat(t *testing.T) {
	c := fixtureCases()[1] // bf16: σ 1, 0.75, 0.4, 0
	tr, doc := open(t, c)
	const step = 1
	for _, rounded := range []bool{false, true} {
		d := *doc
		d.Precision.Rules = nil
		for _, r := range doc.Precision.Rules {
			if r.Role != "sampler.scale" {
				d.Precision.Rules = append(d.Precision.Rules, r)
			}
		}
		rule := semantics.PrecisionRule{Op: "mul", Role: "sampler.scale"}
		if rounded {
			rule.Round = "scale"
		}
		d.Precision.Rules = append(d.Precision.Rules, rule)
		b := cpu.New(0)
		r, err := program.NewRunner(b, &d, program.TraceParams(tr), program.TraceInputs(tr))
		if err != nil {
			t.Fatal(err)
		}
		x := r.Latents()
		n := exec.Numel(x.Shape())
		vd := make([]float32, n)
		for i := range vd {
			vd[i] = float32(i%7) - 2.75
		}
		v, err := b.Upload(vd, x.Shape(), precision.BF16)
		if err != nil {
			t.Fatal(err)
		}
		next, err := r.Update(step, x, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Download(next)
		if err != nil {
			t.Fatal(err)
		}
		xd, err := b.Download(x)
		if err != nil {
			t.Fatal(err)
		}
		dt := float32(0.4) - float32(0.75)
		if rounded {
			dt = precision.BF16.Round(dt)
		}
		if precision.BF16.Round(float32(0.4)-float32(0.75)) == float32(0.4)-float32(0.75) {
			t.Fatal("the step size is a bf16 number: the case shows nothing")
		}
		off := 0
		for i := range got {
			want := precision.BF16.Round(xd[i] + precision.BF16.Round(dt*vd[i]))
			if got[i] != want {
				off++
			}
		}
		if off > 0 {
			t.Errorf("round=scale %v: %d of %d updated values differ from x + round(dt·v), dt %g", rounded, off, n, dt)
		}
		b.Free(next)
		b.Free(v)
		r.Close()
	}
}
