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
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/internal/tempfiles"
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
	cleanupOnSignal()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// cleanupOnSignal makes SIGINT and SIGTERM remove the temporary files the
// run's writers have not renamed into place yet (nothing half-written is
// left behind), write the CPU profile ZFLOW_CPUPROFILE asked for, then
// exit 130 or 143 as a shell would report the signal.
func cleanupOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		pprof.StopCPUProfile() // a long run stopped is what ZFLOW_CPUPROFILE is for: write what it holds
		n := tempfiles.RemoveAll()
		fmt.Fprintf(os.Stderr, "zflow: %v: stopped (%d unfinished files removed)\n", s, n)
		code := 130
		if s == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}

// checkOutputPath refuses, before any work, an output path that cannot be
// written: a directory, a folder that does not exist, or one this process
// cannot create files in.
func checkOutputPath(flag, p string) error {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory", flag, p)
	}
	dir := filepath.Dir(p)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: folder %s: %w", flag, p, dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s %s: %s is not a folder", flag, p, dir)
	}
	f, err := tempfiles.Create(dir, ".zflow-probe-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", flag, p, dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	tempfiles.Done(f.Name())
	return nil
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
			fmt.Fprintf(stderr, "zflow: internal error: %s (please report)%s\n", strings.Join(strings.Fields(fmt.Sprint(r)), " "), traceback())
			code = exitInternal
		}
	}()
	stop, err := startProfile(os.Getenv("ZFLOW_CPUPROFILE"))
	if err != nil {
		fmt.Fprintln(stderr, "zflow:", err)
		return exitBadInput
	}
	defer stop()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err = root.Execute()
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

// maxJobs bounds --jobs: more workers than this only cost memory.
const maxJobs = 1024

// checkCommonFlags refuses what the commands' shared flags cannot mean:
// a negative --step (no step is negative; leave the flag out for every
// step) and a --jobs outside 1..maxJobs (leave it out for one per core).
func checkCommonFlags(cmd *cobra.Command) error {
	f := cmd.Flags()
	if f.Lookup("step") != nil && f.Changed("step") {
		if s, err := f.GetInt("step"); err == nil && s < 0 {
			return badInput(fmt.Errorf("--step %d: steps are 0 or more (leave --step out for every step)", s))
		}
	}
	if f.Lookup("jobs") != nil && f.Changed("jobs") {
		if j, err := f.GetInt("jobs"); err == nil && (j < 1 || j > maxJobs) {
			return badInput(fmt.Errorf("--jobs %d: want 1 to %d (leave --jobs out for one per core)", j, maxJobs))
		}
	}
	return nil
}

func newRootCmd() *cobra.Command {
	var maxDecoded int64
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
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if maxDecoded < 0 {
				return badInput(fmt.Errorf("--max-decoded %d: want a number of bytes (0: the default)", maxDecoded))
			}
			return checkCommonFlags(cmd)
		},
		Version: versionString(),
	}
	root.PersistentFlags().BoolP("quiet", "q", false, "no progress and no notes on stderr (errors and warnings still print; stdout is unchanged)")
	root.PersistentFlags().Int64Var(&maxDecoded, "max-decoded", 0,
		"bytes the deflated entries of one npz trace may decode to, together (0: 64 times the file's size, at least 1 GiB)")
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

// startProfile writes a CPU profile of the whole command to path when
// path is set (ZFLOW_CPUPROFILE, for finding where a long run's time
// goes: go tool pprof zflow FILE); stop ends it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("ZFLOW_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("ZFLOW_CPUPROFILE %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// traceback is the panicking goroutine's stack when ZFLOW_TRACEBACK is
// set (for a bug report), else "".
func traceback() string {
	if os.Getenv("ZFLOW_TRACEBACK") == "" {
		return ""
	}
	return "\n" + string(debug.Stack())
}
