package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// TestDiscoverDiT: the table names each factor with its value, margin and
// whether it is decisive; the document is written and reads back; --json
// prints the same document; --check reports generation from it.
func TestDiscoverDiT(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "dit.json")
	dit := filepath.Join(fixtures, "dit", "dit-f32.npz")
	code, stdout, stderr := zflow(t, "discover", "--trace", dit, "-o", out, "--check")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"joint sequence order:", "text rows first", "modulation chunk order:", "shift, scale, gate",
		"gate function:", "x + gate·y", "Euler sign:", "×", "decisive", "wrote " + out} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"discover: blocks", "evaluations", "check: generate with", "rel-RMS"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	doc, err := semantics.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Source.Trace != dit || len(doc.Factors) < 20 {
		t.Errorf("source %q, %d factors", doc.Source.Trace, len(doc.Factors))
	}
	code, stdout, stderr = zflow(t, "discover", "--trace", dit, "-o", filepath.Join(dir, "again.json"), "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var printed semantics.Document
	if err := json.Unmarshal([]byte(stdout), &printed); err != nil {
		t.Fatalf("--json does not print a document: %v", err)
	}
	if len(printed.Factors) != len(doc.Factors) || printed.Format != semantics.FormatName {
		t.Errorf("--json printed %d factors (%q), the file has %d", len(printed.Factors), printed.Format, len(doc.Factors))
	}
}

// TestDiscoverExample runs the command's Example as written (from the
// repository root), its /tmp outputs moved to a temporary directory.
func TestDiscoverExample(t *testing.T) {
	dir := t.TempDir()
	t.Chdir("../..")
	for _, line := range strings.Split(newDiscoverCmd().Example, "\n") {
		args := strings.Fields(strings.ReplaceAll(line, "/tmp/", dir+"/"))
		if len(args) < 2 || args[0] != "zflow" || args[1] != "discover" {
			t.Fatalf("example line %q is not a zflow discover command", line)
		}
		if code, _, stderr := zflow(t, args[1:]...); code != 0 {
			t.Errorf("%s: exit %d: %s", line, code, stderr)
		}
	}
}

// TestDiscoverBadInput: refusals exit 2 with one line naming the problem
// and write nothing.
func TestDiscoverBadInput(t *testing.T) {
	dir := t.TempDir()
	dit := filepath.Join(fixtures, "dit", "dit-f32.npz")
	truncated := filepath.Join(dir, "truncated.npz")
	b, err := os.ReadFile(dit)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(truncated, b[:len(b)/2], 0o644)
	empty := filepath.Join(dir, "empty.npz") // a valid trace of no call: nothing to discover
	w, err := trace.Create(empty)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add("input/x", trace.Float32, []int{2}, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(&trace.Manifest{Inputs: map[string]string{"x": "input/x"}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no trace flag", []string{"-o", out}, "trace"},
		{"missing trace", []string{"--trace", filepath.Join(dir, "nope.npz"), "-o", out}, "nope.npz"},
		{"truncated", []string{"--trace", truncated, "-o", out}, "truncated.npz"},
		{"budget", []string{"--trace", dit, "-o", out, "--program-budget", "0s"}, "--program-budget 0s"},
		{"engine", []string{"--trace", dit, "-o", out, "--engine", "magic"}, "--engine"},
		{"nothing to discover", []string{"--trace", empty, "-o", out}, "empty.npz: no root call with parameters: nothing to discover"},
		{"backend", []string{"--trace", dit, "-o", out, "--backend", "tpu"}, "unknown backend"},
		{"overwrite", []string{"--trace", dit, "-o", dit}, "overwrite"},
		{"unwritable", []string{"--trace", dit, "-o", filepath.Join(dir, "no", "such", "dir", "x.json")}, "x.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := zflow(t, append([]string{"discover"}, tc.args...)...)
			if code != exitBadInput {
				t.Errorf("exit %d, want %d: %s", code, exitBadInput, stderr)
			}
			var errs []string
			for _, l := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(l, "zflow: ") {
					errs = append(errs, l)
				}
			}
			if len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
				t.Errorf("stderr %q does not say in one line %q", stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}

// TestDiscoverProgramEngine: a model no recipe fits (the toy fixture: an
// embedding added to the latents, a norm → linear → SiLU residual block)
// is read by the program search, and the written version 2 document
// reproduces the trace's output from the request.
func TestDiscoverProgramEngine(t *testing.T) {
	out := filepath.Join(t.TempDir(), "toy.json")
	code, _, stderr := zflow(t, "discover", "--trace", filepath.Join(fixtures, "toy.npz"), "--check", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	doc, err := semantics.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Version != semantics.ProgramVersion || doc.Program == nil || len(doc.Program.FromTrace()) != 0 {
		t.Fatalf("version %d, program %v", doc.Version, doc.Program != nil)
	}
	m := regexp.MustCompile(`to rel-RMS ([0-9.eE+-]+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no check line in %q", stderr)
	}
	if rel, _ := strconv.ParseFloat(m[1], 64); rel > 1e-5 {
		t.Errorf("rel-RMS %v > 1e-5", rel)
	}
}

// TestDiscoverPartial: a model outside what the recipes read (the toy
// fixtures: a block without an attention; the program engine reads it,
// TestDiscoverProgramEngine) gets a valid partial document,
// exit 0: every part it could read, the others named in undetermined, the
// status incomplete, and the status line saying why it was not checked.
// generate refuses it; with --allow-incomplete the builder refuses it too,
// naming the part.
func TestDiscoverPartial(t *testing.T) {
	for _, name := range []string{"toy.npz", "toy-bf16.npz", "toy.safetensors"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "doc.json")
			src := filepath.Join(fixtures, name)
			code, stdout, stderr := zflow(t, "discover", "--trace", src, "--engine", "recipes", "-o", out, "--check")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			doc, err := semantics.Read(out)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(out); !strings.Contains(string(b), `"factors": [`) {
				t.Error("a partial document's factors are not a JSON array")
			}
			holes := map[string]bool{}
			for _, h := range doc.Holes() {
				holes[h.Address] = true
			}
			if !doc.Incomplete() || !holes["blocks"] || len(doc.Structure.Embedders) != 1 || doc.Check == nil || doc.Check.NotRun == "" {
				t.Errorf("status %q, holes %v, %d embedders, check %+v", doc.Status, holes, len(doc.Structure.Embedders), doc.Check)
			}
			if !strings.Contains(stdout, "\nincomplete: not checked: ") || !strings.Contains(stderr, "check: not run: ") {
				t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			for _, args := range [][]string{{}, {"--allow-incomplete"}} {
				code, _, stderr := zflowGenerate(t, append([]string{"--semantics", out, "--inputs", src, "-o", filepath.Join(dir, "x.npz")}, args...)...)
				if code != exitBadInput || !strings.Contains(stderr, "incomplete") || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
					t.Errorf("generate %v: exit %d: %s", args, code, stderr)
				}
			}
		})
	}
}

// TestDiscoverProgramBudget: the program search stops at its budget;
// alone it fails (exit 1, saying so), under auto the recipes' document is
// written instead.
func TestDiscoverProgramBudget(t *testing.T) {
	out := filepath.Join(t.TempDir(), "toy.json")
	toy := filepath.Join(fixtures, "toy.npz")
	code, _, stderr := zflow(t, "discover", "--trace", toy, "--engine", "program", "--program-budget", "1ns", "-o", out)
	if code != exitFailed || !strings.Contains(stderr, "out of time") {
		t.Errorf("program engine: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written", out)
	}
	code, _, stderr = zflow(t, "discover", "--trace", toy, "--program-budget", "1ns", "-o", out)
	if code != 0 || !strings.Contains(stderr, "out of time") {
		t.Errorf("auto: exit %d: %s", code, stderr)
	}
	if doc, err := semantics.Read(out); err != nil || doc.Program != nil {
		t.Errorf("auto wrote %v (program %v)", err, doc != nil && doc.Program != nil)
	}
}

// TestDiscoverSearchLog: ZFLOW_SEARCH_LOG prints one line per boundary the
// program search explains, saying how, how long it took and how many
// candidate nodes it ran; without it, none.
func TestDiscoverSearchLog(t *testing.T) {
	toy := filepath.Join(fixtures, "toy.npz")
	out := filepath.Join(t.TempDir(), "toy.json")
	_, _, quiet := zflow(t, "discover", "--trace", toy, "--engine", "program", "-o", out)
	if strings.Contains(quiet, "search: explain") {
		t.Errorf("a search log without ZFLOW_SEARCH_LOG:\n%s", quiet)
	}
	t.Setenv("ZFLOW_SEARCH_LOG", "1")
	code, _, stderr := zflow(t, "discover", "--trace", toy, "--engine", "program", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "search: explain ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), " explained by linear") {
		t.Fatalf("no search log lines naming how a boundary was explained:\n%s", stderr)
	}
	timed := regexp.MustCompile(` in [0-9]+\.[0-9]+s \([0-9]+ evaluations\)$`)
	for _, l := range lines {
		if !timed.MatchString(l) {
			t.Errorf("a log line without its time and evaluations: %q", l)
		}
	}
}

// TestDiscoverPrecisionBudget: a rounding-plan search out of time writes
// the best plan found by then, status "partial", says so, and the
// document still checks; a budget that is no duration is refused.
func TestDiscoverPrecisionBudget(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dit.json")
	code, _, stderr := zflow(t, "discover", "--trace", ditTrace, "--precision", "--precision-budget", "1ns", "-o", out)
	if code != 0 || !strings.Contains(stderr, "precision: out of time after 1ns (--precision-budget)") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	doc, err := semantics.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Precision.Status != "partial" {
		t.Errorf("precision status %q, want partial", doc.Precision.Status)
	}
	for _, r := range doc.Precision.Rules {
		if r.Evidence != nil && r.Evidence.Decisive && len(r.Evidence.Candidates) < 2 {
			t.Errorf("rule %s %s decisive on %d candidates", r.Op, r.Role, len(r.Evidence.Candidates))
		}
	}
	code, _, stderr = zflow(t, "discover", "--trace", ditTrace, "--precision", "--precision-budget", "0s", "-o", out)
	if code != exitBadInput || !strings.Contains(stderr, "--precision-budget 0s: want a duration > 0") {
		t.Errorf("budget 0: exit %d: %s", code, stderr)
	}
}
