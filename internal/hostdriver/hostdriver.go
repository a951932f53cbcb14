// Package hostdriver runs a compiled host-rendering driver for tests: the
// kernels' job file in, their outputs back (kernels and cuda test the one
// kernel source this way on a machine without a GPU).
package hostdriver

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Run writes jobs to a file, runs bin on it and an output file, and
// returns what bin wrote; what ran is named by what in a failure.
func Run(t testing.TB, bin, what string, jobs []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "jobs"), filepath.Join(dir, "out")
	if err := os.WriteFile(in, jobs, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(bin, in, out).CombinedOutput(); err != nil {
		t.Fatalf("running %s: %v\n%s", what, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
