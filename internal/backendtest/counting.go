// Package backendtest holds test helpers for code that drives an
// exec.Backend.
package backendtest

import (
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// NewCounting wraps b.
func NewCounting(b exec.Backend) *Counting {
	return &Counting{Backend: b, made: map[exec.Tensor]bool{}}
}

// Counting wraps a backend and counts the tensors it hands out and frees
// (a test of what an interpreter or a search leaves alive).
type Counting struct {
	exec.Backend
	Live, Peak int // tensors handed out and not freed now, and at most
	Made       int // tensors handed out in all
	made       map[exec.Tensor]bool
}

func (c *Counting) track(t exec.Tensor, err error) (exec.Tensor, error) {
	if err == nil {
		c.made[t] = true
		c.Made++
		c.Live++
		c.Peak = max(c.Peak, c.Live)
	}
	return t, err
}

func (c *Counting) Free(t exec.Tensor) {
	if c.made[t] {
		delete(c.made, t)
		c.Live--
	}
	c.Backend.Free(t)
}

func (c *Counting) Upload(d []float32, s []int, f precision.Format) (exec.Tensor, error) {
	return c.track(c.Backend.Upload(d, s, f))
}
func (c *Counting) Cast(x exec.Tensor, f precision.Format) (exec.Tensor, error) {
	return c.track(c.Backend.Cast(x, f))
}
func (c *Counting) Reshape(x exec.Tensor, s []int) (exec.Tensor, error) {
	return c.track(c.Backend.Reshape(x, s))
}
func (c *Counting) Slice(x exec.Tensor, a, s, e int) (exec.Tensor, error) {
	return c.track(c.Backend.Slice(x, a, s, e))
}
func (c *Counting) Concat(xs []exec.Tensor, a int) (exec.Tensor, error) {
	return c.track(c.Backend.Concat(xs, a))
}
func (c *Counting) Add(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Add(a, b, s))
}
func (c *Counting) Mul(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Mul(a, b, s))
}
func (c *Counting) Sub(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Sub(a, b, s))
}
func (c *Counting) Minimum(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Minimum(a, b, s))
}
func (c *Counting) Maximum(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Maximum(a, b, s))
}
func (c *Counting) Div(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Div(a, b, s))
}
func (c *Counting) Permute(x exec.Tensor, perm []int) (exec.Tensor, error) {
	return c.track(c.Backend.Permute(x, perm))
}
func (c *Counting) Act(x exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Act(x, f, s))
}
func (c *Counting) Linear(x, w, b exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Linear(x, w, b, s))
}
func (c *Counting) Norm(x, g, b exec.Tensor, p exec.NormParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Norm(x, g, b, p, s))
}
func (c *Counting) Rope(x, cs, sn exec.Tensor, p exec.RopeParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Rope(x, cs, sn, p, s))
}
func (c *Counting) Attention(q, k, v, m, bias, sinks exec.Tensor, p exec.AttentionParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Attention(q, k, v, m, bias, sinks, p, s))
}
func (c *Counting) Modulate(x, sh, sc exec.Tensor, p exec.ModulateParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.Modulate(x, sh, sc, p, s))
}
func (c *Counting) GatedResidual(x, y, g exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.GatedResidual(x, y, g, f, s))
}
func (c *Counting) GLU(g, v exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.GLU(g, v, f, s))
}
func (c *Counting) TimestepEmbed(t exec.Tensor, p exec.TimestepParams, s exec.Spec) (exec.Tensor, error) {
	return c.track(c.Backend.TimestepEmbed(t, p, s))
}
func (c *Counting) Chunk(x exec.Tensor, n, a int) ([]exec.Tensor, error) {
	ts, err := c.Backend.Chunk(x, n, a)
	for _, t := range ts {
		c.track(t, err)
	}
	return ts, err
}
func (c *Counting) RopeTable(p exec.Tensor, rp exec.RopeTableParams, s exec.Spec) (exec.Tensor, exec.Tensor, error) {
	cs, sn, err := c.Backend.RopeTable(p, rp, s)
	c.track(cs, err)
	c.track(sn, err)
	return cs, sn, err
}
func (c *Counting) Patchify(x exec.Tensor, p exec.PatchParams) (exec.Tensor, error) {
	return c.track(c.Backend.Patchify(x, p))
}
func (c *Counting) Unpatchify(x exec.Tensor, p exec.PatchParams) (exec.Tensor, error) {
	return c.track(c.Backend.Unpatchify(x, p))
}

// RowIndependent passes the wrapped backend's on (an embedded interface
// hides it), so that sampled runs sample.
func (c *Counting) RowIndependent(op string) bool { return exec.RowsIndependent(c.Backend, op) }
