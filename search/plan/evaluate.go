package plan

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Options configure an Evaluator.
type Options struct {
	// Steps is how many model calls of a flow_euler run to make (0: all).
	Steps int
	// FreeRunning compares without forcing: every boundary is our own
	// run's value. Otherwise every captured boundary is forced to the
	// reference's tensor once compared (teacher forcing at every boundary).
	FreeRunning bool
	// Keep keeps both sides' values of every boundary in the records.
	Keep bool
	// MemoValues bounds the values the node memo keeps (0: 1<<27, 512 MiB
	// of f32); past it the memo starts over.
	MemoValues int
	// Partial builds the program around the document's undetermined
	// blocks (program.BuildPartial), for a teacher-forced check.
	Partial bool
	// Progress, when set, is told after each node a Run runs how many of
	// the run's nodes (the program's, once per model call) have run.
	Progress func(done, total int)
}

// Record is one boundary of one run: our value against the reference's.
type Record struct {
	Key          string // trace key: s<step>/<module>/<port>, or output/<name>
	Step         int
	Module, Port string
	Shape        []int
	Format       precision.Format // the reference's stored format
	OursFormat   precision.Format // ours
	N, Exact     int              // values, and those bit-exact in Format
	SumD2, SumR2 float64          // Σ(ours−ref)², Σref² over finite pairs; SumD2 +Inf on a non-finite mismatch
	// OpClass is the class of the op that made the value (looking through
	// movement ops and casts; classes joined by "+" when a concat joins
	// several; ClassCopy when none did).
	OpClass string
	// DependsOn: the classes of every op the value depends on, given the
	// reference's values at earlier boundaries, joined by "+".
	DependsOn string
	// cone: the units whose precision the value depends on, given the
	// reference's values at every earlier boundary (or, free running, all
	// earlier units).
	cone bits
	// Ours and Ref are the values (Options.Keep).
	Ours, Ref []float32
}

// Boundary is the record's "<module>/<port>" (or "output/<name>").
func (r *Record) Boundary() string {
	if r.Module == "" {
		return r.Key
	}
	return r.Module + "/" + r.Port
}

// ExactFraction is Exact / N (1 for no values).
func (r *Record) ExactFraction() float64 {
	if r.N == 0 {
		return 1
	}
	return float64(r.Exact) / float64(r.N)
}

// RelRMS is sqrt(SumD2 / SumR2) (precision.RelRMSFromSums).
func (r *Record) RelRMS() float64 { return precision.RelRMSFromSums(r.SumD2, r.SumR2) }

// Evaluator runs a document's program on a reference trace under given
// precision plans and compares every captured boundary. Teacher forced
// (the default), every boundary the trace holds is replaced by the
// reference's tensor once compared, so each boundary is computed from the
// reference's own values and a rounding choice is scored only where it
// acts. Runs are memoised node by node: a node whose spec and inputs
// (identified by how they were computed) are unchanged is not recomputed,
// so scoring a change to one op class costs only that class's nodes.
type Evaluator struct {
	B   exec.Backend
	Ref *trace.Trace
	Doc *semantics.Document
	opt Options

	r     *program.Runner
	cur   string // JSON of the plan the runner has
	flow  bool
	model semantics.Boundary

	refs map[string]*refValue
	// unmatched: keys the program tapped where the reference holds real
	// values of another shape (not compared), with our value's shape.
	unmatched map[string][]int
	memo      map[uint64][]exec.Tensor
	held      int // values in memo
	cmps      map[string]cmpResult
	units     *unitTable

	// per program
	nodeKey  []uint64
	nodeUnit []int // unit id of node i, -1 for none
	// per step
	info   map[exec.Tensor]tinfo
	orig   map[exec.Tensor]exec.Tensor // a forced tensor → our value it replaced
	nextID uint64
	recs   []Record
	err    error
}

// tinfo is what is known of a tensor: a version (equal versions hold
// equal values), the units it depends on and the units that made it.
type tinfo struct {
	ver          uint64
	deps, makers bits
}

type refValue struct {
	data   []float32
	format precision.Format
	shape  []int
}

type cmpResult struct {
	n, exact   int
	sd, sr     float64
	ours, refv []float32
}

// NewEvaluator loads doc's program with the trace's weights and inputs.
func NewEvaluator(b exec.Backend, ref *trace.Trace, doc *semantics.Document, o Options) (*Evaluator, error) {
	newRunner := program.NewRunner
	if o.Partial {
		if o.FreeRunning {
			return nil, fmt.Errorf("plan: a partial program runs teacher forced only")
		}
		newRunner = program.NewPartialRunner
	}
	r, err := newRunner(b, doc, program.TraceParams(ref), program.TraceInputs(ref))
	if err != nil {
		return nil, err
	}
	e := &Evaluator{B: b, Ref: ref, Doc: doc, opt: o, r: r, flow: doc.Structure.Run == "flow_euler",
		model: doc.Structure.Model, refs: map[string]*refValue{}, memo: map[uint64][]exec.Tensor{},
		cmps: map[string]cmpResult{}, units: newUnitTable()}
	cur, _ := json.Marshal(doc.Precision)
	e.cur = string(cur)
	e.program()
	return e, nil
}

// Close frees what the evaluator holds.
func (e *Evaluator) Close() {
	e.dropMemo()
	e.memo = nil
	e.r.Close()
}

func (e *Evaluator) dropMemo() {
	for _, ts := range e.memo {
		for _, t := range ts {
			e.B.Free(t)
		}
	}
	e.memo, e.held = map[uint64][]exec.Tensor{}, 0
}

// Units lists the units of the evaluator's program (nodes that take a
// precision, the sampler's operations).
func (e *Evaluator) Units() []Unit { return unitsOf(e.r.P, e.flow) }

// Program is the program of the last plan run.
func (e *Evaluator) Program() *program.Program { return e.r.P }

// program indexes the runner's current program.
func (e *Evaluator) program() {
	p := e.r.P
	e.nodeKey = make([]uint64, len(p.Nodes))
	e.nodeUnit = make([]int, len(p.Nodes))
	for i := range p.Nodes {
		n := &p.Nodes[i]
		h := fnv.New64a()
		fmt.Fprintf(h, "%s|%s|%s|%s|%v", n.Op, n.Role, strings.Join(n.Out, ","), n.Spec, n.Attrs)
		e.nodeKey[i] = h.Sum64()
		e.nodeUnit[i] = -1
		if u, ok := nodeUnit(n); ok {
			e.nodeUnit[i] = e.units.id(u)
		}
	}
}

// Run runs the program under plan pr and returns every compared boundary
// in execution order.
func (e *Evaluator) Run(pr semantics.Precision) ([]Record, error) {
	js, err := json.Marshal(pr)
	if err != nil {
		return nil, err
	}
	if string(js) != e.cur {
		if err := e.r.SetPrecision(pr); err != nil {
			return nil, err
		}
		e.cur = string(js)
		e.program()
	}
	e.recs = nil
	e.err = nil
	hooks := program.Hooks{Run: e.runNode}
	if e.opt.Progress != nil {
		done, total := 0, len(e.r.P.Nodes)*e.modelCalls()
		hooks.Run = func(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
			outs, err := e.runNode(step, i, n, in)
			if err == nil {
				done++
				e.opt.Progress(done, total)
			}
			return outs, err
		}
	}
	if e.opt.FreeRunning {
		hooks.Observe = e.observe
	} else {
		hooks.Override, hooks.OverrideOutputs = e.override, true
	}
	e.r.It.Hooks = hooks
	defer func() { e.r.It.Hooks = program.Hooks{} }()
	if !e.flow {
		e.resetStep()
		out, err := e.r.Run(nil)
		if err != nil {
			return nil, err
		}
		defer e.B.Free(out)
		if e.opt.FreeRunning { // teacher forced, the output is the reference's own
			name := e.outputName()
			if err := e.compare(0, "output/"+name, "", name, out); err != nil {
				return nil, err
			}
		}
		return e.recs, e.err
	}
	if err := e.runFlow(); err != nil {
		return nil, err
	}
	return e.recs, e.err
}

// modelCalls is how many forwards a Run makes.
func (e *Evaluator) modelCalls() int {
	if !e.flow {
		return 1
	}
	if e.opt.Steps > 0 {
		return min(e.r.Steps(), e.opt.Steps)
	}
	return e.r.Steps()
}

// runFlow makes the model calls and Euler updates of a flow_euler run.
func (e *Evaluator) runFlow() error {
	total := e.r.Steps()
	steps := e.modelCalls()
	latPort := e.model.Inputs["latents"]
	scale, update := e.units.id(Unit{Op: "mul", Role: roleScale}), e.units.id(Unit{Op: "add", Role: roleUpdate})
	x := e.r.Latents()
	var xInfo *tinfo
	for i := range steps {
		e.resetStep()
		if xInfo != nil {
			e.info[x] = *xInfo
		}
		outs, err := e.r.Forward(i, x)
		if err != nil {
			if x != e.r.Latents() {
				e.B.Free(x)
			}
			return err
		}
		// Teacher forced, the update reads the reference's latents of
		// this step and (through the forced model output) its velocity.
		xu := x
		var forced exec.Tensor
		if !e.opt.FreeRunning {
			like := e.r.Latents()
			if rv := e.refValue(program.Tap{Module: e.model.Module, Port: latPort}.Key(i), like.Shape()); rv != nil {
				if forced, err = e.B.Upload(rv.data, like.Shape(), like.Format()); err != nil {
					return err
				}
				xu = forced
			}
		}
		next, err := e.r.Update(i, xu, outs[0])
		for _, t := range outs {
			e.B.Free(t)
		}
		if forced != nil {
			e.B.Free(forced)
		}
		if x != e.r.Latents() {
			e.B.Free(x)
		}
		if err != nil {
			return err
		}
		var deps bits
		deps.set(scale)
		deps.set(update)
		var makers bits
		makers.set(update)
		ni := tinfo{ver: e.fresh(), deps: deps, makers: makers}
		if i+1 < steps {
			x, xInfo = next, &ni
			continue
		}
		key := "output/" + e.outputName()
		module, port := "", e.outputName()
		if i+1 < total {
			key = program.Tap{Module: e.model.Module, Port: latPort}.Key(i + 1)
			module, port = e.model.Module, latPort
		}
		e.info[next] = ni
		err = e.compare(i+1, key, module, port, next)
		e.B.Free(next)
		return err
	}
	return nil
}

func (e *Evaluator) outputName() string {
	if len(e.Doc.Structure.Outputs) > 0 {
		return e.Doc.Structure.Outputs[0].Name
	}
	return "latents"
}

func (e *Evaluator) resetStep() {
	e.info = map[exec.Tensor]tinfo{}
	e.orig = map[exec.Tensor]exec.Tensor{}
}

func (e *Evaluator) fresh() uint64 {
	e.nextID++
	return 1<<63 | e.nextID
}

// about returns what is known of input j of node n (or of a tensor seen
// at a tap when n is nil).
func (e *Evaluator) about(t exec.Tensor, name string) tinfo {
	if in, ok := e.info[t]; ok {
		return in
	}
	in := tinfo{ver: hashString("env:" + name)}
	if v, ok := e.r.P.Values[name]; ok && v.Kind == program.StepInput {
		in.ver = e.fresh()
		if v.Source == "timestep" {
			in.deps.set(e.units.id(Unit{Op: "cast", Role: roleTimestep}))
			in.makers = in.deps
		}
	} else if !ok || v.Kind == program.Temp {
		in.ver = e.fresh()
	}
	e.info[t] = in
	return in
}

// transparent ops move or copy values: the op class of their result is
// their input's, and they have no precision of their own.
func transparent(op program.Op) bool {
	switch op {
	case program.OpReshape, program.OpSlice, program.OpChunk, program.OpConcat, program.OpGather, program.OpCast,
		program.OpPermute:
		return true
	}
	return false
}

// runNode is the interpreter's Run hook: memoised execution with the
// version, dependencies and makers of every result.
func (e *Evaluator) runNode(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
	var buf [8]byte
	h := fnv.New64a()
	binary.LittleEndian.PutUint64(buf[:], e.nodeKey[i])
	h.Write(buf[:])
	var deps, makers bits
	for j, t := range in {
		if t == nil {
			h.Write([]byte{0})
			continue
		}
		ti := e.about(t, n.In[j])
		binary.LittleEndian.PutUint64(buf[:], ti.ver)
		h.Write(buf[:])
		deps.or(ti.deps)
		if transparent(n.Op) {
			makers.or(ti.makers)
		}
	}
	if u := e.nodeUnit[i]; u >= 0 {
		deps.set(u)
		makers = bits{}
		makers.set(u)
	}
	key := h.Sum64()
	memo := !e.opt.FreeRunning && !transparent(n.Op)
	var outs []exec.Tensor
	if cached, ok := e.memo[key]; memo && ok {
		for _, c := range cached {
			t, err := e.B.Cast(c, c.Format())
			if err != nil {
				for _, o := range outs {
					e.B.Free(o)
				}
				return nil, err
			}
			outs = append(outs, t)
		}
	} else {
		var err error
		if outs, err = program.RunNode(e.B, n, in); err != nil {
			return nil, err
		}
		if memo {
			limit := e.opt.MemoValues
			if limit <= 0 {
				limit = 1 << 27
			}
			n := 0
			for _, o := range outs {
				n += exec.Numel(o.Shape())
			}
			if e.held+n > limit {
				e.dropMemo()
			}
			e.held += n
			keep := make([]exec.Tensor, 0, len(outs))
			for _, o := range outs {
				c, err := e.B.Cast(o, o.Format())
				if err != nil {
					return nil, err
				}
				keep = append(keep, c)
			}
			e.memo[key] = keep
		}
	}
	for j, o := range outs {
		e.info[o] = tinfo{ver: key + uint64(j)*0x9E3779B97F4A7C15, deps: deps, makers: makers}
	}
	return outs, nil
}

// override is the interpreter's Override hook (teacher forcing): compare
// our value with the reference's, then hand the reference's tensor on.
func (e *Evaluator) override(step int, tp program.Tap, like exec.Tensor) (exec.Tensor, bool, error) {
	key := tp.Key(step)
	rv := e.refValue(key, like.Shape())
	if rv == nil {
		e.noteUnmatched(key, like.Shape())
		return nil, false, nil
	}
	ours := like
	if o, ok := e.orig[like]; ok {
		ours = o
	}
	e.tapInfo(ours, tp)
	if err := e.compare(step, key, tp.Module, tp.Port, ours); err != nil {
		return nil, false, err
	}
	t, err := e.B.Upload(rv.data, like.Shape(), like.Format())
	if err != nil {
		return nil, false, err
	}
	e.info[t] = tinfo{ver: hashString("ref:" + key + "|" + like.Format().String())}
	e.orig[t] = ours
	return t, true, nil
}

// observe is the interpreter's Observe hook (free running).
func (e *Evaluator) observe(step int, tp program.Tap, t exec.Tensor) error {
	key := tp.Key(step)
	if e.refValue(key, t.Shape()) == nil {
		e.noteUnmatched(key, t.Shape())
		return nil
	}
	e.tapInfo(t, tp)
	return e.compare(step, key, tp.Module, tp.Port, t)
}

// tapInfo registers what a tapped tensor made outside the program is: the
// timestep the runner casts.
func (e *Evaluator) tapInfo(t exec.Tensor, tp program.Tap) {
	if _, ok := e.info[t]; ok {
		return
	}
	in := tinfo{ver: e.fresh()}
	if tp.In && tp.Module == e.model.Module && tp.Port == e.model.Inputs["timestep"] && e.flow {
		in.deps.set(e.units.id(Unit{Op: "cast", Role: roleTimestep}))
		in.makers = in.deps
	}
	e.info[t] = in
}

// compare records our tensor t at key against the reference.
func (e *Evaluator) compare(step int, key, module, port string, t exec.Tensor) error {
	rv := e.refValue(key, t.Shape())
	if rv == nil {
		return nil
	}
	ti := e.info[t]
	ck := fmt.Sprintf("%s|%x", key, ti.ver)
	c, ok := e.cmps[ck]
	if !ok || e.opt.FreeRunning {
		ours, err := e.B.Download(t)
		if err != nil {
			return err
		}
		c = compareValues(ours, rv.data, rv.format)
		if e.opt.Keep {
			c.ours, c.refv = ours, rv.data
		}
		if !e.opt.FreeRunning && ti.ver&(1<<63) == 0 {
			e.cmps[ck] = c
		}
	}
	e.recs = append(e.recs, Record{Key: key, Step: step, Module: module, Port: port, Shape: slices.Clone(rv.shape),
		Format: rv.format, OursFormat: t.Format(), N: c.n, Exact: c.exact, SumD2: c.sd, SumR2: c.sr,
		OpClass: e.opClass(ti.makers), DependsOn: e.className(ti.deps), cone: ti.deps, Ours: c.ours, Ref: c.refv})
	return nil
}

// compareValues counts bit-exact pairs in format f and sums the squared
// differences and references (precision.RelRMS's convention for
// non-finite values).
func compareValues(ours, ref []float32, f precision.Format) cmpResult {
	c := cmpResult{n: len(ref)}
	for i, o := range ours {
		r := ref[i]
		if precision.BitExact(f, o, r) {
			c.exact++
		}
		a, b := float64(o), float64(r)
		if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
			if !(a == b || a != a && b != b) {
				c.sd = math.Inf(1)
			}
			continue
		}
		d := a - b
		c.sd += d * d
		c.sr += b * b
	}
	return c
}

// refValue reads (once) the reference's tensor at key when it holds real
// values laid out as shape; nil otherwise.
func (e *Evaluator) refValue(key string, shape []int) *refValue {
	if rv, ok := e.refs[key]; ok {
		if rv == nil || exec.Numel(rv.shape) != exec.Numel(shape) {
			return nil
		}
		return rv
	}
	e.refs[key] = nil
	info, err := e.Ref.Info(key)
	if err != nil || info.DType.Components() != 1 {
		return nil
	}
	if _, ok := program.Relayout(nil, info.Shape, shape); !ok {
		return nil
	}
	t, err := e.Ref.Tensor(key)
	if err != nil {
		e.fail(fmt.Errorf("reference %s: %w", key, err))
		return nil
	}
	v, err := t.Float32()
	if err != nil {
		e.fail(fmt.Errorf("reference %s: %w", key, err))
		return nil
	}
	f := precision.F32
	switch info.DType {
	case trace.BFloat16:
		f = precision.BF16
	case trace.Float16:
		f = precision.F16
	}
	data, _ := program.Relayout(slices.Clone(v), info.Shape, shape)
	rv := &refValue{data: data, format: f, shape: slices.Clone(shape)}
	e.refs[key] = rv
	return rv
}

// noteUnmatched records a tapped key whose reference tensor holds real
// values of a shape other than ours (so it is not compared).
func (e *Evaluator) noteUnmatched(key string, shape []int) {
	info, err := e.Ref.Info(key)
	if err != nil || info.DType.Components() != 1 {
		return
	}
	if e.unmatched == nil {
		e.unmatched = map[string][]int{}
	}
	if _, ok := e.unmatched[key]; !ok {
		e.unmatched[key] = slices.Clone(shape)
	}
}

// Unmatched are the keys the program tapped where the reference holds
// real values of another shape, so that they were not compared, with the
// shape of our value there.
func (e *Evaluator) Unmatched() map[string][]int { return e.unmatched }

func (e *Evaluator) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// ClassCopy is the op class of a value no op of the plan made: a request
// input, or the reference's own value moved, sliced or cast.
const ClassCopy = "copy"

// opClass names the classes of the makers of a value (ClassCopy for none).
func (e *Evaluator) opClass(makers bits) string {
	if c := e.className(makers); c != "" {
		return c
	}
	return ClassCopy
}

// className names the classes of a set of units, joined by "+".
func (e *Evaluator) className(makers bits) string {
	var cs []string
	for _, id := range makers.ids() {
		c := e.units.unit(id).Class()
		if !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	sort.Strings(cs)
	return strings.Join(cs, "+")
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64() &^ (1 << 63)
}

// unitTable interns units as small ids.
type unitTable struct {
	ids   map[Unit]int
	units []Unit
}

func newUnitTable() *unitTable { return &unitTable{ids: map[Unit]int{}} }

func (t *unitTable) id(u Unit) int {
	if id, ok := t.ids[u]; ok {
		return id
	}
	t.ids[u] = len(t.units)
	t.units = append(t.units, u)
	return len(t.units) - 1
}

func (t *unitTable) unit(id int) Unit { return t.units[id] }

// bits is a small set of unit ids.
type bits []uint64

func (b *bits) set(i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

func (b *bits) or(c bits) {
	if len(c) == 0 {
		return
	}
	if len(*b) < len(c) {
		nb := make(bits, len(c))
		copy(nb, *b)
		*b = nb
	} else {
		*b = slices.Clone(*b)
	}
	for i, w := range c {
		(*b)[i] |= w
	}
}

func (b bits) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b bits) intersects(c bits) bool {
	for i := range min(len(b), len(c)) {
		if b[i]&c[i] != 0 {
			return true
		}
	}
	return false
}

func (b bits) ids() []int {
	var out []int
	for i, w := range b {
		for j := range 64 {
			if w&(1<<j) != 0 {
				out = append(out, i*64+j)
			}
		}
	}
	return out
}
