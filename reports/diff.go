package reports

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zflow/zflow/internal/workers"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// DiffOptions configures Diff. The zero value diffs every boundary with
// DefaultGates on all cores.
type DiffOptions struct {
	Selection
	Gates   []Gate // nil: DefaultGates
	Workers int    // 0: runtime.GOMAXPROCS(0)
	// SegmentLen is how many elements one task compares (0: 1<<20). A
	// pair is split into segments that run on any core and are merged in
	// order, so results do not depend on the scheduling.
	SegmentLen int
	// Progress, when set, is told after each compared pair how many of
	// the pairs to compare are done (calls are serialised; the count
	// reaches the total).
	Progress func(done, total int)
	// AllowNonFinite lifts the check that always applies otherwise,
	// whatever Gates say: no position NaN or Inf on one side and not the
	// same on the other (nonfinite==0).
	AllowNonFinite bool
}

// ErrNoMatch is returned (wrapped) when a selection or a gate's glob
// matches no boundary: a check of nothing is not a pass.
var ErrNoMatch = errors.New("matches nothing")

// BoundaryDiff is one paired boundary's comparison.
type BoundaryDiff struct {
	Boundary
	Shape, OursShape []int
	DType, OursDType string

	// Metrics is nil when the pair was not compared: Error (the pair
	// fails) or Skipped (it passes) says why.
	Metrics           *Metrics
	NonFiniteMismatch int // positions whose classes (finite, NaN, +Inf, -Inf) differ
	Error             string
	Skipped           string

	Checks []Check
	Pass   bool

	// Elapsed is the time spent comparing the pair, summed over the
	// workers that compared its segments (and, for the first failing
	// boundary, diagnosing it); 0 when it was not compared.
	Elapsed time.Duration

	close map[int]*CloseStats // by gate index: the allclose gates' counts
}

// DiffReport is the comparison of two traces.
type DiffReport struct {
	Ours, Ref    string
	Selection    Selection
	Gates        []Gate
	Boundaries   []BoundaryDiff // paired, in the reference's execution order
	Unpaired     []Unpaired
	FirstFailing int      // index into Boundaries; -1 if every boundary passes
	Finding      *Finding // the first failing boundary's per-channel diagnosis, if it could be made
	// Elapsed is the wall time of the comparison (a caller that did more
	// for the report, such as zflow verify's run, may set its own).
	Elapsed time.Duration
}

// Pass reports whether every paired boundary passed. A report that paired
// no boundary does not pass: it checked nothing.
func (r *DiffReport) Pass() bool { return r.FirstFailing < 0 && len(r.Boundaries) > 0 }

// NothingPaired reports whether no boundary of ours pairs with one of the
// reference's.
func (r *DiffReport) NothingPaired() bool { return len(r.Boundaries) == 0 }

// Failed counts the boundaries that failed.
func (r *DiffReport) Failed() int {
	n := 0
	for _, b := range r.Boundaries {
		if !b.Pass {
			n++
		}
	}
	return n
}

// Diff compares ours with ref boundary by boundary (see Boundaries for the
// order and DiffOptions for the knobs), applies the gates, and diagnoses
// the first failing boundary. Tensors are streamed in segments by a pool
// of workers, so at most a few tensors' worth of memory is in use; stored
// tensors are read straight from the file mapping. An error means the
// input could not be read (a malformed tensor); a failing comparison is
// not an error.
func Diff(ours, ref *trace.Trace, o DiffOptions) (*DiffReport, error) {
	start := time.Now()
	o.Gates = effectiveGates(o.Gates, o.AllowNonFinite)
	ob, err := Boundaries(ours, o.Selection)
	if err != nil {
		return nil, err
	}
	rb, err := Boundaries(ref, o.Selection)
	if err != nil {
		return nil, err
	}
	if len(rb) == 0 && o.Selection != (Selection{}) {
		return nil, selectionMatchesNothing(ref, o.Selection)
	}
	paired, unpaired := PairBoundaries(ob, rb)
	if len(paired) > 0 {
		if err := gatesMatch(o.Gates, paired); err != nil {
			return nil, err
		}
	}
	r := &DiffReport{Ours: ours.Path, Ref: ref.Path, Selection: o.Selection, Gates: o.Gates,
		Unpaired: unpaired, FirstFailing: -1, Boundaries: make([]BoundaryDiff, len(paired))}
	var jobs []*pairJob
	for i, b := range paired {
		d := &r.Boundaries[i]
		d.Boundary = b
		job, err := prepare(d, ours, ref)
		if err != nil {
			return nil, err
		}
		if job != nil {
			for gi, g := range o.Gates {
				if g.Metric == "allclose" && g.Applies(b) {
					job.closeGates = append(job.closeGates, gi)
					job.tols = append(job.tols, g.Tol.resolve(d.OursDType, d.DType))
				}
			}
			jobs = append(jobs, job)
		}
	}
	var onDone func()
	if o.Progress != nil {
		var mu sync.Mutex
		finished := 0
		onDone = func() {
			mu.Lock()
			defer mu.Unlock()
			finished++
			o.Progress(finished, len(jobs))
		}
	}
	if err := runJobs(jobs, o.Workers, o.SegmentLen, onDone); err != nil {
		return nil, err
	}
	for i := range r.Boundaries {
		d := &r.Boundaries[i]
		switch {
		case d.Error != "":
			d.Pass = false
		case d.Metrics != nil:
			d.evaluate(o.Gates)
		default:
			d.Pass = true
		}
		if !d.Pass && r.FirstFailing < 0 {
			r.FirstFailing = i
		}
	}
	if r.FirstFailing >= 0 && r.Boundaries[r.FirstFailing].Metrics != nil {
		d, t0 := &r.Boundaries[r.FirstFailing], time.Now()
		if r.Finding, err = diagnoseBoundary(ours, ref, d); err != nil {
			return nil, err
		}
		d.Elapsed += time.Since(t0)
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// effectiveGates are the gates a run applies: gates (DefaultGates when
// nil), plus nonfinite==0 unless allowNonFinite (which also drops the
// default set's own nonfinite==0; a nonfinite gate given by name stays).
func effectiveGates(gates []Gate, allowNonFinite bool) []Gate {
	always := Gate{Metric: "nonfinite", Op: "==", Value: 0}
	if gates == nil {
		gates = DefaultGates
		if allowNonFinite {
			return slices.DeleteFunc(slices.Clone(gates), func(g Gate) bool { return g == always })
		}
	}
	if allowNonFinite || slices.Contains(gates, always) {
		return gates
	}
	return append(slices.Clone(gates), always)
}

// selectionMatchesNothing names the parts of sel that select no boundary
// of tr, each tried alone (or the combination, when each part matches
// something by itself).
func selectionMatchesNothing(tr *trace.Trace, sel Selection) error {
	var parts []string
	try := func(name string, one Selection) {
		if b, err := Boundaries(tr, one); err == nil && len(b) == 0 {
			parts = append(parts, name)
		}
	}
	if sel.Step != nil {
		try(fmt.Sprintf("--step %d", *sel.Step), Selection{Step: sel.Step})
	}
	if sel.Module != "" {
		try(fmt.Sprintf("--module %q", sel.Module), Selection{Module: sel.Module})
	}
	if sel.Port != "" {
		try(fmt.Sprintf("--port %q", sel.Port), Selection{Port: sel.Port})
	}
	what := strings.Join(parts, " and ")
	if what == "" {
		what = "the selection " + sel.String()
	}
	return fmt.Errorf("%s: %s %w: no boundary of the reference is selected", tr.Path, what, ErrNoMatch)
}

// gatesMatch checks that every gate with a glob applies to at least one
// paired boundary.
func gatesMatch(gates []Gate, paired []Boundary) error {
	for _, g := range gates {
		if g.Glob == "" || slices.ContainsFunc(paired, g.Applies) {
			continue
		}
		return fmt.Errorf("gate %q: glob %q %w: no paired boundary's key or module path matches it", g.String(), g.Glob, ErrNoMatch)
	}
	return nil
}

// prepare fills a pair's shapes and dtypes and returns the job that
// compares it, or nil when it cannot be compared (d.Error or d.Skipped
// says why).
func prepare(d *BoundaryDiff, ours, ref *trace.Trace) (*pairJob, error) {
	oi, err := ours.Info(d.Key)
	if err != nil {
		return nil, err
	}
	ri, err := ref.Info(d.Key)
	if err != nil {
		return nil, err
	}
	d.Shape, d.OursShape = ri.Shape, oi.Shape
	d.DType, d.OursDType = ri.DType.String(), oi.DType.String()
	f, ok := formatOf(d.DType)
	_, oursOK := formatOf(d.OursDType)
	switch {
	case !ok || !oursOK:
		d.Skipped = fmt.Sprintf("not compared: %s against %s cannot be read as float32 without losing bits", d.OursDType, d.DType)
		return nil, nil
	case oi.DType == trace.Uint16 && ri.DType == trace.BFloat16 || oi.DType == trace.BFloat16 && ri.DType == trace.Uint16:
		d.Error = fmt.Sprintf("dtypes differ: ours %s, ref %s: bf16 bit patterns without their manifest dtypes entry are read as integers "+
			"(zflow diff --ours-dtype bf16 reads our uint16 tensors as bf16)", d.OursDType, d.DType)
		return nil, nil
	case !sameLayout(oi.Shape, ri.Shape) || oi.DType.Components() != ri.DType.Components():
		d.Error = fmt.Sprintf("shapes differ: ours %v %s, ref %v %s", oi.Shape, d.OursDType, ri.Shape, d.DType)
		return nil, nil
	}
	n := ri.Len() * int64(ri.DType.Components())
	return &pairJob{d: d, ours: ours, ref: ref, format: f, n: int(n), rowLen: rowLen(ri), inOrder: oi.Compressed || ri.Compressed}, nil
}

// sameLayout reports whether two shapes hold the same elements in the same
// order: equal once leading 1s are dropped (a batch of one).
func sameLayout(a, b []int) bool {
	trim := func(s []int) []int {
		for len(s) > 0 && s[0] == 1 {
			s = s[1:]
		}
		return s
	}
	return slices.Equal(trim(a), trim(b))
}

// rowLen is the length of a row (the last dimension, in real values) of a
// tensor; 1 for a scalar or an empty last dimension.
func rowLen(in trace.Info) int {
	if len(in.Shape) == 0 || in.Shape[len(in.Shape)-1] == 0 {
		return 1
	}
	return in.Shape[len(in.Shape)-1] * in.DType.Components()
}

// pairJob compares one pair in segments.
type pairJob struct {
	d         *BoundaryDiff
	ours, ref *trace.Trace
	format    precision.Format
	n, rowLen int
	// the allclose gates that apply (indexes into the gates) and their
	// tolerances, resolved for the pair's dtypes
	closeGates []int
	tols       []Tolerance

	open    sync.Once
	ot, rt  *trace.Tensor
	bits    bool // both sides stored bf16: compare the bit patterns
	inOrder bool // a side is deflated: one segment, its values decoded in order
	segLen  int
	left    atomic.Int32 // segments not yet done

	mu      sync.Mutex // guards what follows
	err     error      // the first error reading the pair
	parts   []partial  // per segment
	hist    ulpHist
	elapsed time.Duration // summed over the segments
}

// task is one segment of one pair.
type task struct {
	job *pairJob
	seg int
}

// worker holds one goroutine's scratch space.
type worker struct {
	h      *segHist
	bo, br []float32
}

const (
	defaultSegment = 1 << 20
	widenChunk     = 1 << 14 // values widened into a buffer at a time
)

// runJobs compares the pairs' segments on nw workers; onDone (when not
// nil) is called after each pair is finished.
func runJobs(jobs []*pairJob, nw, segLen int, onDone func()) error {
	if nw <= 0 {
		nw = runtime.GOMAXPROCS(0)
	}
	if segLen <= 0 {
		segLen = defaultSegment
	}
	var tasks []task
	for _, j := range jobs {
		j.segLen = segLen
		if j.inOrder {
			j.segLen = max(1, j.n)
		}
		segs := max(1, (j.n+j.segLen-1)/j.segLen)
		j.parts = make([]partial, segs)
		j.left.Store(int32(segs))
		for s := range segs {
			tasks = append(tasks, task{j, s})
		}
	}
	var next atomic.Int64
	var g workers.Group
	var errMu sync.Mutex
	var firstErr error
	for range min(nw, max(1, len(tasks))) {
		g.Go(func() {
			w := &worker{h: new(segHist), bo: make([]float32, widenChunk), br: make([]float32, widenChunk)}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) {
					return
				}
				finished, err := w.run(tasks[i])
				if finished && onDone != nil {
					onDone()
				}
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		})
	}
	g.Wait()
	return firstErr
}

// run compares one segment and, after the pair's last one, finishes it
// (and says so).
func (w *worker) run(t task) (finished bool, err error) {
	j := t.job
	t0 := time.Now()
	j.open.Do(j.load)
	if j.failed() == nil {
		from := t.seg * j.segLen
		to := min(j.n, from+j.segLen)
		p := j.newPartial()
		if err := w.compare(j, &p, from, to); err != nil {
			w.h.reset()
			j.fail(err)
		} else {
			j.mu.Lock()
			w.h.flush(&j.hist)
			j.parts[t.seg] = p
			j.mu.Unlock()
			release(j.ot, from, to)
			release(j.rt, from, to)
		}
	}
	j.mu.Lock()
	j.elapsed += time.Since(t0)
	j.mu.Unlock()
	if j.left.Add(-1) != 0 {
		return false, nil
	}
	return true, j.finish()
}

// newPartial is a segment's empty sums, with a CloseStats per allclose gate.
func (j *pairJob) newPartial() partial {
	p := newPartial()
	for _, t := range j.tols {
		p.close = append(p.close, newCloseStats(t))
	}
	return p
}

func (j *pairJob) fail(err error) {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
}

func (j *pairJob) failed() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// load opens both tensors: views into the mappings for stored entries,
// decoded as read for deflated ones (a pair with one is a single segment,
// so that its values are read in order).
func (j *pairJob) load() {
	var err error
	if j.ot, err = j.ours.Values(j.d.Key); err != nil {
		j.fail(err)
		return
	}
	if j.rt, err = j.ref.Values(j.d.Key); err != nil {
		j.fail(err)
		return
	}
	j.bits = j.ot.DType == trace.BFloat16 && j.rt.DType == trace.BFloat16 && !j.ot.Streamed() && !j.rt.Streamed() &&
		aligned2(j.ot.Bytes()) && aligned2(j.rt.Bytes())
}

func aligned2(b []byte) bool { return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%2 == 0 }

func u16view(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// compare runs the kernel that fits the pair over [from, to).
func (w *worker) compare(j *pairJob, p *partial, from, to int) error {
	if j.bits {
		o, r := u16view(j.ot.Bytes())[from:to], u16view(j.rt.Bytes())[from:to]
		p.bf16Bits(w.h, o, r, from)
		for k := range p.close {
			p.close[k].bf16(o, r, from)
		}
		return nil
	}
	ov, oview := j.ot.Float32View()
	rv, rview := j.rt.Float32View()
	for at := from; at < to; {
		end := to
		o, r := ov, rv
		if !oview || !rview {
			end = min(to, at+widenChunk)
		}
		if oview {
			o = ov[at:end]
		} else {
			o = w.bo[:end-at]
			if err := j.ot.ReadFloat32(o, int64(at)); err != nil {
				return err
			}
		}
		if rview {
			r = rv[at:end]
		} else {
			r = w.br[:end-at]
			if err := j.rt.ReadFloat32(r, int64(at)); err != nil {
				return err
			}
		}
		if j.format == precision.F32 {
			p.f32(w.h, o, r, at)
		} else {
			p.rounded(w.h, j.format, o, r, at)
		}
		for k := range p.close {
			p.close[k].f32(o, r, at)
		}
		at = end
	}
	return nil
}

// finish merges the segments in order and stores the pair's metrics. A
// value that float32 cannot hold (a large integer) makes the pair Skipped;
// any other error reading it is returned.
func (j *pairJob) finish() error {
	defer func() { j.ot, j.rt, j.parts, j.hist = nil, nil, nil, ulpHist{} }()
	if err := j.failed(); err != nil {
		if errors.Is(err, trace.ErrInexact) {
			j.d.Skipped = "not compared: " + err.Error()
			return nil
		}
		return err
	}
	total := j.newPartial()
	for i := range j.parts {
		total.merge(&j.parts[i])
	}
	m, err := total.metrics(j.format, j.rowLen, &j.hist)
	if err != nil {
		return fmt.Errorf("%s: %w", j.d.Key, err)
	}
	j.d.Metrics = &m
	j.d.NonFiniteMismatch = total.mismatch
	j.d.Elapsed = j.elapsed
	for k, gi := range j.closeGates {
		if j.d.close == nil {
			j.d.close = map[int]*CloseStats{}
		}
		j.d.close[gi] = &total.close[k]
	}
	release(j.ot, 0, j.n)
	release(j.rt, 0, j.n)
	return nil
}

// release drops the data of real values [from, to) of a tensor from the
// resident set if it is a view into the file mapping (never a decoded
// copy: that is ordinary memory, which the advice would zero).
func release(t *trace.Tensor, from, to int) {
	if t.IsView() {
		size := t.DType.Size() / t.DType.Components()
		releasePages(t.Bytes()[from*size : to*size])
	}
}
