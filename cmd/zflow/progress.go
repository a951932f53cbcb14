package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/trace"
)

// ui is where a command's messages go besides its result on stdout:
// progress and notes to stderr, both silenced by --quiet. Errors and
// warnings are not notes: they go to stderr whatever --quiet says.
type ui struct {
	stderr io.Writer
	quiet  bool
	open   trace.Options // the global --max-decoded, for every trace the command opens
}

// newUI reads the global --quiet and --max-decoded of cmd.
func newUI(cmd *cobra.Command) ui {
	q, _ := cmd.Flags().GetBool("quiet")
	md, _ := cmd.Flags().GetInt64("max-decoded")
	return ui{stderr: cmd.ErrOrStderr(), quiet: q, open: trace.Options{MaxDecoded: md}}
}

// openTrace opens a reference trace with the run's limits.
func (u ui) openTrace(path string) (*trace.Trace, error) { return trace.OpenWith(path, u.open) }

// openPort opens a trace that may be a port's (no manifest: its keys are
// its boundaries) under the same options.
func (u ui) openPort(path string) (*trace.Trace, error) { return trace.OpenPortWith(path, u.open) }

// info is the writer of notes: stderr, or nothing under --quiet.
func (u ui) info() io.Writer {
	if u.quiet {
		return io.Discard
	}
	return u.stderr
}

// progress is a progress reporter for label's long steps (nil under
// --quiet: its methods do nothing on nil).
func (u ui) progress(label string) *progress {
	if u.quiet {
		return nil
	}
	return newProgress(u.stderr, label, isTerminal(u.stderr), true)
}

// isTerminal says whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Progress timing: a stage shorter than progressQuiet leaves no trace; a
// log gets a line at most every progressEvery; a terminal's bar is
// redrawn at most every progressRedraw.
const (
	progressQuiet  = time.Second
	progressEvery  = 5 * time.Second
	progressRedraw = 100 * time.Millisecond
)

// progress reports the stages of a long step. On a terminal it draws one
// line redrawn in place (a bar when the stage has a counter, the elapsed
// time when it has none). Anywhere else (a CI log, a pipe, a file) it
// writes plain lines, never a carriage return: a stage's first line once
// it has run progressQuiet, then one at most every progressEvery. A stage
// that showed anything ends with a line saying it is done, its counter at
// its total or, when it stopped short (a search that converged before its
// planned maximum of evaluations), how many of the planned it needed.
type progress struct {
	w     io.Writer
	label string
	tty   bool
	now   func() time.Time

	mu          sync.Mutex
	stage       string
	done, total int // total 0: a stage without a counter
	started     time.Time
	shown       bool      // the stage has written something
	last        time.Time // when it last did
	stop        chan struct{}
	stopped     chan struct{}
}

// newProgress reports to w; ticking runs a clock that refreshes the
// display while no update comes (tests drive tick themselves).
func newProgress(w io.Writer, label string, tty, ticking bool) *progress {
	p := &progress{w: w, label: label, tty: tty, now: time.Now}
	if ticking {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go p.run()
	}
	return p
}

func (p *progress) run() {
	defer close(p.stopped)
	every := progressRedraw * 2
	if !p.tty {
		every = progressQuiet / 4
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.tick()
		}
	}
}

// Stage starts a stage without a counter (closing the one before).
func (p *progress) Stage(stage string) { p.Update(stage, 0, 0) }

// Update reports done of total in stage; a new stage name closes the
// stage before.
func (p *progress) Update(stage string, done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if stage != p.stage || p.started.IsZero() {
		p.closeStage(now)
		p.stage, p.started, p.shown = stage, now, false
	}
	p.done, p.total = done, total
	p.show(now, false)
}

// Func adapts Update to the searches' callbacks.
func (p *progress) Func() func(stage string, done, total int) {
	if p == nil {
		return nil
	}
	return p.Update
}

// Under adapts Update to a search's callback whose phases are parts of
// stage ("program search: calls of step 0").
func (p *progress) Under(stage string) func(phase string, done, total int) {
	if p == nil {
		return nil
	}
	return func(phase string, done, total int) { p.Update(stage+": "+phase, done, total) }
}

// Steps adapts Update to a callback of one stage's counter.
func (p *progress) Steps(stage string) func(done, total int) {
	if p == nil {
		return nil
	}
	return func(done, total int) { p.Update(stage, done, total) }
}

// Close ends the last stage and stops the clock.
func (p *progress) Close() {
	if p == nil {
		return
	}
	if p.stop != nil {
		close(p.stop)
		<-p.stopped
		p.stop = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeStage(p.now())
	p.stage, p.started = "", time.Time{}
}

func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started.IsZero() {
		p.show(p.now(), true)
	}
}

// show writes the stage's state when the policy says so.
func (p *progress) show(now time.Time, ticked bool) {
	ran := now.Sub(p.started)
	if p.tty {
		if now.Sub(p.last) < progressRedraw && !(p.total > 0 && p.done == p.total) {
			return
		}
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(now, true))
		p.shown, p.last = true, now
		return
	}
	if ran < progressQuiet || p.shown && now.Sub(p.last) < progressEvery {
		return
	}
	if !ticked && p.total == 0 && p.shown {
		return
	}
	fmt.Fprintln(p.w, p.line(now, false))
	p.shown, p.last = true, now
}

// closeStage ends the current stage: its done line when it ran long
// enough to be shown, else (a terminal) the bar wiped.
func (p *progress) closeStage(now time.Time) {
	if p.started.IsZero() || !p.shown {
		return
	}
	ran := now.Sub(p.started)
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
		if ran < progressQuiet {
			return
		}
	}
	what := "done"
	switch {
	case p.total == 0:
	case p.done >= p.total:
		what += fmt.Sprintf(": %d/%d", p.total, p.total)
	default:
		what += fmt.Sprintf(": %d of at most %d were needed", p.done, p.total)
	}
	fmt.Fprintf(p.w, "%s: %s %s (%s)\n", p.label, p.stage, what, seconds(ran))
}

// line is the stage's state on one line: a bar on a terminal.
func (p *progress) line(now time.Time, bar bool) string {
	ran := seconds(now.Sub(p.started))
	if p.total == 0 {
		return fmt.Sprintf("%s: %s ... %s", p.label, p.stage, ran)
	}
	if !bar {
		return fmt.Sprintf("%s: %s %d/%d (%s)", p.label, p.stage, p.done, p.total, ran)
	}
	const width = 30
	fill := width * min(p.done, p.total) / p.total
	return fmt.Sprintf("%s: %s [%s%s] %d/%d %s", p.label, p.stage, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), p.done, p.total, ran)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
