package program_test

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// counting wraps a backend and counts the tensors it hands out and frees.
type counting struct {
	exec.Backend
	live, peak int
	made       map[exec.Tensor]bool
}

func (c *counting) track(t exec.Tensor, err error) (exec.Tensor, error) {
	if err == nil {
		c.made[t] = true
		c.live++
		c.peak = max(c.peak, c.live)
	}
	return t, err
}

func (c *counting) Free(t exec.Tensor) {
	if c.made[t] {
		delete(c.made, t)
		c.live--
	}
	c.Backend.Free(t)
}

func (c *counting) Upload(d []float32, s []int, f precision.Format) (exec.Tensor, error) {
	return c.track(c.Backend.Upload(d, s, f))
}
func (c *counting) Cast(x exec.Tensor, f precision.Format) (exec.Tensor, error) {
	return c.track(c.Backend.Cast(x, f))
}
func (c *counting) Reshape(x exec.Tensor, s []int) (exec.Tensor, error) {
	return c.track(c.Backend.Reshape(x, s))
}
func (c *counting) Slice(x exec.Tensor, a, s, e int) (exec.Tensor, error) {
	return c.track(c.Backend.Slice(x, a, s, e))
}
func (c *counting) Concat(xs []exec.Tensor, a int) (exec.Tensor, error) {
	return c.track(c.Backend.Concat(xs, a))
}
func (c *counting) Add(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Add(a, b, s))
}
func (c *counting) Mul(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Mul(a, b, s))
}
func (c *counting) Sub(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Sub(a, b, s))
}
func (c *counting) Minimum(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Minimum(a, b, s))
}
func (c *counting) Maximum(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Maximum(a, b, s))
}
func (c *counting) Div(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Div(a, b, s))
}
func (c *counting) Permute(x exec.Tensor, perm []int) (exec.Tensor, error) {
	return c.track(c.Backend.Permute(x, perm))
}
func (c *counting) Act(x exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Act(x, f, s))
}
func (c *counting) Linear(x, w, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Linear(x, w, b, s))
}
func (c *counting) Norm(x, g, b exec.Tensor, p exec.NormParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Norm(x, g, b, p, s))
}
func (c *counting) Rope(x, cs, sn exec.Tensor, p exec.RopeParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Rope(x, cs, sn, p, s))
}
func (c *counting) Attention(q, k, v, m, bias exec.Tensor, p exec.AttentionParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Attention(q, k, v, m, bias, p, s))
}
func (c *counting) Modulate(x, sh, sc exec.Tensor, p exec.ModulateParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Modulate(x, sh, sc, p, s))
}
func (c *counting) GatedResidual(x, y, g exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.GatedResidual(x, y, g, f, s))
}
func (c *counting) GLU(g, v exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.GLU(g, v, f, s))
}
func (c *counting) TimestepEmbed(t exec.Tensor, p exec.TimestepParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.TimestepEmbed(t, p, s))
}
func (c *counting) Chunk(x exec.Tensor, n, a int) ([]exec.Tensor, error) {
	ts, err := c.Backend.Chunk(x, n, a)
	for _, t := range ts {
		c.track(t, err)
	}
	return ts, err
}
func (c *counting) RopeTable(p exec.Tensor, rp exec.RopeTableParams, s exec.Spec) (exec.Tensor, exec.Tensor, error) {
	cs, sn, err := c.Backend.RopeTable(p, rp, s)
	c.track(cs, err)
	c.track(sn, err)
	return cs, sn, err
}

// TestInterpreterFreesTemps: after a whole run only the result is live,
// and intermediates were freed along the way (the peak is well below the
// number of values the program makes).
func TestInterpreterFreesTemps(t *testing.T) {
	for _, c := range append(fixtureCases(), f32Conformance()...) {
		tr, doc := open(t, c)
		b := &counting{Backend: cpu.New(0), made: map[exec.Tensor]bool{}}
		r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
		if err != nil {
			t.Fatal(err)
		}
		resident := b.live // weights, inputs, constants, latents
		temps := len(r.P.ValuesOf(program.Temp))
		// Teacher forcing replaces values; those must be freed too.
		force := &program.Force{B: b, Ref: tr, Filter: func(tp program.Tap) bool { return tp.In }}
		r.It.Hooks.Override = force.Override
		out, err := r.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		if b.live != resident+1 {
			t.Errorf("%s: %d tensors live after the run, want %d resident + the result", c.trace, b.live, resident)
		}
		if peak := b.peak - resident; peak > temps/2 {
			t.Errorf("%s: peak of %d intermediates for %d temps: not freed after last use", c.trace, peak, temps)
		}
		t.Logf("%s: %d temps per forward, peak %d live beyond %d resident", c.trace, temps, b.peak-resident, resident)
		b.Free(out)
		r.Close()
		if b.live != 0 {
			t.Errorf("%s: %d tensors live after Close", c.trace, b.live)
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
