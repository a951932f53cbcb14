package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// TestFormatJSONEverywhere: every command takes --format json, and every
// JSON document it prints carries its version, the zflow_version of the
// tool (the semantics document in source.producer, its schema's place for
// the writer) and, but for inspect, whose "format" is the trace's, the
// document's format name.
func TestFormatJSONEverywhere(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		format string // the document's "format"
	}{
		{"inspect", []string{"inspect", ditTrace}, 0, "npz"},
		{"discover", []string{"discover", "--trace", ditTrace, "-o", filepath.Join(dir, "s.json")}, 0, "zflow-semantics"},
		{"generate", []string{"generate", "--semantics", ditDoc, "--inputs", ditTrace, "-o", filepath.Join(dir, "o.npz")}, 0, "zflow-generate"},
		{"diff", []string{"diff", faultAct, faultRef}, 1, "zflow-diff"},
		{"verify", []string{"verify", "--trace", ditTrace, "--semantics", ditDoc}, 0, "zflow-diff"},
		{"stats", []string{"stats", faultRef, "--port", "out*"}, 0, "zflow-stats"},
		{"precision", []string{"precision", "--trace", ditTrace, "--semantics", ditDoc}, 0, "zflow-precision"},
		{"workspace", []string{"workspace"}, 0, ""},
	} {
		code, out, stderr := zflow(t, append(c.args, "--format", "json")...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.code, stderr)
			continue
		}
		var doc struct {
			Format       string `json:"format"`
			Version      *int   `json:"version"`
			ZflowVersion string `json:"zflow_version"`
			Source       struct {
				Producer map[string]any `json:"producer"`
			} `json:"source"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Version == nil || *doc.Version < 1 || doc.Format != c.format {
			t.Errorf("%s --format json: format %q version %v (%v), want format %q and a version", c.name, doc.Format, doc.Version, err, c.format)
		}
		tool := doc.ZflowVersion
		if c.format == "zflow-semantics" {
			tool, _ = doc.Source.Producer["zflow_version"].(string)
		}
		if tool != versionString() {
			t.Errorf("%s --format json: zflow_version %q, want %q", c.name, tool, versionString())
		}
		// an unknown format is bad input, naming the ones there are
		if code, _, stderr := zflow(t, append(c.args, "--format", "yaml")...); code != 2 || !strings.Contains(stderr, `--format "yaml": want table`) {
			t.Errorf("%s --format yaml: exit %d, %s", c.name, code, stderr)
		}
	}
	// and the files they wrote: the semantics document, the generated
	// trace's manifest
	if d, err := semantics.Read(filepath.Join(dir, "s.json")); err != nil {
		t.Error(err)
	} else if got := d.Source.Producer["zflow_version"]; got != versionString() {
		t.Errorf("discover -o: producer zflow_version %v, want %q", got, versionString())
	}
	tr, err := trace.Open(filepath.Join(dir, "o.npz"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got := tr.Manifest.Producer["zflow_version"]; got != versionString() {
		t.Errorf("generate -o: manifest producer zflow_version %v, want %q", got, versionString())
	}
}

// TestJSONAlias: --json is --format json where it existed before --format.
func TestJSONAlias(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"inspect", []string{"inspect", ditTrace}},
		{"discover", []string{"discover", "--trace", ditTrace, "-o", filepath.Join(dir, "s.json")}},
		{"workspace", []string{"workspace"}},
	} {
		_, viaFormat, _ := zflow(t, append(c.args, "--format", "json")...)
		code, viaAlias, stderr := zflow(t, append(c.args, "--json")...)
		if code != 0 || viaAlias != viaFormat {
			t.Errorf("%s: --json (exit %d, %s) differs from --format json", c.name, code, stderr)
		}
		if code, _, stderr := zflow(t, append(c.args, "--json", "--format", "table")...); code != 2 || !strings.Contains(stderr, "--json is --format json") {
			t.Errorf("%s --json --format table: exit %d, %s", c.name, code, stderr)
		}
	}
}

// TestFlagCompletion: shell completion offers each command's --format
// values, --backend's and --report's FORMAT= prefixes.
func TestFlagCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"diff", "--format", ""}, reportFormats},
		{[]string{"verify", "--format", ""}, reportFormats},
		{[]string{"stats", "x.npz", "--format", ""}, statsFormats},
		{[]string{"inspect", "x.npz", "--format", ""}, tableJSON},
		{[]string{"discover", "--format", ""}, tableJSON},
		{[]string{"generate", "--format", ""}, tableJSON},
		{[]string{"precision", "--format", ""}, tableJSON},
		{[]string{"workspace", "--format", ""}, tableJSON},
		{[]string{"generate", "--backend", ""}, backends},
		{[]string{"discover", "--backend", ""}, backends},
		{[]string{"discover", "--engine", ""}, []string{"auto", "recipes", "program"}},
		{[]string{"diff", "--report", ""}, []string{"table=", "table+=", "json=", "markdown=", "markdown+=", "junit=", "csv="}},
	} {
		code, out, stderr := zflow(t, append([]string{"__complete"}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
			t.Errorf("%v: exit %d, %q %s", c.args, code, out, stderr)
			continue
		}
		got := lines[:len(lines)-1] // the last line is the directive
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: completes %q, want %q", c.args, got, c.want)
		}
	}
}
