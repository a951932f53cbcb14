package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

const testdata = "../../semantics/testdata"

// zflowGenerate runs `zflow generate args...` in-process.
func zflowGenerate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return zflow(t, append([]string{"generate"}, args...)...)
}

// readOutput reads a trace's named output as f32.
func readOutput(t *testing.T, path, name string) []float32 {
	t.Helper()
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	x, err := tr.Tensor(tr.Manifest.Outputs[name])
	if err != nil {
		t.Fatal(err)
	}
	v, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), v...)
}

func TestGenerateDiT(t *testing.T) {
	for _, c := range []struct {
		dtype string
		tol   float64
	}{{"f32", 1e-5}, {"bf16", 2e-2}} {
		t.Run(c.dtype, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(fixtures, "dit", "dit-"+c.dtype+".npz")
			out, ours := filepath.Join(dir, "out.npz"), filepath.Join(dir, "ours.npz")
			code, stdout, stderr := zflowGenerate(t, "--semantics", filepath.Join(testdata, "dit-"+c.dtype+".json"),
				"--inputs", in, "-o", out, "--trace-out", ours)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "output/latents [1 12 16]") {
				t.Errorf("stdout: %q", stdout)
			}
			got, want := readOutput(t, out, "latents"), readOutput(t, in, "latents")
			rel, err := precision.RelRMS(precision.F32, got, want)
			if err != nil || !(rel <= c.tol) {
				t.Errorf("rel-RMS %g (%v), gate %g", rel, err, c.tol)
			}
			// Our trace is named like the reference's: every block output
			// of every step is there, under the reference's key.
			tr, err := trace.Open(ours)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			for _, key := range []string{"s0/transformer/kw.hidden_states", "s2/transformer.blocks.1/out", "s1/transformer.norm_out/out", "s0/transformer/out.0", "output/latents"} {
				if _, err := tr.Info(key); err != nil {
					t.Errorf("--trace-out lacks %s", key)
				}
			}
			if len(tr.Manifest.Calls) == 0 {
				t.Error("--trace-out has no calls")
			}
		})
	}
}

// TestGenerateWeightsFlag: --weights supplies the parameters, --inputs
// only the request.
func TestGenerateWeightsFlag(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(fixtures, "dit", "dit-f32.npz")
	out := filepath.Join(dir, "out.safetensors")
	code, _, stderr := zflowGenerate(t, "--semantics", filepath.Join(testdata, "dit-f32.json"), "--inputs", in, "--weights", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rel, err := precision.RelRMS(precision.F32, readOutput(t, out, "latents"), readOutput(t, in, "latents"))
	if err != nil || !(rel <= 1e-5) {
		t.Errorf("rel-RMS %g (%v)", rel, err)
	}
}

// TestGenerateExample runs the command's Example as written (from the
// repository root), its /tmp outputs moved to a temporary directory.
func TestGenerateExample(t *testing.T) {
	dir := t.TempDir()
	t.Chdir("../..")
	for _, line := range strings.Split(newGenerateCmd().Example, "\n") {
		args := strings.Fields(strings.ReplaceAll(line, "/tmp/", dir+"/"))
		if len(args) < 2 || args[0] != "zflow" || args[1] != "generate" {
			t.Fatalf("example line %q is not a zflow generate command", line)
		}
		if code, _, stderr := zflowGenerate(t, args[2:]...); code != 0 {
			t.Errorf("%s: exit %d: %s", line, code, stderr)
		}
	}
}

// TestGenerateBadInput: refusals exit 2 with one line naming the problem
// and write nothing.
func TestGenerateBadInput(t *testing.T) {
	dir := t.TempDir()
	dit := filepath.Join(fixtures, "dit", "dit-f32.npz")
	doc := filepath.Join(testdata, "dit-f32.json")
	v2 := filepath.Join(dir, "v2.json")
	b, _ := os.ReadFile(doc)
	os.WriteFile(v2, bytes.Replace(b, []byte(`"version": 1`), []byte(`"version": 9`), 1), 0o644)
	noGate := filepath.Join(dir, "nogate.json")
	os.WriteFile(noGate, bytes.Replace(b, []byte(`"name": "gate_fn"`), []byte(`"name": "gate_fx"`), 1), 0o644)
	nan := filepath.Join(dir, "nan.npz")
	writeNaNCopy(t, dit, nan)
	out := filepath.Join(dir, "out.npz")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no semantics", []string{"--inputs", dit, "-o", out}, "semantics"},
		{"no inputs", []string{"--semantics", doc, "-o", out}, "inputs"},
		{"missing doc", []string{"--semantics", filepath.Join(dir, "nope.json"), "--inputs", dit, "-o", out}, "nope.json"},
		{"version", []string{"--semantics", v2, "--inputs", dit, "-o", out}, "version: 9 is not supported"},
		{"unknown factor", []string{"--semantics", noGate, "--inputs", dit, "-o", out}, "gate_fx"},
		{"wrong model", []string{"--semantics", doc, "--inputs", filepath.Join(fixtures, "toy.npz"), "-o", out}, "no parameter"},
		{"backend", []string{"--semantics", doc, "--inputs", dit, "-o", out, "--backend", "tpu"}, "unknown backend"},
		{"extension", []string{"--semantics", doc, "--inputs", dit, "-o", filepath.Join(dir, "out.txt")}, ".npz or .safetensors"},
		{"overwrite input", []string{"--semantics", doc, "--inputs", dit, "-o", dit}, "overwrite"},
		{"NaN input", []string{"--semantics", doc, "--inputs", nan, "-o", out}, "NaN"},
	} {
		code, _, stderr := zflowGenerate(t, tc.args...)
		if code != exitBadInput {
			t.Errorf("%s: exit %d, want %d (%s)", tc.name, code, exitBadInput, stderr)
		}
		if !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: stderr %q should be one line mentioning %q", tc.name, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: %s was written", tc.name, out)
		}
	}
}

// writeNaNCopy copies a trace with one NaN planted in its first float input.
func writeNaNCopy(t *testing.T, src, dst string) {
	t.Helper()
	tr, err := trace.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	w, err := trace.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	noise := tr.Manifest.Inputs["noise"]
	for _, k := range tr.Keys() {
		x, err := tr.Tensor(k)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), x.Bytes()...)
		if k == noise {
			copy(data, []byte{0, 0, 0xc0, 0x7f}) // f32 NaN
		}
		if err := w.Add(k, x.DType, x.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	m := *tr.Manifest
	if err := w.Close(&m); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateUpdatesAnExistingWorkspace: with a workspace present, a run
// with --trace-out records itself so `zflow diff` needs no paths; without
// one, nothing is created.
func TestGenerateUpdatesAnExistingWorkspace(t *testing.T) {
	doc, _ := filepath.Abs(filepath.Join(testdata, "dit-f32.json"))
	in, _ := filepath.Abs("../../fixtures/dit/dit-f32.npz")
	dir := t.TempDir()
	t.Chdir(dir)
	args := []string{"--semantics", doc, "--inputs", in, "-o", "out.npz", "--trace-out", "ours.npz"}
	if code, _, stderr := zflowGenerate(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(workspaceFile); err == nil {
		t.Fatal("generate created a workspace unasked")
	}
	if code, _, stderr := zflow(t, "workspace", "--ref", in); code != 0 {
		t.Fatalf("workspace: exit %d: %s", code, stderr)
	}
	if code, _, stderr := zflowGenerate(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	w, err := loadWorkspace()
	if err != nil {
		t.Fatal(err)
	}
	if w.Reference != in || w.Semantics != doc || w.Generated != "ours.npz" {
		t.Errorf("workspace %+v", w)
	}
	if code, out, stderr := zflow(t, "diff", "--step", "0", "--format", "json"); code != 0 || !strings.Contains(out, `"boundaries"`) {
		t.Errorf("diff from the workspace: exit %d: %s", code, stderr)
	}
}

// TestOutputsCheckedFirst: issue 12, item 12. A bad output path is bad
// input before any computation, and nothing of the run is left written:
// generate with a bad --trace-out leaves no -o; discover and precision
// refuse a bad -o at once (not after their search); diff and verify a bad
// --report.
func TestOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "latents.npz")
	missing := filepath.Join(dir, "no-such-folder", "x")
	folder := filepath.Join(t.TempDir(), "d.npz")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"generate --trace-out in a missing folder", []string{"generate", "--semantics", ditDoc, "--inputs", ditTrace, "-o", out, "--trace-out", missing + ".npz"}, "--trace-out"},
		{"generate -o a directory", []string{"generate", "--semantics", ditDoc, "--inputs", ditTrace, "-o", folder, "--trace-out", filepath.Join(dir, "t.npz")}, "is a directory"},
		{"discover -o in a missing folder", []string{"discover", "--trace", ditTrace, "-o", missing + ".json"}, "-o " + missing},
		{"precision -o in a missing folder", []string{"precision", "--trace", ditTrace, "--semantics", ditDoc, "-o", missing + ".json"}, "-o " + missing},
		{"diff --report in a missing folder", []string{"diff", ditTrace, ditTrace, "--report", "junit=" + missing + ".xml"}, "--report " + missing},
		{"verify --report in a missing folder", []string{"verify", "--trace", ditTrace, "--semantics", ditDoc, "--report", "junit=" + missing + ".xml"}, "--report " + missing},
	} {
		start := time.Now()
		code, _, stderr := zflow(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.says) {
			t.Errorf("%s: exit %d, stderr %q, want exit 2 saying %q", c.name, code, stderr, c.says)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: %v before refusing: the work ran first", c.name, el)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestDocumentSizesChecked: issue 12, item 13. A document's sizes are
// held against the trace before anything is allocated: 10^4 blocks on
// one block's weights (2.5 GiB and over a minute before), stream tokens
// the source run's inputs do not make, an in_width its weight does not
// have, an input of another rank. Each is refused (exit 2) naming the
// field; the document as discovered runs.
func TestDocumentSizesChecked(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testdata, "dit-f32.json"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(fixtures, "dit", "dit-f32.npz")
	for _, c := range []struct {
		name, want string
		edit       func(s map[string]any)
	}{
		{"as discovered", "", func(map[string]any) {}},
		{"10^4 blocks on one block's weights", "structure.blocks: 10000 blocks", func(s map[string]any) {
			b := s["blocks"].([]any)[0]
			bs := make([]any, 10000)
			for i := range bs {
				bs[i] = b
			}
			s["blocks"] = bs
		}},
		{"tokens", "structure.streams[0].tokens is 10000000", func(s map[string]any) {
			s["streams"].([]any)[0].(map[string]any)["tokens"] = 10000000
		}},
		{"in_width", "structure.embedders[0].in_width is 1000000", func(s map[string]any) {
			s["embedders"].([]any)[0].(map[string]any)["in_width"] = 1000000
		}},
		{"input rank", "structure.inputs[0] (latents", func(s map[string]any) {
			s["inputs"].([]any)[0].(map[string]any)["shape"] = []int{12, 16}
		}},
	} {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		c.edit(doc["structure"].(map[string]any))
		dir := t.TempDir()
		sem := filepath.Join(dir, "sem.json")
		b, _ := json.Marshal(doc)
		if err := os.WriteFile(sem, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out.npz")
		code, _, stderr := zflowGenerate(t, "--semantics", sem, "--inputs", inputs, "-o", out)
		if c.want == "" {
			if code != 0 {
				t.Errorf("%s: exit %d: %s", c.name, code, stderr)
			}
			continue
		}
		if code != exitBadInput || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want 2 naming %q: %s", c.name, code, c.want, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: -o written: %v", c.name, err)
		}
	}
}

// TestGenerateTimings: --timings writes one wall time per model call and a
// line per step on stderr; it may not name another argument's file.
func TestGenerateTimings(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(fixtures, "dit", "dit-f32.npz")
	out, tj := filepath.Join(dir, "out.npz"), filepath.Join(dir, "t.json")
	doc := filepath.Join(testdata, "dit-f32.json")
	code, _, stderr := zflowGenerate(t, "--semantics", doc, "--inputs", in, "-o", out, "--timings", tj)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(tj)
	if err != nil {
		t.Fatal(err)
	}
	var d timingsDoc
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Format != "zflow-timings" || d.Version != 1 || d.Backend != "cpu" || len(d.Steps) != 3 {
		t.Fatalf("timings %+v", d)
	}
	sum := 0.0
	for i, s := range d.Steps {
		if s.Step != i || !(s.MS >= 0) {
			t.Errorf("step %d: %+v", i, s)
		}
		sum += s.MS
	}
	if d.TotalMS < sum-1e-6 || d.TotalMS > sum+1e-6 {
		t.Errorf("total_ms %g, steps sum to %g", d.TotalMS, sum)
	}
	if !strings.Contains(stderr, "generate: step 2 of 3: ") {
		t.Errorf("stderr: %q", stderr)
	}
	code, _, stderr = zflowGenerate(t, "--semantics", doc, "--inputs", in, "-o", filepath.Join(dir, "b.npz"), "--timings", in)
	if code != 2 || !strings.Contains(stderr, "--timings") {
		t.Errorf("--timings naming the inputs: exit %d: %s", code, stderr)
	}
	code, _, stderr = zflowGenerate(t, "--semantics", doc, "--inputs", in, "-o", filepath.Join(dir, "c.npz"), "--timings-ops")
	if code != 2 || !strings.Contains(stderr, "needs --timings") {
		t.Errorf("--timings-ops alone: exit %d: %s", code, stderr)
	}
}

// TestGenerateTimingOps: --timings-ops counts every node run once (a
// step-invariant node runs at the first step only), under its op, most
// time first.
func TestGenerateTimingOps(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(fixtures, "dit", "dit-f32.npz")
	tj := filepath.Join(dir, "t.json")
	sem := filepath.Join(testdata, "dit-f32.json")
	code, _, stderr := zflowGenerate(t, "--semantics", sem, "--inputs", in, "-o", filepath.Join(dir, "out.npz"), "--timings", tj, "--timings-ops")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(tj)
	if err != nil {
		t.Fatal(err)
	}
	var d timingsDoc
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	doc, err := semantics.Read(sem)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r, err := program.NewRunner(cpu.New(1), doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	calls := 0
	for i, o := range d.Ops {
		calls += o.Count
		if o.Count <= 0 || !(o.MS >= 0) || i > 0 && o.MS > d.Ops[i-1].MS {
			t.Errorf("op %d: %+v (after %+v)", i, o, d.Ops[max(i-1, 0)])
		}
	}
	want := 0 // the node runs of the same run, counted here
	r.It.Hooks.Run = func(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
		want++
		return program.RunNode(r.B, n, in)
	}
	out, err := r.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	r.B.Free(out)
	if calls != want || want < len(r.P.Nodes) {
		t.Errorf("%d node runs counted, want %d (%d nodes, %d steps)", calls, want, len(r.P.Nodes), len(d.Steps))
	}
	if !strings.Contains(stderr, "generate: op linear") {
		t.Errorf("stderr: %q", stderr)
	}
}

// syncCounter is a backend that queues its work (as cuda does): the step
// timer must wait for it at every step's end and once before the first.
type syncCounter struct {
	exec.Backend
	syncs int
}

func (s *syncCounter) Sync() error { s.syncs++; return nil }

func TestStepTimerSynchronises(t *testing.T) {
	b := &syncCounter{Backend: cpu.New(1)}
	tm, err := newStepTimer(b)
	if err != nil {
		t.Fatal(err)
	}
	var calls []int
	cb := tm.wrap(func(done, total int) { calls = append(calls, done) }, io.Discard)
	for i := 1; i <= 3; i++ {
		cb(i, 3)
	}
	if b.syncs != 4 || len(tm.steps) != 3 || len(calls) != 3 || tm.err != nil {
		t.Errorf("%d syncs, %d steps, %d progress calls, err %v; want 4, 3, 3, nil", b.syncs, len(tm.steps), len(calls), tm.err)
	}
	path := filepath.Join(t.TempDir(), "t.json")
	if err := tm.write(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d timingsDoc
	if err := json.Unmarshal(data, &d); err != nil || !d.Synchronized || len(d.Steps) != 3 {
		t.Errorf("%s: %+v, %v", path, d, err)
	}
}
