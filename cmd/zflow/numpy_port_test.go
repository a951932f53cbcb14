package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNumPyPortWithoutTorch runs capture/examples/numpy_port.py, a port
// that computes two linears of the DiT fixture in NumPy with torch made
// unimportable, under the interpreter make test uses ($PYTHON, else
// /usr/bin/python3). Its trace, under the reference's names or its own
// (renamed by fixtures/ports/dit-own-names.map), pairs with the
// reference in the reference's order, bit-exact.
func TestNumPyPortWithoutTorch(t *testing.T) {
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import numpy").CombinedOutput(); err != nil {
		t.Skipf("%s with numpy not available (%v: %s): the NumPy port is not run", py, err, strings.TrimSpace(string(out)))
	}
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	want := []string{"s0/transformer.x_embedder/arg0", "s0/transformer.x_embedder/out",
		"s0/transformer.blocks.0.attn.to_q/arg0", "s0/transformer.blocks.0.attn.to_q/out"}
	dir := t.TempDir()
	for _, c := range []struct {
		name, out string
		args      []string // the example's after REF OUT
		diff      []string // zflow diff's after OURS REF
	}{
		{"reference names", "ours.npz", nil, nil},
		{"own names", "own.safetensors", []string{"--own-names"}, []string{"--map", filepath.Join(fixtures, "ports", "dit-own-names.map")}},
	} {
		out := filepath.Join(dir, c.out)
		cmd := exec.Command(py, append([]string{filepath.Join(repo, "capture", "examples", "numpy_port.py"), filepath.Join(repo, "fixtures", "dit", "dit-bf16.npz"), out}, c.args...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "capture"))
		cmd.Dir = dir // not the repository: nothing there is imported by accident
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, b)
		}
		code, stdout, stderr := zflow(t, append([]string{"diff", out, ditBF16, "--step", "0", "--gate", "exact>=1", "--format", "json"}, c.diff...)...)
		var doc struct {
			Boundaries []struct {
				Key           string
				ExactFraction float64 `json:"exact_fraction"`
			}
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 {
			t.Fatalf("%s: diff exit %d (%v): %s", c.name, code, err, stderr)
		}
		var got []string
		for _, b := range doc.Boundaries {
			got = append(got, b.Key)
			if b.ExactFraction != 1 {
				t.Errorf("%s: %s exact fraction %v, want 1", c.name, b.Key, b.ExactFraction)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: paired %v, want %v", c.name, got, want)
		}
		if !strings.Contains(stderr, "had no call tree") {
			t.Errorf("%s: stderr %q does not say OURS had no call tree", c.name, stderr)
		}
	}
}
