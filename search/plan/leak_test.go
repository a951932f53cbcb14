package plan

import (
	"errors"
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

func (c *counting) Patchify(x exec.Tensor, p exec.PatchParams) (exec.Tensor, error) {
	return c.track(c.Backend.Patchify(x, p))
}
func (c *counting) Unpatchify(x exec.Tensor, p exec.PatchParams) (exec.Tensor, error) {
	return c.track(c.Backend.Unpatchify(x, p))
}

// RowIndependent passes the wrapped backend's on (an embedded interface
// hides it), so that sampled runs sample.
func (c *counting) RowIndependent(op string) bool { return exec.RowsIndependent(c.Backend, op) }

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
			b := &counting{Backend: cpu.New(1), made: map[exec.Tensor]bool{}}
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
				if want := base + e.cache.lru.Len(); b.live != want {
					t.Fatalf("plan %d: %d tensors live, want %d (%d the runner's, %d cached)", i, b.live, want, base, e.cache.lru.Len())
				}
			}
			e.Close()
			if runs == 0 || b.live != 0 {
				t.Fatalf("%d runs; %d tensors live after Close", runs, b.live)
			}
			t.Logf("%d runs, peak %d tensors", runs, b.peak)
		})
	}
}
