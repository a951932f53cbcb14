package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/internal/tempfiles"
	"github.com/zflow/zflow/trace"
)

// workspaceFile is the workspace's state file, in the working directory.
// It is JSON (README.md, "Workspace"):
//
//	{"version": 1, "reference": "ref.npz", "semantics": "semantics.json", "generated": "ours.npz"}
//
// Paths are as the user gave them; relative ones are relative to the
// directory holding the file (the working directory of every command that
// reads it). Every field is optional.
const workspaceFile = "zflow-workspace.json"

// workspaceLock serialises the workspace's read-modify-writes: two writers
// at once would otherwise lose one's field.
const workspaceLock = ".zflow-workspace.lock"

type workspace struct {
	Version      int    `json:"version"`
	ZflowVersion string `json:"zflow_version,omitempty"` // of the zflow that last wrote it
	Reference    string `json:"reference,omitempty"`     // the reference trace
	Semantics    string `json:"semantics,omitempty"`     // the semantics document
	Generated    string `json:"generated,omitempty"`     // the last generated trace (ours)
}

// loadWorkspace reads the working directory's workspace; a missing file is
// an empty workspace, a malformed one an error.
func loadWorkspace() (*workspace, error) {
	b, err := os.ReadFile(workspaceFile)
	if errors.Is(err, fs.ErrNotExist) {
		return &workspace{Version: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	var w workspace
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%s: %v", workspaceFile, err)
	}
	if w.Version != 1 {
		return nil, fmt.Errorf("%s: version %d, want 1", workspaceFile, w.Version)
	}
	return &w, nil
}

// save writes the workspace atomically (a temporary file, then a rename).
func (w *workspace) save() error {
	w.Version, w.ZflowVersion = 1, versionString()
	b, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(workspaceFile, append(b, '\n'))
}

// updateWorkspace records into the working directory's workspace only when
// one exists (made by `zflow workspace`): commands that produce traces never
// create one unasked.
func updateWorkspace(update func(*workspace)) error {
	if _, err := os.Stat(workspaceFile); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return recordWorkspace(update)
}

// recordWorkspace updates the working directory's workspace with what a
// command has just made or used, e.g.
//
//	recordWorkspace(func(w *workspace) { w.Generated = o.traceOut })
//
// Commands call it after they succeed.
func recordWorkspace(update func(*workspace)) error {
	unlock, err := lockWorkspace()
	if err != nil {
		return fmt.Errorf("%s: lock: %w", workspaceFile, err)
	}
	defer unlock()
	w, err := loadWorkspace()
	if err != nil {
		return err
	}
	update(w)
	return w.save()
}

// writeFileAtomic writes data to path through a temporary file in the same
// folder and a rename, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := tempfiles.Create(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer tempfiles.Done(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

type workspaceOpts struct {
	ref, semantics, generated string
	clear, json               bool // json: --format json
	format                    string
	open                      trace.Options // the global --max-decoded
}

func newWorkspaceCmd() *cobra.Command {
	var o workspaceOpts
	cmd := &cobra.Command{
		Use:   "workspace [--ref TRACE] [--semantics DOC] [--generated TRACE]",
		Short: "Show or set the workspace: the reference trace, semantics and last generated trace",
		Long: `workspace shows or sets ` + workspaceFile + ` in the working directory, which
remembers the reference trace, the semantics document and the last generated
trace so that short forms work: "zflow diff --step 3" with no paths compares
the generated trace with the reference. Flags of other commands always
override it.

With no flags it prints the workspace. --ref, --semantics and --generated set
a field (an empty value clears it); traces are opened and validated first.
--clear deletes the file.`,
		Example: `  zflow workspace --ref fixtures/dit/dit-f32.npz --generated fixtures/dit/dit-bf16.npz
  zflow diff --step 1
  zflow workspace --format json
  zflow workspace --clear`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var err error
			if o.format, err = resolveFormat(cmd, o.format, o.json, tableJSON); err != nil {
				return badInput(err)
			}
			o.open = newUI(cmd).open
			return runWorkspace(cmd.OutOrStdout(), o, f.Changed("ref"), f.Changed("semantics"), f.Changed("generated"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ref, "ref", "", "set the reference trace")
	f.StringVar(&o.semantics, "semantics", "", "set the semantics document")
	f.StringVar(&o.generated, "generated", "", "set the last generated trace (ours)")
	f.BoolVar(&o.clear, "clear", false, "delete the workspace file")
	addFormatFlag(cmd, &o.format, tableJSON, &o.json)
	return cmd
}

func runWorkspace(w io.Writer, o workspaceOpts, setRef, setSem, setGen bool) error {
	if o.clear {
		if setRef || setSem || setGen {
			return badInput(errors.New("--clear takes no other flag"))
		}
		if err := os.Remove(workspaceFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		fmt.Fprintf(w, "removed %s\n", workspaceFile)
		return nil
	}
	if setRef || setSem || setGen {
		unlock, err := lockWorkspace()
		if err != nil {
			return fmt.Errorf("%s: lock: %w", workspaceFile, err)
		}
		defer unlock()
	}
	ws, err := loadWorkspace()
	if err != nil {
		return badInput(err)
	}
	if setRef || setSem || setGen {
		for _, t := range []struct {
			set   bool
			path  string
			trace bool
			field *string
		}{{setRef, o.ref, true, &ws.Reference}, {setSem, o.semantics, false, &ws.Semantics}, {setGen, o.generated, true, &ws.Generated}} {
			if !t.set {
				continue
			}
			if t.path != "" {
				if err := checkPath(t.path, t.trace, o.open); err != nil {
					return badInput(err)
				}
				t.path = filepath.Clean(t.path)
			}
			*t.field = t.path
		}
		if err := ws.save(); err != nil {
			return err
		}
	}
	if o.format == "json" {
		ws.ZflowVersion = versionString()
		return writeJSON(w, ws)
	}
	show := func(s string) string {
		if s == "" {
			return "(not set)"
		}
		return s
	}
	fmt.Fprintf(w, "workspace  %s\nreference  %s\nsemantics  %s\ngenerated  %s\n",
		workspaceFile, show(ws.Reference), show(ws.Semantics), show(ws.Generated))
	return nil
}

// checkPath checks that a path names a readable file, and a valid trace if
// isTrace.
func checkPath(path string, isTrace bool, opts trace.Options) error {
	if !isTrace {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("%s: is a directory", path)
		}
		return nil
	}
	tr, err := trace.OpenWith(path, opts)
	if err != nil {
		return err
	}
	return tr.Close()
}
