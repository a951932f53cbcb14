package discover

import (
	"context"
	"fmt"
	"github.com/zflow/zflow/search/sampler"
	"strings"
	"time"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/factors"
	"github.com/zflow/zflow/search/structure"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Options tune Run; the zero value takes search's defaults.
type Options struct {
	Search search.Options
	// Progress, when set, is told each phase's progress: phase names are
	// "structure", "sampler", "blocks", "model", "norms", "positions"; done
	// of total items (blocks, norm roles, ...). ("source", hashing the
	// trace beside the other phases, reports none; its Phase is the time
	// the document waited for the hash at the end.)
	Progress func(phase string, done, total int)
}

// Phase is one part of a discovery and what it cost.
type Phase struct {
	Name        string
	Duration    time.Duration
	Searches    int // search.Run calls
	Evaluations int // objective evaluations (cache misses)
}

// Result is a discovered document and how it was found.
type Result struct {
	Doc    *semantics.Document
	Phases []Phase
}

// Discover is Run with the default options.
func Discover(tr *trace.Trace) (*semantics.Document, error) {
	r, err := Run(context.Background(), tr, Options{})
	if err != nil {
		return nil, err
	}
	return r.Doc, nil
}

// Run discovers the semantics document of the reference in tr. It fails
// when the trace has nothing to discover (no model call with parameters,
// or neither a block nor an embedder), when the file cannot be hashed, or
// when the document it makes does not validate; everything else the trace
// cannot decide goes to the document's undetermined list, with the reason,
// and a part of the structure it cannot read makes the document partial
// (status incomplete; semantics.Hole). The self-check that settles the
// status of the rest is package check's, run after the precision search.
func Run(ctx context.Context, tr *trace.Trace, o Options) (*Result, error) {
	d := &discovery{tr: tr, opts: o, res: &Result{}}
	if err := d.run(ctx); err != nil {
		return nil, err
	}
	return d.res, nil
}

type discovery struct {
	tr   *trace.Trace
	opts Options
	res  *Result
	doc  *semantics.Document
	st   *semantics.Structure

	entries []entry
	// precision factors found along the way
	timestepRounded *bool
	ropeFreq        string
	ropeAngle       string
	ropeOut         string
}

func (d *discovery) progress(phase string, done, total int) {
	if d.opts.Progress != nil {
		d.opts.Progress(phase, done, total)
	}
}

// phase times fn and records its searches.
func (d *discovery) phase(name string, fn func(ph *Phase) error) error {
	ph := Phase{Name: name}
	start := time.Now()
	err := fn(&ph)
	ph.Duration = time.Since(start)
	d.res.Phases = append(d.res.Phases, ph)
	return err
}

// search runs one search and counts it in ph.
func (d *discovery) search(ctx context.Context, ph *Phase, fs []search.Factor, obj search.Objective) (*search.Result, error) {
	r, err := search.Run(ctx, fs, obj, nil, d.opts.Search)
	if err != nil {
		return nil, err
	}
	ph.Searches++
	ph.Evaluations += r.Evaluations
	return r, nil
}

func (d *discovery) run(ctx context.Context) error {
	d.doc = &semantics.Document{Format: semantics.FormatName, Version: semantics.Version}
	// The source's hash reads the whole file (seconds at real width): it
	// runs beside the phases, which read only the tensors they need, and
	// is joined before the document is finished.
	type hashed struct {
		src semantics.Source
		err error
	}
	hash := make(chan hashed, 1)
	go func() {
		src, err := source(d.tr)
		hash <- hashed{src, err}
	}()
	joinSource := func() error {
		return d.phase("source", func(*Phase) error {
			h := <-hash
			d.doc.Source = h.src
			return h.err
		})
	}
	if err := d.phase("structure", func(*Phase) error {
		d.progress("structure", 0, 1)
		st, und, err := structure.Discover(d.tr)
		if err != nil {
			return err
		}
		d.doc.Structure, d.st = st, &d.doc.Structure
		d.doc.Undetermined = append(d.doc.Undetermined, und...)
		d.progress("structure", 1, 1)
		return nil
	}); err != nil {
		joinSource()
		return fmt.Errorf("discover: %w", err)
	}
	steps := []struct {
		name string
		fn   func(context.Context, *Phase) error
	}{
		{"sampler", d.sampler},
		{"blocks", d.blocks},
		{"model", d.model},
		{"norms", d.norms},
		{"positions", d.positions},
	}
	for _, s := range steps {
		if err := d.phase(s.name, func(ph *Phase) error { return s.fn(ctx, ph) }); err != nil {
			joinSource()
			return fmt.Errorf("discover: %s: %w", s.name, err)
		}
	}
	if err := joinSource(); err != nil {
		return err
	}
	entries, und := placed(d.entries, d.st)
	d.doc.Undetermined = append(d.doc.Undetermined, und...)
	d.doc.Factors, d.doc.Undetermined = merge(entries, d.st, d.opts.Search, d.doc.Undetermined)
	d.doc.Precision = d.precision()
	if d.doc.Undetermined == nil {
		d.doc.Undetermined = []semantics.Undetermined{}
	}
	if d.doc.Factors == nil { // a partial document may have none: [] not null
		d.doc.Factors = []semantics.Factor{}
	}
	if len(d.doc.Holes()) > 0 {
		// Parts of the structure discovery could not read: a partial
		// document, each part named in undetermined (the self-check,
		// package check, settles the status of the rest).
		d.doc.Status = semantics.StatusIncomplete
	}
	if err := d.doc.Validate(); err != nil {
		return fmt.Errorf("discover: the document made from %s does not validate: %w", d.tr.Path, err)
	}
	d.res.Doc = d.doc
	return nil
}

// undetermined records what a phase could not decide.
func (d *discovery) undetermined(name, scope, format string, args ...any) {
	d.doc.Undetermined = append(d.doc.Undetermined, semantics.Undetermined{Name: name, Scope: scope, Reason: fmt.Sprintf(format, args...)})
}

// collect adds a search's factors as entries, each at the address scope
// gives it (nil: the factor's own scope), measured at from ("" for the
// address itself), and its undetermined factors.
func (d *discovery) collect(r *search.Result, scope func(semantics.Factor) string, from string) {
	und := map[string]bool{}
	for _, u := range r.Undetermined {
		und[u.Name] = true
	}
	for _, f := range r.Factors {
		addr := f.Scope
		if scope != nil {
			addr = scope(f)
		}
		f.Scope = addr
		preferFirstOfTies(&f)
		if und[f.Name] {
			for _, u := range r.Undetermined {
				if u.Name == f.Name {
					d.undetermined(u.Name, addr, "%s", u.Reason)
				}
			}
		}
		e := entry{addr: addr, f: f, und: und[f.Name]}
		if from != addr {
			e.from = from
		}
		d.entries = append(d.entries, e)
	}
}

// preferFirstOfTies: a factor the trace cannot decide, whose candidates
// tie with the winner (to 1 part in 10⁹: a difference of summation order,
// not of meaning), is written with the first of them in the catalogue's
// order of trying, the conventional value, rather than whichever rounding
// favoured.
func preferFirstOfTies(f *semantics.Factor) {
	if f.Decisive || len(f.Candidates) < 2 {
		return
	}
	e := entry{f: *f}
	win := e.scoreOf(f.Value)
	for _, c := range f.Candidates {
		if c.Score <= win*(1+1e-9) {
			if !sameValue(c.Value, f.Value) {
				f.Value = c.Value
				f.Margin = semantics.Margin(entry{f: *f}.marginAt(c.Value))
			}
			return
		}
	}
}

// declare adds a fact the structure forces.
func (d *discovery) declare(name, addr string, value any, why string) {
	d.entries = append(d.entries, entry{addr: addr, declared: true, f: semantics.Factor{
		Name: name, Scope: addr, Value: value, Decisive: true, Candidates: []semantics.Candidate{},
		Evidence: semantics.Evidence{Metric: "declared", Note: why}}})
}

// sampler: euler_sign and the timestep sinusoid's factors.
func (d *discovery) sampler(ctx context.Context, ph *Phase) error {
	if d.st.Run != "flow_euler" {
		return nil
	}
	d.progress("sampler", 0, 2)
	l, err := sampler.FindLoop(d.tr)
	if err != nil {
		d.undetermined("euler_sign", "sampler", "%v", err)
		return nil
	}
	fs, obj, err := sampler.EulerFactors(d.tr, l)
	if err != nil {
		d.undetermined("euler_sign", "sampler", "%v", err)
	} else {
		r, err := d.search(ctx, ph, fs, obj)
		if err != nil {
			return err
		}
		d.collect(r, func(semantics.Factor) string { return "sampler" }, "")
	}
	d.progress("sampler", 1, 2)
	if d.st.Conditioning == nil {
		return nil
	}
	fs, obj, err = sampler.TimestepFactors(d.tr, l)
	if err != nil {
		d.undetermined("timestep_scale", "conditioning", "%v", err)
		return nil
	}
	r, err := d.search(ctx, ph, fs, obj)
	if err != nil {
		return err
	}
	var kept []semantics.Factor
	for _, f := range r.Factors {
		if f.Name == "timestep_scale_rounded" {
			v := f.Value == true
			d.timestepRounded = &v
			continue
		}
		kept = append(kept, f)
	}
	r.Factors = kept
	d.collect(r, func(semantics.Factor) string { return "conditioning" }, "")
	d.progress("sampler", 2, 2)
	return nil
}

// blocks: each block's factors, and what its structure forces.
func (d *discovery) blocks(ctx context.Context, ph *Phase) error {
	n := len(d.st.Blocks)
	holes := map[string]bool{}
	for _, h := range d.doc.Holes() {
		holes[h.Address] = true
	}
	for i, blk := range d.st.Blocks {
		d.progress("blocks", i, n)
		addr := semantics.BlockAddress(i)
		if holes[addr] {
			continue // the structure's entry says why it was not read
		}
		fs, obj, err := factors.Block(d.tr, d.st, i)
		if err != nil {
			d.undetermined("blocks", addr, "%v", err)
			continue
		}
		r, err := d.search(ctx, ph, fs, obj)
		if err != nil {
			return err
		}
		d.collect(r, nil, addr)
		has := map[string]bool{}
		for _, f := range fs {
			has[f.Name] = true
		}
		if !has["mlp_glu"] {
			if roleWithSuffix(blk.Roles, "mlp_gate") {
				d.undetermined("mlp_glu", addr, "the block has a gate projection per stream; gated dual-stream MLPs are not scored")
			} else {
				d.declare("mlp_glu", addr, false, "no mlp_gate projection: the MLP is not gated")
			}
		}
		if !has["qk_norm"] {
			if roleWithSuffix(blk.Roles, "q_norm") {
				d.undetermined("qk_norm", addr, "the block's q/k norms were not scored")
			} else {
				d.declare("qk_norm", addr, "none", "no q/k norm roles: q and k are not normalised per head")
			}
		}
	}
	d.progress("blocks", n, n)
	return nil
}

func roleWithSuffix(roles map[string]semantics.Role, suffix string) bool {
	for name, r := range roles {
		if (name == suffix || strings.HasSuffix(name, "."+suffix)) && r.Module != "" {
			return true
		}
	}
	return false
}

// model: the factors outside the blocks.
func (d *discovery) model(ctx context.Context, ph *Phase) error {
	d.progress("model", 0, 1)
	fs, obj, err := factors.Model(d.tr, d.st)
	if err != nil {
		d.undetermined("model", "model", "%v", err)
		return nil
	}
	if len(fs) > 0 {
		r, err := d.search(ctx, ph, fs, obj)
		if err != nil {
			return err
		}
		for i := range r.Factors {
			if r.Factors[i].Name == factors.PooledAct {
				// The pooled path's activation: the schema's one embed_act
				// covers both paths; merging checks they agree.
				r.Factors[i].Name = "embed_act"
			}
		}
		for i := range r.Undetermined {
			if r.Undetermined[i].Name == factors.PooledAct {
				r.Undetermined[i].Name = "embed_act"
			}
		}
		d.collect(r, nil, "")
	}
	d.progress("model", 1, 1)
	return nil
}

// norms: one search per norm role.
func (d *discovery) norms(ctx context.Context, ph *Phase) error {
	roles, err := factors.Norms(d.tr, d.st)
	if err != nil {
		d.undetermined("norm_kind", "*", "%v", err)
		return nil
	}
	for i, nr := range roles {
		d.progress("norms", i, len(roles))
		r, err := d.search(ctx, ph, nr.Factors, nr.Objective)
		if err != nil {
			return err
		}
		if nr.PerHead {
			// A q/k norm's kind is its block's qk_norm.
			var kept []semantics.Factor
			for _, f := range r.Factors {
				if f.Name != "norm_kind" {
					kept = append(kept, f)
				}
			}
			r.Factors = kept
		}
		d.collect(r, nil, "")
		if !nr.Affine {
			d.declare("norm_offset", nr.Address, 0.0, "no γ: the offset does not apply")
		}
	}
	d.progress("norms", len(roles), len(roles))
	return nil
}

// positions: rope_axes, rope_theta and the tables' formats.
func (d *discovery) positions(ctx context.Context, ph *Phase) error {
	if d.st.Positions == nil {
		return nil
	}
	d.progress("positions", 0, 1)
	layout, jo := d.agreed("rope_layout"), d.agreed("joint_order")
	if layout == "" && !d.measured("rope_layout") {
		d.undetermined("rope_axes", "positions", "the RoPE layout is read from the blocks, and no block's was measured")
		return nil
	}
	if layout == "" {
		d.undetermined("rope_axes", "positions", "the blocks do not agree on a RoPE layout")
		return nil
	}
	pf, err := factors.Positions(d.tr, d.st, layout, jo)
	if err != nil {
		d.undetermined("rope_axes", "positions", "%v", err)
		return nil
	}
	o := d.opts.Search
	o.MaxJoint = max(o.MaxJoint, pf.MaxJoint)
	r, err := search.Run(ctx, pf.Factors, pf.Objective, nil, o)
	if err != nil {
		return err
	}
	ph.Searches++
	ph.Evaluations += r.Evaluations
	var kept []semantics.Factor
	for _, f := range r.Factors {
		switch f.Name {
		case factors.RopeFreqFormat:
			d.ropeFreq = fmt.Sprint(f.Value)
		case factors.RopeAngleFormat:
			d.ropeAngle = fmt.Sprint(f.Value)
		default:
			kept = append(kept, f)
		}
	}
	r.Factors = kept
	d.ropeOut = pf.TableFormat.String()
	d.collect(r, nil, "")
	d.progress("positions", 1, 1)
	return nil
}

// measured reports whether an entry of the factor exists.
func (d *discovery) measured(name string) bool {
	for _, e := range d.entries {
		if e.f.Name == name {
			return true
		}
	}
	return false
}

// agreed is the value the entries of a model-level factor agree on ("" when
// none was measured or they disagree).
func (d *discovery) agreed(name string) string {
	decisive := false
	for _, e := range d.entries {
		decisive = decisive || e.f.Name == name && e.f.Decisive
	}
	v := ""
	for _, e := range d.entries {
		if e.f.Name != name || decisive && !e.f.Decisive {
			continue
		}
		s := fmt.Sprint(e.f.Value)
		if v != "" && v != s {
			return ""
		}
		v = s
	}
	return v
}
