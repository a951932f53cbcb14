//go:build unix

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zflow/zflow/internal/tempfiles"
)

// TestSignalRemovesTemps: issue 12, item 12. SIGINT and SIGTERM in the
// middle of a write remove the unfinished ".X.tmp-*" files and exit 130 or
// 143. The test binary runs itself as the interrupted process.
func TestSignalRemovesTemps(t *testing.T) {
	if dir := os.Getenv("ZFLOW_SIGNAL_HELPER"); dir != "" {
		cleanupOnSignal()
		f, err := tempfiles.Create(dir, ".out.npz.tmp-*")
		if err != nil {
			os.Exit(9)
		}
		f.Write(make([]byte, 1<<20))
		os.Stdout.WriteString("ready\n")
		time.Sleep(time.Minute)
		os.Exit(8)
	}
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesTemps$")
		cmd.Env = append(os.Environ(), "ZFLOW_SIGNAL_HELPER="+dir)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			cmd.Process.Kill()
			t.Fatalf("helper said %q", line)
		}
		left, _ := filepath.Glob(filepath.Join(dir, ".out.npz.tmp-*"))
		if len(left) != 1 {
			t.Fatalf("%d temporary files before the signal", len(left))
		}
		cmd.Process.Signal(c.sig)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != c.code {
			t.Errorf("%v: %v, want exit %d", c.sig, err, c.code)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
			t.Errorf("%v: left behind %v", c.sig, left)
		}
	}
}
