package plan

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zflow/zflow/precision"
)

// compare records our value s at key against the reference m: from the
// comparison already made of the same version when there is one, else by
// making s (or, where the run samples rows and s allows it, its sampled
// rows) and reading the reference.
func (rs *runState) compare(step int, key, module, port string, s *slot, m *refMeta) error {
	e := rs.e
	var plan *rowPlan
	if rs.opts.sample > 0 && s.sampleOK {
		plan = e.samplePlan(s, rs.opts.sample)
	}
	rec := Record{Key: key, Step: step, Module: module, Port: port, Shape: slices.Clone(m.shape), Format: m.format,
		OpClass: e.opClass(s.makers), DependsOn: e.className(s.deps), cone: s.deps}
	ck := cmpKey{key: key, ver: s.ver, sampled: plan != nil}
	c, known := e.cmps[ck]
	if !known || e.opt.FreeRunning {
		var partial func(n, exact int) bool
		if rs.opts.stop != nil {
			partial = func(n, exact int) bool {
				r := rec
				r.N, r.Exact = n, exact
				return rs.opts.stop(&r, true)
			}
		}
		var err error
		if c, err = e.measure(s, m, plan, partial); errors.Is(err, errStopped) {
			// What the comparison saw is the run's last record: the bound
			// on its scores counts it.
			rec.N, rec.Exact = c.n, c.exact
			rs.recs = append(rs.recs, rec)
			return err
		} else if err != nil {
			return err
		}
	}
	s.format = c.format
	rec.OursFormat, rec.N, rec.Exact = c.format, c.n, c.exact
	rec.SumD2, rec.SumR2, rec.Masked, rec.Mismatched = c.s.D2, c.s.R2, c.s.Masked, c.s.Mismatched
	if c.s.Mismatched > 0 {
		rec.SumD2 = math.Inf(1)
	}
	rec.Rows, rec.OfRows, rec.rows = c.rows, c.ofRows, c.sampled
	if e.opt.Keep && (e.opt.KeepIf == nil || e.opt.KeepIf(&rec)) {
		if c.ours == nil { // known from a tap whose values were not kept
			v, err := e.measure(s, m, plan, nil)
			if err != nil {
				return err
			}
			c.ours, c.refv = v.ours, v.refv
		}
		rec.Ours, rec.Ref = c.ours, c.refv
	} else {
		c.ours, c.refv = nil, nil
	}
	if !e.opt.FreeRunning {
		e.cmps[ck] = c
	}
	rs.recs = append(rs.recs, rec)
	if rs.opts.stop != nil && rs.opts.stop(&rs.recs[len(rs.recs)-1], false) {
		return errStopped
	}
	return nil
}

// measure compares s (whole, or the rows plan samples) with the
// reference's values at m; with Options.Keep the result holds both. A
// sampled comparison goes block by block and, when partial says the
// values so far decide the run, stops (errStopped).
func (e *Evaluator) measure(s *slot, m *refMeta, plan *rowPlan, partial func(n, exact int) bool) (cmpResult, error) {
	ref, done, err := e.refData(m)
	if err != nil {
		return cmpResult{}, err
	}
	defer done()
	if plan == nil {
		b, err := e.make(s, false)
		if err != nil {
			return cmpResult{}, err
		}
		ours, err := e.B.Download(b.t)
		if err != nil {
			return cmpResult{}, err
		}
		c := compareValues(ours, ref, s.format, m.format)
		c.format = s.format
		if e.opt.Keep {
			c.ours, c.refv = ours, slices.Clone(ref) // ref: a view of the mapping
		}
		return c, nil
	}
	var c cmpResult
	var ours, refs []float32
	stopped, err := e.sampleBlocks(s, plan, func(v []float32, rows []int) bool {
		c.sampled = append(c.sampled, rows...) // in the order compared
		r := plan.pickRows(ref, rows)
		b := compareValues(v, r, s.format, m.format)
		c.n, c.exact = c.n+b.n, c.exact+b.exact
		c.s.Merge(b.s)
		if e.opt.Keep {
			ours, refs = append(ours, v...), append(refs, r...)
		}
		return partial != nil && partial(c.n, c.exact)
	})
	if err != nil {
		return cmpResult{}, err
	}
	if stopped {
		return c, errStopped
	}
	c.format = s.format
	c.rows, c.ofRows = len(plan.rows), plan.of
	c.ours, c.refv = ours, refs
	return c, nil
}

// compareChunk is how many pairs one goroutine of compareValues takes: a
// fixed size, so that the sums (added chunk by chunk, in order) are the
// same on every machine.
const compareChunk = 1 << 16

// compareValues counts the pairs bit-exact in f (ours stored in of) and
// sums the squared differences and references as precision.Sums does in f
// (mask-sized and NaN pairs counted apart), on every core for a large
// tensor.
func compareValues(ours, ref []float32, of, f precision.Format) cmpResult {
	n := len(ref)
	if n <= 2*compareChunk {
		return compareRun(ours, ref, of, f)
	}
	parts := make([]cmpResult, (n+compareChunk-1)/compareChunk)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(parts); i = int(next.Add(1) - 1) {
				lo, hi := i*compareChunk, min(n, (i+1)*compareChunk)
				parts[i] = compareRun(ours[lo:hi], ref[lo:hi], of, f)
			}
		}()
	}
	wg.Wait()
	c := cmpResult{n: n}
	for _, p := range parts {
		c.exact += p.exact
		c.s.Merge(p.s)
	}
	return c
}

// compareRun is compareValues on one run of pairs, in order.
func compareRun(ours, ref []float32, of, f precision.Format) cmpResult {
	c := cmpResult{n: len(ref)}
	// Values stored in f (or anything against f32) are exact when equal
	// as floats, and so are values we keep wider than the reference
	// stores: a consumer reads ours unrounded, so an f32 value the
	// reference holds in bf16 is exact only where it is that bf16 value
	// (rounding it first would hide a storage format the trace
	// contradicts). Two narrow formats are compared in f
	// (precision.BitExact).
	direct := of == f || f == precision.F32 || f == precision.F64 || of == precision.F32 || of == precision.F64
	lim := precision.MaskBits(f)
	for i, o := range ours {
		r := ref[i]
		if direct {
			if o == r {
				c.exact++
			}
		} else if precision.BitExact(f, o, r) {
			c.exact++
		}
		if uo, ur := math.Float32bits(o), math.Float32bits(r); uo&0x7FFFFFFF >= lim || ur&0x7FFFFFFF >= lim {
			c.s.Count(precision.Classify(f, o, r)) // mask-sized or NaN
			continue
		}
		a, b := float64(o), float64(r)
		d := a - b
		c.s.D2 += d * d
		c.s.R2 += b * b
	}
	return c
}
