package cpu

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// confDir holds the conformance traces (DESIGN.md); tests skip without it.
const confDir = "../../../shared/conformance"

// conf is one conformance trace under test: the CPU backend fed the
// reference's own tensors (teacher forcing), and the table of results.
type conf struct {
	t    *testing.T
	name string
	tr   *trace.Trace
	bk   *Backend
	act  precision.Format // the activations' storage format
	rows []confRow
}

// confRow is one boundary compared: our op's output against the captured one.
type confRow struct {
	check, boundary string
	n               int
	exact, relRMS   float64
}

func openConf(t *testing.T, name string) *conf {
	t.Helper()
	path := filepath.Join(confDir, name+".npz")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("conformance trace %s not present (needs ../shared): skipping", path)
	}
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { tr.Close() })
	act := precision.F32
	if strings.Contains(name, "bf16") {
		act = precision.BF16
	}
	return &conf{t: t, name: name, tr: tr, bk: New(0), act: act}
}

// calls selects calls by module glob over all steps.
func (c *conf) calls(glob string) []trace.Call {
	c.t.Helper()
	cs, err := c.tr.Tree().Select(trace.Filter{Module: glob})
	if err != nil {
		c.t.Fatalf("select %q: %v", glob, err)
	}
	return cs
}

// child is the call of module path within the same step as parent (the
// first one after it in entry order).
func (c *conf) child(parent trace.Call, module string) (trace.Call, bool) {
	for _, k := range c.calls(module) {
		if sameStep(k, parent) && k.ID > parent.ID {
			return k, true
		}
	}
	return trace.Call{}, false
}

func (c *conf) mustChild(parent trace.Call, module string) trace.Call {
	c.t.Helper()
	k, ok := c.child(parent, module)
	if !ok {
		c.t.Fatalf("%s: no call of %s after call %d", c.name, module, parent.ID)
	}
	return k
}

func sameStep(a, b trace.Call) bool {
	return a.Step == nil && b.Step == nil || a.Step != nil && b.Step != nil && *a.Step == *b.Step
}

// key is a port's key; a missing port fails the test.
func (c *conf) key(call trace.Call, port string) string {
	c.t.Helper()
	k, ok := call.Tensors.Key(port)
	if !ok {
		c.t.Fatalf("%s: call %d (%s) has no port %s", c.name, call.ID, call.Module, port)
	}
	return k
}

// load uploads a stored tensor in its own format (bf16 stays bf16).
func (c *conf) load(key string) *Tensor {
	c.t.Helper()
	tn, err := c.tr.Tensor(key)
	if err != nil {
		c.t.Fatalf("%s: %v", c.name, err)
	}
	v, err := tn.Float32()
	if err != nil {
		c.t.Fatalf("%s: %s: %v", c.name, key, err)
	}
	f := precision.F32
	switch tn.DType {
	case trace.BFloat16:
		f = precision.BF16
	case trace.Float16:
		f = precision.F16
	}
	shape := tn.Shape
	if tn.DType == trace.Complex64 || tn.DType == trace.Complex128 {
		shape = append(append([]int(nil), shape...), 2)
	}
	u, err := c.bk.Upload(v, shape, f)
	if err != nil {
		c.t.Fatalf("%s: %s: %v", c.name, key, err)
	}
	return u.(*Tensor)
}

func (c *conf) port(call trace.Call, port string) *Tensor { return c.load(c.key(call, port)) }

// param is a parameter of the call's module by its last name, or nil.
func (c *conf) param(call trace.Call, last string) exec.Tensor {
	c.t.Helper()
	name := call.Module + "." + last
	for _, p := range call.Params {
		if p == name || strings.HasSuffix(p, "."+last) && strings.HasPrefix(p, call.Module) {
			return c.load("param/" + p)
		}
	}
	if _, ok := c.tr.Manifest.Params[name]; ok {
		return c.load("param/" + name)
	}
	return nil
}

// must unwraps an op result.
func (c *conf) must(t exec.Tensor, err error) *Tensor {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", c.name, err)
	}
	return t.(*Tensor)
}

// compare scores ours against the reference in the reference's format and
// records the row. Shapes must hold the same number of elements.
func (c *conf) compare(check string, call trace.Call, ours, ref *Tensor) confRow {
	c.t.Helper()
	if len(ours.data) != len(ref.data) {
		c.t.Fatalf("%s %s %s: %v elements against %v", c.name, check, call.Module, ours.shape, ref.shape)
	}
	ex, err := precision.ExactFraction(ref.format, ours.data, ref.data)
	if err != nil {
		c.t.Fatal(err)
	}
	rr, err := precision.RelRMS(ref.format, ours.data, ref.data)
	if err != nil {
		c.t.Fatal(err)
	}
	step := "pre"
	if call.Step != nil {
		step = fmt.Sprintf("s%d", *call.Step)
	}
	row := confRow{check: check, boundary: step + " " + call.Module, n: len(ref.data), exact: ex, relRMS: rr}
	c.rows = append(c.rows, row)
	return row
}

// summary logs one line per check (boundaries, elements, worst and pooled
// exact fraction, worst rel-RMS) and returns the pooled figures by check.
func (c *conf) summary() map[string]confRow {
	by := map[string]confRow{}
	worst := map[string]confRow{}
	var names []string
	for _, r := range c.rows {
		a, ok := by[r.check]
		if !ok {
			names = append(names, r.check)
			a.exact = 0
			worst[r.check] = r
		}
		a.check = r.check
		a.exact += r.exact * float64(r.n)
		a.n += r.n
		a.relRMS = math.Max(a.relRMS, r.relRMS)
		by[r.check] = a
		if w := worst[r.check]; r.exact < w.exact {
			worst[r.check] = r
		}
	}
	sort.Strings(names)
	c.t.Logf("%s: op-level conformance (teacher-forced, exact in %v)", c.name, c.act)
	c.t.Logf("  %-22s %5s %8s %10s %10s  %s", "check", "calls", "values", "exact", "max relRMS", "worst boundary")
	for _, n := range names {
		a := by[n]
		a.exact /= float64(max(a.n, 1))
		by[n] = a
		calls := 0
		for _, r := range c.rows {
			if r.check == n {
				calls++
			}
		}
		w := worst[n]
		c.t.Logf("  %-22s %5d %8d %9.5f%% %10.3g  %s (%.4f%%)", n, calls, a.n, 100*a.exact, a.relRMS, w.boundary, 100*w.exact)
	}
	return by
}
