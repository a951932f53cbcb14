package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/trace"
)

// zflow runs the CLI in-process and returns its exit code and output.
func zflow(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

const fixtures = "../../fixtures"

func TestInspectJSONCounts(t *testing.T) {
	for _, f := range []string{"toy.npz", "toy-bf16.npz", "toy-deflate.npz", "toy.safetensors"} {
		code, out, stderr := zflow(t, "inspect", "--json", filepath.Join(fixtures, f))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", f, code, stderr)
		}
		var s struct {
			Calls, Tensors, Params, Steps int
			Bytes                         int64
			Tree                          []struct{ Module string }
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// The toy model: 7 calls per step over 2 steps, 4 parameters.
		if s.Calls != 14 || s.Params != 4 || s.Steps != 2 || len(s.Tree) != 14 || s.Tensors != 39 || s.Bytes == 0 {
			t.Errorf("%s: calls=%d params=%d steps=%d tree=%d tensors=%d bytes=%d", f, s.Calls, s.Params, s.Steps, len(s.Tree), s.Tensors, s.Bytes)
		}
	}
}

func TestInspectFilters(t *testing.T) {
	toy := filepath.Join(fixtures, "toy.npz")
	for _, tc := range []struct {
		args []string
		want int // calls shown
	}{
		{[]string{"--step", "0"}, 7},
		{[]string{"--module", "net.block.*"}, 8},
		{[]string{"--module", "net.block.act", "--step", "1"}, 2},
		{[]string{"--depth", "1"}, 2},
		{[]string{"--depth", "2", "--step", "1"}, 3},
	} {
		code, out, stderr := zflow(t, append([]string{"inspect", "--json", toy}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr)
		}
		var s struct{ Tree []json.RawMessage }
		json.Unmarshal([]byte(out), &s)
		if len(s.Tree) != tc.want {
			t.Errorf("%v: %d calls, want %d", tc.args, len(s.Tree), tc.want)
		}
	}
}

func TestInspectTextAndStats(t *testing.T) {
	code, out, _ := zflow(t, "inspect", "--stats", "--step", "0", filepath.Join(fixtures, "toy-bf16.npz"))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"14 calls, 39 tensors, 4 params, 2 steps", "net.block.act#1  (SiLU)", "bfloat16", "mean", "std"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectBadInput: bad files and bad flags give one line on stderr and
// exit code 2.
func TestInspectBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.npz")
	os.WriteFile(empty, nil, 0o644)
	truncated := filepath.Join(dir, "trunc.npz")
	b, _ := os.ReadFile(filepath.Join(fixtures, "toy.npz"))
	os.WriteFile(truncated, b[:len(b)/2], 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{"inspect", filepath.Join(dir, "nope.npz")}, "nope.npz"},
		{"directory", []string{"inspect", dir}, "is a directory"},
		{"empty", []string{"inspect", empty}, "empty file"},
		{"truncated", []string{"inspect", truncated}, "trunc.npz"},
		{"bad glob", []string{"inspect", "--module", "[", filepath.Join(fixtures, "toy.npz")}, "--module"},
		{"no args", []string{"inspect"}, "accepts 1 arg"},
		{"bad flag", []string{"inspect", "--frobnicate", "x"}, "unknown flag"},
	} {
		code, _, stderr := zflow(t, tc.args...)
		if code != exitBadInput {
			t.Errorf("%s: exit %d, want %d", tc.name, code, exitBadInput)
		}
		if !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: stderr %q should be one line mentioning %q", tc.name, stderr, tc.want)
		}
	}
}

// TestWrappedShapeIsBadInput: issue 12, item 6: a shape whose byte size
// wraps past 2^64 is refused by every command that reads the trace, with
// one line and exit 2, never a panic.
func TestWrappedShapeIsBadInput(t *testing.T) {
	mt := loadTrace(t, filepath.Join(fixtures, "faults", "ref.npz"))
	k := mt.keys[0]
	mt.ts[k].shape, mt.ts[k].data = []int{1 << 31, 1 << 31}, nil
	mt.ts[k].dt = trace.Float32
	bad := filepath.Join(t.TempDir(), "wrapped.npz")
	mt.writeRaw(t, bad)
	for _, args := range [][]string{
		{"stats", bad},
		{"inspect", bad, "--stats"},
		{"diff", bad, filepath.Join(fixtures, "faults", "ref.npz")},
	} {
		code, _, stderr := zflow(t, args...)
		if code != 2 || !strings.Contains(stderr, "overflows") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestLeniencies: issue 12, item 14, the command line's part: a negative
// --step and a --jobs outside 1..1024 are bad input; control characters
// in module names are escaped, not sent to the terminal.
func TestLeniencies(t *testing.T) {
	ref := filepath.Join(fixtures, "faults", "ref.npz")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"diff", faultClean, ref, "--step", "-1"}, "--step -1: steps are 0 or more"},
		{[]string{"inspect", ref, "--step", "-1"}, "--step -1"},
		{[]string{"stats", ref, "--step", "-2"}, "--step -2"},
		{[]string{"diff", faultClean, ref, "--jobs", "0"}, "--jobs 0: want 1 to 1024"},
		{[]string{"diff", faultClean, ref, "--jobs", "-3"}, "--jobs -3"},
		{[]string{"stats", ref, "--jobs", "1000000"}, "--jobs 1000000"},
	} {
		code, _, stderr := zflow(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.says) {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 saying %q", c.args, code, stderr, c.says)
		}
	}
	if code, _, stderr := zflow(t, "diff", faultClean, ref, "--jobs", "2"); code != 0 {
		t.Errorf("--jobs 2: exit %d: %s", code, stderr)
	}

	mt := loadTrace(t, ref)
	mt.m.Calls[0].Module = "evil\x1b[31m\nFAKE LINE"
	mt.m.Calls[0].Type = "T\x07"
	p := filepath.Join(t.TempDir(), "ctl.npz")
	mt.writeRaw(t, p)
	code, out, stderr := zflow(t, "inspect", p)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nFAKE LINE") || !strings.Contains(out, `evil\x1b[31m\nFAKE LINE`) {
		t.Errorf("control characters reach the terminal:\n%q", out)
	}
}

// TestMaxDecodedFlag: --max-decoded bounds what a trace's deflated entries
// may decode to (issue 12, item 8).
func TestMaxDecodedFlag(t *testing.T) {
	p := filepath.Join(fixtures, "toy-deflate.npz")
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"inspect", p}, 0},
		{[]string{"inspect", p, "--max-decoded", "1000"}, 2},
		{[]string{"inspect", p, "--max-decoded", "100000000"}, 0},
		{[]string{"inspect", p, "--max-decoded", "-1"}, 2},
		{[]string{"inspect", p}, 0}, // the flag of one run does not outlive it
		{[]string{"stats", p, "--max-decoded", "1000"}, 2},
		{[]string{"diff", p, filepath.Join(fixtures, "toy.npz"), "--max-decoded", "1000"}, 2}, // OURS, opened as a port
		{[]string{"diff", filepath.Join(fixtures, "toy.npz"), p, "--max-decoded", "1000"}, 2}, // REF
		{[]string{"diff", p, p}, 0},
	} {
		if code, _, stderr := zflow(t, c.args...); code != c.want {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.want, stderr)
		}
	}
}

// TestInspectStatsReadsEachTensorOnce: issue 12, item 10. A manifest whose
// calls name one key many times reads that tensor once for --stats, not
// once per port (10^6 reads of one tensor took 41 s).
func TestInspectStatsReadsEachTensorOnce(t *testing.T) {
	mt := loadTrace(t, filepath.Join(fixtures, "faults", "ref.npz"))
	c0 := mt.m.Calls[len(mt.m.Calls)-1]
	shared := c0.Tensors[0].Key
	last := c0.ID
	for _, c := range mt.m.Calls {
		last = max(last, c.ID)
	}
	const extra = 5000
	for i := range extra {
		id := last + 1 + i
		mt.m.Calls = append(mt.m.Calls, trace.Call{ID: id, Step: c0.Step, Module: fmt.Sprintf("copy.%d", i), Tensors: trace.Ports{{Name: "out", Key: shared}}})
	}
	p := filepath.Join(t.TempDir(), "shared.npz")
	mt.writeRaw(t, p)
	reads := map[string]int{}
	defer func(f func(*trace.Tensor) (reports.Summary, error)) { summarizeTensor = f }(summarizeTensor)
	orig := summarizeTensor
	summarizeTensor = func(x *trace.Tensor) (reports.Summary, error) { reads[x.Key]++; return orig(x) }
	code, out, stderr := zflow(t, "inspect", p, "--stats")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(out, "copy."); n != extra {
		t.Errorf("%d of %d copies listed", n, extra)
	}
	for k, n := range reads {
		if n != 1 {
			t.Errorf("%s read %d times", k, n)
		}
	}
	if reads[shared] != 1 {
		t.Errorf("the shared tensor read %d times", reads[shared])
	}
	// The JSON tree is written a call at a time: still one document,
	// every call in it, in order, each port with the shared tensor's stats.
	clear(reads)
	code, out, stderr = zflow(t, "inspect", p, "--stats", "--format", "json")
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var doc inspectSummary
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("json: %v", err)
	}
	if len(doc.Tree) != len(mt.m.Calls) || doc.Tree[len(doc.Tree)-1].Module != fmt.Sprintf("copy.%d", extra-1) {
		t.Fatalf("json: %d calls in the tree, want %d", len(doc.Tree), len(mt.m.Calls))
	}
	if st := doc.Tree[len(doc.Tree)-1].Ports[0].Stats; st == nil || reads[shared] != 1 {
		t.Errorf("json: the last copy's stats %v, the shared tensor read %d times", st, reads[shared])
	}
}

// TestInspectProgress: with --stats, the counter counts the distinct
// tensors read, one by one, up to all those the summary names; without
// --stats nothing is read and nothing counted.
func TestInspectProgress(t *testing.T) {
	tr, err := trace.Open(ditBF16)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, c := range []struct {
		name string
		o    inspectOpts
	}{
		{"whole", inspectOpts{stats: true, step: -1}},
		{"one step, depth 1", inspectOpts{stats: true, step: 1, depth: 1}},
		{"no stats", inspectOpts{step: -1}},
	} {
		var seen []int
		total := -1
		s, err := summarize(tr, c.o, func(done, n int) { seen, total = append(seen, done), n })
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		for _, sec := range [][]tensorSummary{s.Inputs, s.Outputs} {
			for _, ts := range sec {
				keys[ts.Key] = true
			}
		}
		if err := s.eachCall(func(cs callSummary) error {
			for _, ts := range cs.Ports {
				keys[ts.Key] = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !c.o.stats {
			if len(seen) != 0 {
				t.Errorf("%s: counted %v without reading", c.name, seen)
			}
			continue
		}
		if total != len(keys) || len(seen) != len(keys)+1 || seen[len(seen)-1] != total {
			t.Errorf("%s: progress %v of %d, want 0..%d", c.name, seen, total, len(keys))
		}
		for i, d := range seen {
			if d != i {
				t.Errorf("%s: report %d says %d", c.name, i, d)
				break
			}
		}
	}
}
