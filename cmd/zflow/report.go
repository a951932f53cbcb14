package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// appendableFormats are the --report formats FORMAT+=PATH may append to
// a file: text that reads as well twice in one file (a JSON, JUnit or
// CSV document appended to another is no longer one).
var appendableFormats = []string{"markdown", "table"}

// reportSpec is one --report: FORMAT=PATH writes PATH (atomically,
// replacing it); FORMAT+=PATH appends to it, as a CI job summary
// ($GITHUB_STEP_SUMMARY) wants.
type reportSpec struct {
	format, path string
	append       bool
}

// parseReportSpec reads one --report value; known says which formats the
// command writes, names lists them for the error.
func parseReportSpec(spec string, known func(string) bool, names string) (reportSpec, error) {
	name, path, found := strings.Cut(spec, "=")
	r := reportSpec{format: name, path: path}
	if f, ok := strings.CutSuffix(name, "+"); ok {
		r.format, r.append = f, true
	}
	if !found || !known(r.format) || path == "" {
		return r, fmt.Errorf("--report %q: want FORMAT=PATH (or FORMAT+=PATH to append), FORMAT one of %s", spec, names)
	}
	if r.append && !slices.Contains(appendableFormats, r.format) {
		return r, fmt.Errorf("--report %q: only %s append (two %s documents in one file are not one document); use %s=PATH",
			spec, strings.Join(appendableFormats, " and "), r.format, r.format)
	}
	if err := checkOutputPath("--report", path); err != nil {
		return r, err
	}
	return r, nil
}

// write puts data at the spec's path: atomically replacing the file, or
// appended to it in one write (after a blank line when the file holds
// something already).
func (r reportSpec) write(data []byte) error {
	if !r.append {
		if err := writeFileAtomic(r.path, data); err != nil {
			return fmt.Errorf("--report %s: %w", r.format, err)
		}
		return nil
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("--report %s+=: %w", r.format, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		data = append([]byte("\n"), data...)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--report %s+=%s: %w", r.format, r.path, err)
	}
	return nil
}
