package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReportSpec(t *testing.T) {
	dir := t.TempDir()
	known := func(f string) bool { _, ok := diffFormats[f]; return ok }
	for _, c := range []struct {
		spec    string
		want    reportSpec
		wantErr string
	}{
		{"junit=" + dir + "/r.xml", reportSpec{"junit", dir + "/r.xml", false}, ""},
		{"markdown=" + dir + "/s.md", reportSpec{"markdown", dir + "/s.md", false}, ""},
		{"markdown+=" + dir + "/s.md", reportSpec{"markdown", dir + "/s.md", true}, ""},
		{"table+=" + dir + "/s.txt", reportSpec{"table", dir + "/s.txt", true}, ""},
		{"junit+=" + dir + "/r.xml", reportSpec{}, "only markdown and table append"},
		{"json+=" + dir + "/r.json", reportSpec{}, "only markdown and table append"},
		{"yaml=" + dir + "/r.yaml", reportSpec{}, "FORMAT one of"},
		{"markdown", reportSpec{}, "want FORMAT=PATH"},
		{"markdown+=", reportSpec{}, "want FORMAT=PATH"},
		{"markdown+=" + dir + "/missing/s.md", reportSpec{}, "--report " + dir + "/missing/s.md"},
	} {
		got, err := parseReportSpec(c.spec, known, formatNames())
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want %q", c.spec, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v %v, want %+v", c.spec, got, err, c.want)
		}
	}
}

// TestReportAppend: markdown+= appends each run's summary (as CI jobs do
// with $GITHUB_STEP_SUMMARY), markdown= replaces the file.
func TestReportAppend(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "summary.md")
	if err := os.WriteFile(summary, []byte("# CI\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		args    []string
		code    int
		headers int // "## zflow diff" sections in the file after the run
		ci      bool
	}{
		{[]string{faultClean, faultRef, "--report", "markdown+=" + summary}, 0, 1, true},
		{[]string{faultAct, faultRef, "--report", "markdown+=" + summary}, 1, 2, true},
		{[]string{faultClean, faultRef, "--report", "markdown=" + summary}, 0, 1, false},
		{[]string{faultClean, faultRef, "--report", "junit+=" + summary}, 2, 1, false},
	} {
		code, _, stderr := zflow(t, append([]string{"diff"}, c.args...)...)
		if code != c.code {
			t.Fatalf("run %d: exit %d, want %d: %s", i, code, c.code, stderr)
		}
		b, err := os.ReadFile(summary)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if n := strings.Count(s, "## zflow diff: "); n != c.headers || strings.HasPrefix(s, "# CI\n") != c.ci {
			t.Errorf("run %d: %d sections, kept the file's start %v, want %d %v:\n%s", i, n, strings.HasPrefix(s, "# CI\n"), c.headers, c.ci, s)
		}
	}
}
