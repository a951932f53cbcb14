package main

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/cuda"
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/metal"
)

// backends lists what --backend accepts.
var backends = []string{"cpu", "cuda", "metal"}

// newBackend returns the backend named by --backend. A GPU backend that
// cannot start here (no driver, no device, wrong platform) is an error
// naming what is missing, never a silent fall back to the CPU.
func newBackend(name string) (exec.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(0), nil
	case "cuda":
		return cuda.Open()
	case "metal":
		return metal.Open()
	}
	return nil, fmt.Errorf("unknown backend %q (available: %s)", name, strings.Join(backends, ", "))
}
