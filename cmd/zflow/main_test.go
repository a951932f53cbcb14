package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/internal/workers"
)

// TestPanicIsInternalError: a panic in a command, or in a worker
// goroutine it waits for, exits 3 with one line, never 2 (bad input).
func TestPanicIsInternalError(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func()
	}{
		{"in the command", func() { var m map[string]int; m["x"]++ }},
		{"index", func() { s := []int{1}; i := 3; _ = s[i] }},
		{"in a worker goroutine", func() {
			var g workers.Group
			g.Go(func() { var p *cobra.Command; _ = p.Use })
			g.Wait()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := &cobra.Command{Use: "zflow", SilenceUsage: true, SilenceErrors: true}
			root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error { tc.run(); return nil }})
			var stdout, stderr bytes.Buffer
			code := execute(root, []string{"boom"}, &stdout, &stderr)
			msg := stderr.String()
			if code != exitInternal || !strings.HasPrefix(msg, "zflow: internal error: ") ||
				!strings.HasSuffix(msg, "(please report)\n") || strings.Count(msg, "\n") != 1 {
				t.Errorf("exit %d, stderr %q", code, msg)
			}
		})
	}
}
