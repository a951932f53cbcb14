package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProgress drives a progress reporter on a fake clock: each event
// advances the clock, then updates, ticks or closes.
func TestProgress(t *testing.T) {
	type event struct {
		after time.Duration
		stage string // "": a tick; "close": Close
		done  int
		total int
	}
	for _, c := range []struct {
		name   string
		tty    bool
		events []event
		want   []string // the lines written (a terminal's: split at \r and \n, empty ones dropped)
	}{
		{"a fast stage leaves no trace in a log", false, []event{
			{0, "op classes", 1, 96}, {300 * time.Millisecond, "op classes", 24, 96}, {100 * time.Millisecond, "close", 0, 0},
		}, nil},
		{"a slow stage that stops short says so", false, []event{
			{0, "op classes", 1, 96},
			{1500 * time.Millisecond, "op classes", 10, 96},
			{time.Second, "op classes", 12, 96}, // within progressEvery: no line
			{5 * time.Second, "", 0, 0},         // a tick: the counter where it stands
			{time.Second, "op classes", 24, 96},
			{0, "close", 0, 0},
		}, []string{
			"precision: op classes 10/96 (1.5s)",
			"precision: op classes 12/96 (7.5s)",
			"precision: op classes done: 24 of at most 96 were needed (8.5s)",
		}},
		{"a new stage closes the one before; a finished counter reaches its total", false, []event{
			{0, "preparing", 0, 0},
			{2 * time.Second, "", 0, 0},
			{0, "roles", 0, 4},
			{1100 * time.Millisecond, "roles", 4, 4},
			{0, "close", 0, 0},
		}, []string{
			"precision: preparing ... 2.0s",
			"precision: preparing done (2.0s)",
			"precision: roles 4/4 (1.1s)",
			"precision: roles done: 4/4 (1.1s)",
		}},
		{"a terminal draws a bar and ends with the done line", true, []event{
			{0, "op classes", 0, 96},
			{2 * time.Second, "op classes", 48, 96},
			{time.Second, "op classes", 96, 96},
			{0, "close", 0, 0},
		}, []string{
			"\x1b[Kprecision: op classes [                              ] 0/96 0.0s",
			"\x1b[Kprecision: op classes [===============               ] 48/96 2.0s",
			"\x1b[Kprecision: op classes [==============================] 96/96 3.0s",
			"\x1b[Kprecision: op classes done: 96/96 (3.0s)",
		}},
		{"a terminal wipes a fast stage", true, []event{
			{0, "norms", 1, 2}, {200 * time.Millisecond, "norms", 2, 2}, {0, "close", 0, 0},
		}, []string{
			"\x1b[Kprecision: norms [===============               ] 1/2 0.0s",
			"\x1b[Kprecision: norms [==============================] 2/2 0.2s",
			"\x1b[K",
		}},
	} {
		var buf bytes.Buffer
		p := newProgress(&buf, "precision", c.tty, false)
		clock := time.Unix(0, 0)
		p.now = func() time.Time { return clock }
		for _, e := range c.events {
			clock = clock.Add(e.after)
			switch e.stage {
			case "":
				p.tick()
			case "close":
				p.Close()
			default:
				p.Update(e.stage, e.done, e.total)
			}
		}
		out := buf.String()
		if !c.tty && strings.Contains(out, "\r") {
			t.Errorf("%s: a carriage return in a log: %q", c.name, out)
		}
		var got []string
		for _, l := range strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' }) {
			got = append(got, l)
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: wrote\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

// TestProgressNil: under --quiet a command's progress is nil, and every
// method is a no-op.
func TestProgressNil(t *testing.T) {
	var p *progress
	p.Stage("x")
	p.Update("x", 1, 2)
	if p.Func() != nil || p.Steps("x") != nil || p.Under("x") != nil {
		t.Error("a nil progress hands out callbacks")
	}
	p.Close()
}

// TestQuietAndPlainProgress: stderr that is not a terminal never gets a
// carriage return (the precision search included), and --quiet leaves
// only errors and warnings there.
func TestQuietAndPlainProgress(t *testing.T) {
	dir := t.TempDir()
	port := filepath.Join(fixtures, "ports", "dit-own-names.safetensors")
	portMap := filepath.Join(fixtures, "ports", "dit-own-names.map")
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		notes string // a note stderr holds without --quiet
	}{
		{"discover --precision", []string{"discover", "--trace", ditTrace, "--precision", "-o", filepath.Join(dir, "s.json")}, 0, "discover: self-check"},
		{"precision", []string{"precision", "--trace", ditTrace, "--semantics", ditDoc}, 0, ""},
		{"diff of a port", []string{"diff", port, ditBF16, "--map", portMap, "--step", "0", "--plot", filepath.Join(dir, "plots")}, 0, "note: OURS"},
		{"generate", []string{"generate", "--semantics", ditDoc, "--inputs", ditTrace, "-o", filepath.Join(dir, "o.npz")}, 0, ""},
		{"verify", []string{"verify", "--trace", ditTrace, "--semantics", ditDoc}, 0, ""},
	} {
		code, _, stderr := zflow(t, c.args...)
		if code != c.code || strings.Contains(stderr, "\r") || !strings.Contains(stderr, c.notes) {
			t.Errorf("%s: exit %d, stderr %q: want exit %d, no carriage return, %q", c.name, code, stderr, c.code, c.notes)
		}
		for _, q := range []string{"--quiet", "-q"} {
			code, _, stderr = zflow(t, append([]string{q}, c.args...)...)
			if code != c.code || stderr != "" {
				t.Errorf("%s %s: exit %d, stderr %q: want exit %d and nothing", q, c.name, code, stderr, c.code)
			}
		}
	}
	// errors still print under --quiet
	if code, _, stderr := zflow(t, "--quiet", "diff", "nope.npz", ditBF16); code != 2 || !strings.HasPrefix(stderr, "zflow: ") {
		t.Errorf("--quiet with a missing file: exit %d, stderr %q", code, stderr)
	}
}
