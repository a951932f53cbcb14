package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zflow/zflow/internal/tempfiles"
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

// writeReports renders and writes every --report file, and returns the
// paths it wrote. On the first failure it removes what it wrote before
// (nothing of a failed run is left behind; an append cannot be taken
// back, so appends go last) and returns the error.
func writeReports(files []reportSpec, render func(format string, w io.Writer) error) ([]string, error) {
	ordered := slices.Clone(files)
	slices.SortStableFunc(ordered, func(a, b reportSpec) int {
		switch {
		case a.append == b.append:
			return 0
		case b.append:
			return -1
		}
		return 1
	})
	var wrote []string
	for _, f := range ordered {
		var buf bytes.Buffer
		err := render(f.format, &buf)
		if err == nil {
			err = f.write(buf.Bytes())
		}
		if err != nil {
			removeAll(wrote)
			return nil, err
		}
		if !f.append {
			wrote = append(wrote, f.path)
		}
	}
	return wrote, nil
}

// removeAll removes the files of a run that failed.
func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// checkOutputDir refuses, before any work, a folder of outputs (--plot)
// that cannot be made or written: a file in the way, or a nearest
// existing folder this process cannot create files in.
func checkOutputDir(flag, dir string) error {
	at := filepath.Clean(dir)
	for {
		st, err := os.Stat(at)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s %s: %s is not a folder", flag, dir, at)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(at) == at {
			return fmt.Errorf("%s %s: %w", flag, dir, err)
		}
		at = filepath.Dir(at)
	}
	f, err := tempfiles.Create(at, ".zflow-probe-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", flag, dir, at, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	tempfiles.Done(f.Name())
	return nil
}
