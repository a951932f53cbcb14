// Command zflow is the workbench CLI: it inspects traces captured from a
// reference model and (as the project grows) discovers, verifies and
// generates with the semantics found in them.
//
// Exit codes: 0 success, 1 a gate or check failed, 2 bad input or usage,
// 3 an internal error (a bug: please report it).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes, documented in the README.
const (
	exitOK       = 0
	exitFailed   = 1 // a gate or check failed
	exitBadInput = 2 // malformed input, unknown flag, missing file
	exitInternal = 3 // a panic: a bug, never the input's fault
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the user's input's fault (exit code 2).
func badInput(err error) error { return &exitError{code: exitBadInput, err: err} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI and returns the exit code; tests call it directly.
// A panic anywhere is an internal error: one line, exit 3, never the code
// for bad input.
func run(args []string, stdout, stderr io.Writer) int {
	return execute(newRootCmd(), args, stdout, stderr)
}

// execute runs root on args and returns the exit code.
func execute(root *cobra.Command, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "zflow: internal error: %s (please report)\n", strings.Join(strings.Fields(fmt.Sprint(r)), " "))
			code = exitInternal
		}
	}()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "zflow:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// cobra's own errors are usage errors: unknown flags, wrong arg counts.
	return exitBadInput
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "zflow",
		Short: "Port neural networks from a Python reference, checked against its captured tensors",
		Long: `zflow reads a trace captured from one reference run (trace format v1: an
.npz or .safetensors file of tensors plus a JSON manifest of the call tree,
docs/trace-format.md) and answers questions about it. A port's trace for
zflow diff needs no manifest: its tensor names are its keys.

Exit codes: 0 success, 1 a gate or check failed, 2 bad input or usage,
3 an internal error (please report it).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.AddCommand(newInspectCmd())
	root.AddCommand(newGenerateCmd())
	root.AddCommand(newDiscoverCmd())
	root.AddCommand(newDiffCmd())
	root.AddCommand(newStatsCmd())
	root.AddCommand(newWorkspaceCmd())
	root.AddCommand(newVerifyCmd())
	root.AddCommand(newPrecisionCmd())
	return root
}
