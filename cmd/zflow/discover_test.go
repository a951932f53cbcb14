package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"zflow/semantics"
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
	out := filepath.Join(dir, "out.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no trace flag", []string{"-o", out}, "trace"},
		{"missing trace", []string{"--trace", filepath.Join(dir, "nope.npz"), "-o", out}, "nope.npz"},
		{"truncated", []string{"--trace", truncated, "-o", out}, "truncated.npz"},
		{"no blocks", []string{"--trace", filepath.Join(fixtures, "toy.npz"), "--engine", "recipes", "-o", out}, "toy.npz"},
		{"backend", []string{"--trace", dit, "-o", out, "--backend", "tpu"}, "unknown backend"},
		{"overwrite", []string{"--trace", dit, "-o", dit}, "overwrite"},
		{"unwritable", []string{"--trace", dit, "-o", filepath.Join(dir, "no", "such", "dir", "x.json")}, "x.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := zflow(t, append([]string{"discover"}, tc.args...)...)
			if code != exitBadInput {
				t.Errorf("exit %d, want %d: %s", code, exitBadInput, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not name %q", stderr, tc.want)
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
