package trace_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestImportFromAnotherModule: a port's own module imports the trace
// package by the module path, its requirement pointed at this checkout
// (what the README tells a Go port to do until the path is published),
// and builds offline.
func TestImportFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a second module")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no go command beside the toolchain: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/port\n\ngo 1.26\n\nrequire github.com/zflow/zflow v0.0.0\n\nreplace github.com/zflow/zflow => " + root + "\n"
	main := `package main

import (
	"fmt"

	"github.com/zflow/zflow/trace"
)

func main() {
	w, err := trace.Create("ours.safetensors")
	if err != nil {
		panic(err)
	}
	w.Abort()
	fmt.Println(trace.Float32)
}
`
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"go.mod": []byte(mod), "main.go": []byte(main), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "port"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of a module importing github.com/zflow/zflow/trace: %v\n%s", err, out)
	}
}
