package reports

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// tcall is one call of a synthetic trace: its module, parent index in the
// list (-1 for a root), step (-1 for pre) and ports, each with values.
type tcall struct {
	module string
	parent int
	step   int
	ports  []tport
}

type tport struct {
	name  string
	dt    trace.DType
	shape []int
	vals  []float32
}

// writeTrace writes a trace of the calls, plus inputs and outputs (name →
// values of shape [len]), and returns its path.
func writeTrace(t *testing.T, name string, calls []tcall, inputs, outputs map[string][]float32) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	w, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &trace.Manifest{Producer: map[string]any{"framework": "test"}, Params: map[string]string{},
		Inputs: map[string]string{}, Outputs: map[string]string{}}
	add := func(key string, dt trace.DType, shape []int, vals []float32) {
		var data []byte
		for _, v := range vals {
			switch dt {
			case trace.BFloat16:
				data = binary.LittleEndian.AppendUint16(data, precision.BF16Bits(v))
			case trace.Float16:
				data = binary.LittleEndian.AppendUint16(data, precision.F16Bits(v))
			case trace.Int64:
				data = binary.LittleEndian.AppendUint64(data, uint64(int64(v)))
			case trace.Float64: // plus 2^-40, so that it is not a float32
				data = binary.LittleEndian.AppendUint64(data, math.Float64bits(float64(v)+0x1p-40))
			default:
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			}
		}
		if err := w.Add(key, dt, shape, data); err != nil {
			t.Fatal(err)
		}
	}
	for n, v := range inputs {
		add("input/"+n, trace.Float32, []int{len(v)}, v)
		m.Inputs[n] = "input/" + n
	}
	for n, v := range outputs {
		add("output/"+n, trace.Float32, []int{len(v)}, v)
		m.Outputs[n] = "output/" + n
	}
	ordinals := map[string]int{}
	for i, c := range calls {
		tc := trace.Call{ID: i, Module: c.module, Type: "T"}
		scope := "pre"
		if c.step >= 0 {
			tc.Step = new(c.step)
			scope = "s" + string(rune('0'+c.step))
		}
		if c.parent >= 0 {
			tc.Parent = new(c.parent)
		}
		tc.Ordinal = ordinals[scope+c.module]
		ordinals[scope+c.module]++
		base := scope + "/" + c.module
		if tc.Ordinal > 0 {
			base += "#" + string(rune('0'+tc.Ordinal))
		}
		for _, p := range c.ports {
			key := base + "/" + p.name
			add(key, p.dt, p.shape, p.vals)
			tc.Tensors = append(tc.Tensors, trace.Port{Name: p.name, Key: key})
		}
		m.Calls = append(m.Calls, tc)
	}
	if err := w.Close(m); err != nil {
		t.Fatal(err)
	}
	return path
}

func open(t *testing.T, path string) *trace.Trace {
	t.Helper()
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func f32port(name string, vals ...float32) tport {
	return tport{name: name, dt: trace.Float32, shape: []int{len(vals)}, vals: vals}
}

// nested is a root with two children, the second with a child, over one
// step, plus a pre call.
func nested(extra float32) []tcall {
	return []tcall{
		{"enc", -1, -1, []tport{f32port("arg0", 1), f32port("out", 2)}},
		{"net", -1, 0, []tport{f32port("arg0", 3), f32port("out", 4+extra)}},
		{"net.a", 1, 0, []tport{f32port("arg0", 5), f32port("out", 6)}},
		{"net.b", 1, 0, []tport{f32port("kw.x", 7), f32port("out.0", 8+extra), f32port("out.1", 9)}},
		{"net.b.c", 3, 0, []tport{f32port("arg0", 10), f32port("out", 11+extra)}},
	}
}

func keys(bs []Boundary) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Key)
	}
	return out
}

func TestBoundariesExecutionOrder(t *testing.T) {
	tr := open(t, writeTrace(t, "t.npz", nested(0), map[string][]float32{"x": {1}, "a": {2}}, map[string][]float32{"y": {3}}))
	step := 0
	for _, c := range []struct {
		sel  Selection
		want []string
	}{
		{Selection{}, []string{"input/a", "input/x", "pre/enc/arg0", "pre/enc/out",
			"s0/net/arg0", "s0/net.a/arg0", "s0/net.a/out", "s0/net.b/kw.x", "s0/net.b.c/arg0", "s0/net.b.c/out",
			"s0/net.b/out.0", "s0/net.b/out.1", "s0/net/out", "output/y"}},
		{Selection{Step: &step}, []string{"s0/net/arg0", "s0/net.a/arg0", "s0/net.a/out", "s0/net.b/kw.x",
			"s0/net.b.c/arg0", "s0/net.b.c/out", "s0/net.b/out.0", "s0/net.b/out.1", "s0/net/out"}},
		{Selection{Module: "net.b*"}, []string{"s0/net.b/kw.x", "s0/net.b.c/arg0", "s0/net.b.c/out", "s0/net.b/out.0", "s0/net.b/out.1"}},
		{Selection{Port: "out*"}, []string{"pre/enc/out", "s0/net.a/out", "s0/net.b.c/out", "s0/net.b/out.0", "s0/net.b/out.1", "s0/net/out"}},
		{Selection{Port: "y"}, []string{"output/y"}},
	} {
		bs, err := Boundaries(tr, c.sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(bs); !slices.Equal(got, c.want) {
			t.Errorf("%+v:\n got %v\nwant %v", c.sel, got, c.want)
		}
	}
	if _, err := Boundaries(tr, Selection{Module: "[x"}); err == nil {
		t.Error("bad glob accepted")
	}
}

func TestPairingListsUnpaired(t *testing.T) {
	ref := nested(0)
	ours := nested(0)[:4]                                                     // no net.b.c
	ours[3].ports = append(ours[3].ports[:2:2], f32port("out.2", 1))          // out.1 renamed out.2
	ours = append(ours, tcall{"net.extra", 1, 0, []tport{f32port("out", 1)}}) // ours only
	r, err := Diff(open(t, writeTrace(t, "ours.npz", ours, nil, nil)), open(t, writeTrace(t, "ref.npz", ref, nil, nil)), DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range r.Unpaired {
		got = append(got, u.Side+":"+u.Key)
	}
	want := []string{"ref:s0/net.b.c/arg0", "ref:s0/net.b.c/out", "ref:s0/net.b/out.1", "ours:s0/net.b/out.2", "ours:s0/net.extra/out"}
	if !slices.Equal(got, want) {
		t.Errorf("unpaired %v, want %v", got, want)
	}
	if len(r.Boundaries) != 8 || !r.Pass() {
		t.Errorf("%d paired, pass %v", len(r.Boundaries), r.Pass())
	}
}

// TestDiffMatchesCompare: every pair's metrics equal Compare on the whole
// tensors (float sums to rounding), through every kernel: bf16 bits, f32
// views, widened f16/int64, and mixed dtypes; segments small enough to
// split tensors, workers from 1 to 3; and the result is the same for any
// worker count.
func TestDiffMatchesCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	near := func(v []float32, eps float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(float64(x) * (1 + eps*rng.NormFloat64()))
		}
		out[len(out)/2] = float32(math.Inf(1))
		return out
	}
	type pair struct {
		name    string
		od, rd  trace.DType
		shape   []int
		o, r    []float32
		fmtWant precision.Format
	}
	a, b, c := vals(3000, 1), vals(2048, 100), vals(600, 3)
	ints := make([]float32, 64)
	for i := range ints {
		ints[i] = float32(i * 3)
	}
	pairs := []pair{
		{"bf16", trace.BFloat16, trace.BFloat16, []int{1, 100, 30}, near(a, 1e-2), a, precision.BF16},
		{"f32", trace.Float32, trace.Float32, []int{2048}, near(b, 1e-6), b, precision.F32},
		{"bf16 ours f32 ref", trace.BFloat16, trace.Float32, []int{30, 20}, near(c, 1e-3), c, precision.F32},
		{"f32 ours bf16 ref", trace.Float32, trace.BFloat16, []int{30, 20}, near(c, 1e-3), c, precision.BF16},
		{"f16", trace.Float16, trace.Float16, []int{20, 30}, near(c, 1e-3), c, precision.F16},
		{"int64", trace.Int64, trace.Int64, []int{64}, ints, ints, precision.F32},
	}
	var oc, rc []tcall
	for _, p := range pairs {
		oc = append(oc, tcall{"m." + p.name, -1, 0, []tport{{"out", p.od, p.shape, p.o}}})
		rc = append(rc, tcall{"m." + p.name, -1, 0, []tport{{"out", p.rd, p.shape, p.r}}})
	}
	ours, ref := open(t, writeTrace(t, "o.npz", oc, nil, nil)), open(t, writeTrace(t, "r.npz", rc, nil, nil))
	var first string
	for workers := 1; workers <= 3; workers++ {
		r, err := Diff(ours, ref, DiffOptions{Workers: workers, SegmentLen: 256, Gates: []Gate{}})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pairs {
			d := r.Boundaries[i]
			ot, _ := ours.Tensor(d.Key)
			rt, _ := ref.Tensor(d.Key)
			ov, _ := ot.Float32()
			rv, _ := rt.Float32()
			want, err := Compare(ov, rv, p.fmtWant, p.shape[len(p.shape)-1])
			if err != nil {
				t.Fatal(err)
			}
			if d.Metrics == nil {
				t.Fatalf("%s: not compared: %s %s", p.name, d.Error, d.Skipped)
			}
			sameMetrics(t, p.name, *d.Metrics, want)
			if p.o[len(p.o)/2] != p.r[len(p.r)/2] && d.NonFiniteMismatch != 1 {
				t.Errorf("%s: nonfinite mismatch %d, want 1", p.name, d.NonFiniteMismatch)
			}
		}
		doc, err := json.Marshal(r.Document(0))
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = string(doc)
		} else if first != string(doc) {
			t.Errorf("%d workers give a different result than 1", workers)
		}
	}
}

func TestDiffShapeMismatchAndSkip(t *testing.T) {
	ref := []tcall{{"m", -1, 0, []tport{
		{"out", trace.Float32, []int{1, 2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"arg0", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"kw.f64", trace.Float64, []int{2}, []float32{1, 2}},
	}}}
	ours := []tcall{{"m", -1, 0, []tport{
		{"out", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}}, // a batch of one dropped: same layout
		{"arg0", trace.Float32, []int{3, 2}, []float32{1, 2, 3, 4, 5, 6}},
		{"kw.f64", trace.Float64, []int{2}, []float32{1, 2}},
	}}}
	r, err := Diff(open(t, writeTrace(t, "o.npz", ours, nil, nil)), open(t, writeTrace(t, "r.npz", ref, nil, nil)), DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]BoundaryDiff{}
	for _, d := range r.Boundaries {
		by[d.Port] = d
	}
	if d := by["arg0"]; d.Pass || d.Error == "" || d.Metrics != nil {
		t.Errorf("[3 2] against [2 3]: pass %v, error %q", d.Pass, d.Error)
	}
	if d := by["out"]; !d.Pass || d.Metrics == nil || d.Metrics.Exact != 6 {
		t.Errorf("[2 3] against [1 2 3]: %+v", d)
	}
	if d := by["kw.f64"]; !d.Pass || d.Skipped == "" {
		t.Errorf("f64: pass %v skipped %q", d.Pass, d.Skipped)
	}
	if r.FirstFailing < 0 || r.Boundaries[r.FirstFailing].Port != "arg0" || r.Finding != nil {
		t.Errorf("first failing %d, finding %v", r.FirstFailing, r.Finding)
	}
}

func TestDiffProgress(t *testing.T) {
	o, r := open(t, writeTrace(t, "o.npz", nested(1), nil, nil)), open(t, writeTrace(t, "r.npz", nested(0), nil, nil))
	for _, workers := range []int{1, 4} {
		var seen []int
		total := -1
		rep, err := Diff(o, r, DiffOptions{Workers: workers, SegmentLen: 1, Progress: func(done, n int) {
			seen = append(seen, done)
			total = n
		}})
		if err != nil {
			t.Fatal(err)
		}
		if total != len(rep.Boundaries) || len(seen) != total || !slices.IsSorted(seen) || seen[len(seen)-1] != total {
			t.Errorf("%d workers: progress %v of %d, want 1..%d", workers, seen, total, len(rep.Boundaries))
		}
	}
}
