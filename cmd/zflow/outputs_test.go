package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotDirCheckedFirst: issue 12, item 12. A --plot folder that cannot
// be made is refused before the comparison, and nothing else of the run
// (a --report) is written; a folder that does not exist yet is made.
func TestPlotDirCheckedFirst(t *testing.T) {
	ours, ref := filepath.Join(fixtures, "faults", "wrong_activation.npz"), filepath.Join(fixtures, "faults", "ref.npz")
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "r.xml")
	for _, plot := range []string{file, filepath.Join(file, "plots")} {
		code, _, stderr := zflow(t, "diff", ours, ref, "--report", "junit="+report, "--plot", plot)
		if code != exitBadInput || !strings.Contains(stderr, "--plot") || strings.Contains(stderr, "boundaries") {
			t.Errorf("--plot %s: exit %d: %s", plot, code, stderr)
		}
		if _, err := os.Stat(report); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--plot %s: the report was written: %v", plot, err)
		}
	}
	plots := filepath.Join(dir, "new", "plots")
	if code, _, stderr := zflow(t, "diff", ours, ref, "--report", "junit="+report, "--plot", plots); code != exitFailed {
		t.Fatalf("a new plot folder: exit %d: %s", code, stderr)
	}
	if ents, err := os.ReadDir(plots); err != nil || len(ents) == 0 {
		t.Errorf("a new plot folder: %v, %d files", err, len(ents))
	}
	if _, err := os.Stat(report); err != nil {
		t.Errorf("the report: %v", err)
	}
}

// TestWriteReportsUndo: a report that cannot be written takes those the
// run wrote before it with it; appends go last.
func TestWriteReportsUndo(t *testing.T) {
	dir := t.TempDir()
	a, b, md := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.xml"), filepath.Join(dir, "s.md")
	files := []reportSpec{{format: "markdown", path: md, append: true}, {format: "json", path: a}, {format: "junit", path: b}}
	var order []string
	fail := errors.New("render failed")
	_, err := writeReports(files, func(format string, w io.Writer) error {
		order = append(order, format)
		if format == "junit" {
			return fail
		}
		_, err := w.Write([]byte(format))
		return err
	})
	if !errors.Is(err, fail) {
		t.Fatalf("err %v", err)
	}
	if strings.Join(order, ",") != "json,junit" {
		t.Errorf("rendered %v: the append was not last", order)
	}
	for _, p := range []string{a, b, md} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
	wrote, err := writeReports(files, func(format string, w io.Writer) error { _, err := w.Write([]byte(format)); return err })
	if err != nil || len(wrote) != 2 {
		t.Fatalf("wrote %v: %v", wrote, err)
	}
	if got, _ := os.ReadFile(md); string(got) != "markdown" {
		t.Errorf("the appended report holds %q", got)
	}
}
