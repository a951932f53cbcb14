package plan

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
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
	// Keep keeps both sides' values of every boundary in the records
	// (of the records KeepIf accepts, when it is set).
	Keep   bool
	KeepIf func(*Record) bool
	// CacheBytes bounds what the evaluator keeps on the backend from one
	// run to the next: results of nodes that other nodes read unforced,
	// and reference tensors uploaded as a node's input (0: 64 MiB; < 0:
	// nothing, for an evaluator that runs once).
	CacheBytes int64
	// Partial builds the program around the document's undetermined
	// blocks (program.BuildPartial), for a teacher-forced check.
	Partial bool
	// Progress, when set, is told after each node a Run reaches how many
	// of the run's nodes (the program's, once per model call) it has.
	Progress func(done, total int)
}

// defaultCacheBytes is Options.CacheBytes' default: a few of a real-width
// block's activations, so that a search's memory is bounded by the block
// in hand and not by the trace.
const defaultCacheBytes = 64 << 20

// Record is one boundary of one run: our value against the reference's.
type Record struct {
	Key          string // trace key: s<step>/<module>/<port>, or output/<name>
	Step         int
	Module, Port string
	Shape        []int
	Format       precision.Format // the reference's stored format
	OursFormat   precision.Format // ours
	N, Exact     int              // values, and those bit-exact in Format
	SumD2, SumR2 float64          // Σ(ours−ref)², Σref² over ordinary pairs (precision.Sums); SumD2 +Inf when Mismatched > 0
	// Masked counts the pairs mask-sized on both sides with one sign, left
	// out of the sums; Mismatched the pairs that cannot match (a mask or a
	// NaN on one side only), which fail the record.
	Masked, Mismatched int
	// Rows and OfRows: a record scored on sampled rows compares Rows of
	// the boundary's OfRows rows (N = Rows × the last axis); both are 0
	// for a record of every value.
	Rows, OfRows int
	// OpClass is the class of the op that made the value (looking through
	// movement ops and casts; classes joined by "+" when a concat joins
	// several; ClassCopy when none did).
	OpClass string
	// DependsOn: the classes of every op the value depends on, given the
	// reference's values at earlier boundaries, joined by "+".
	DependsOn string
	// rows: a sampled record's rows, in the order compared.
	rows []int
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

// RelRMS is sqrt(SumD2 / SumR2) (precision.RelRMSFromSums): the rel-RMS
// of the ordinary pairs, +Inf when any pair mismatches.
func (r *Record) RelRMS() float64 { return precision.RelRMSFromSums(r.SumD2, r.SumR2) }

// Sampled reports whether the record compares sampled rows only.
func (r *Record) Sampled() bool { return r.OfRows > 0 }

// Evaluator runs a document's program on a reference trace under given
// precision plans and compares every captured boundary. Teacher forced
// (the default), every boundary the trace holds is replaced by the
// reference's tensor once compared, so each boundary is computed from the
// reference's own values and a rounding choice is scored only where it
// acts.
//
// It runs the program itself, lazily, as the interpreter would (the same
// boundaries compared and forced at the same points, forward.go): every
// value is known by a version (how it was computed: a node's spec and its
// inputs' versions, or which reference tensor), a comparison is kept by
// the boundary and the version compared, and a node runs only when a
// comparison it feeds is not known yet. So a run under a plan that changes
// one op class runs that class's nodes (and the unforced nodes after
// them) and nothing else; the reference's tensors are read from the trace
// when a node that runs needs them, and their mapped pages handed back
// after.
type Evaluator struct {
	B   exec.Backend
	Ref *trace.Trace
	Doc *semantics.Document
	opt Options

	r     *program.Runner
	cur   string // JSON of the plan the runner has
	flow  bool
	model semantics.Boundary

	refs map[string]*refMeta
	// unmatched: keys the program tapped where the reference holds real
	// values of another shape (not compared), with our value's shape.
	unmatched map[string][]int
	cmps      map[cmpKey]cmpResult
	cache     *tensorCache
	units     *unitTable

	// per program
	nodeKey  []uint64
	nodeUnit []int // unit id of node i, -1 for none
	starting map[int][]segmentStart
	// the last program's nodes and the hash of each but its spec: a plan
	// changes specs, seldom anything else, and formatting every node's
	// attributes for every candidate's program was a third of its run
	prevNodes  []program.Node
	prevShapes []uint64
	envVer     map[string]uint64 // versions of the constants (weights and inputs never change)
}

// refMeta is what is known of the reference's tensor at a key: where it
// is, its format and our layout of it.
type refMeta struct {
	key    string
	info   trace.Info
	format precision.Format
	shape  []int // ours
}

// cmpKey names one comparison: a boundary, the version of our value
// there, and whether it compared sampled rows.
type cmpKey struct {
	key     string
	ver     uint64
	sampled bool
}

type cmpResult struct {
	n, exact     int
	s            precision.Sums
	format       precision.Format // our value's
	rows, ofRows int
	sampled      []int // the rows, when sampled
	ours, refv   []float32
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
	// The weights and inputs are on the backend now: their pages of the
	// mapping are not read again.
	for _, keys := range []map[string]string{ref.Manifest.Params, ref.Manifest.Inputs} {
		for _, k := range keys {
			if t, err := ref.Tensor(k); err == nil {
				t.Release()
			}
		}
	}
	limit := o.CacheBytes
	if limit == 0 {
		limit = defaultCacheBytes
	}
	e := &Evaluator{B: b, Ref: ref, Doc: doc, opt: o, r: r, flow: doc.Structure.Run == "flow_euler",
		model: doc.Structure.Model, refs: map[string]*refMeta{}, cmps: map[cmpKey]cmpResult{},
		cache: newTensorCache(limit), units: newUnitTable()}
	cur, _ := json.Marshal(doc.Precision)
	e.cur = string(cur)
	e.program()
	return e, nil
}

// Close frees what the evaluator holds.
func (e *Evaluator) Close() {
	e.cache.clear(e)
	e.r.Close()
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
	e.starting = segmentStarts(p)
	shapes := make([]uint64, len(p.Nodes))
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if i < len(e.prevNodes) && sameBut(&e.prevNodes[i], n) {
			shapes[i] = e.prevShapes[i]
		} else {
			h := fnv.New64a()
			fmt.Fprintf(h, "%s|%s|%s|%v", n.Op, n.Role, strings.Join(n.Out, ","), n.Attrs)
			shapes[i] = h.Sum64()
		}
		h := fnv.New64a()
		binary.Write(h, binary.LittleEndian, shapes[i])
		binary.Write(h, binary.LittleEndian, [3]int64{int64(n.Spec.Out), int64(n.Spec.Round), int64(n.Spec.Math)})
		e.nodeKey[i] = h.Sum64() &^ (1 << 63)
		e.nodeUnit[i] = -1
		if u, ok := nodeUnit(n); ok {
			e.nodeUnit[i] = e.units.id(u)
		}
	}
	e.prevNodes, e.prevShapes = p.Nodes, shapes
	e.envVer = map[string]uint64{}
	for _, v := range p.ValuesOf(program.Const) {
		// A plan may build a constant anew (another format, other values):
		// its version is what it holds.
		h := fnv.New64a()
		fmt.Fprintf(h, "const:%s|%s|%v|", v.Name, v.Format, v.Shape)
		binary.Write(h, binary.LittleEndian, v.Data)
		e.envVer[v.Name] = h.Sum64() &^ (1 << 63)
	}
}

// sameBut reports whether nodes a and b are the same node but perhaps
// for their specs.
func sameBut(a, b *program.Node) bool {
	return a.Op == b.Op && a.Role == b.Role && slices.Equal(a.Out, b.Out) && slices.Equal(a.In, b.In) && reflect.DeepEqual(a.Attrs, b.Attrs)
}

// envVersion is the version of a weight, an input or a constant.
func (e *Evaluator) envVersion(v *program.Value) uint64 {
	if ver, ok := e.envVer[v.Name]; ok {
		return ver
	}
	return hashString(fmt.Sprintf("env:%s|%s", v.Kind, v.Name))
}

// runOpts are one run's settings beyond the evaluator's.
type runOpts struct {
	// sample > 0 scores the nodes that compute each row on their own
	// (sample.go) on that many rows where their boundaries hold more than
	// twice as many.
	sample int
	// stop, when set, is asked after each record whether to give up on
	// the run (partial false): the run then returns errStopped and the
	// records so far. Partial true asks, without counting it, whether a
	// record that ended with the values so far would (a comparison on
	// sampled rows asks after each block).
	stop func(r *Record, partial bool) bool
}

// errStopped: a run's stop said to give up.
var errStopped = errors.New("plan: run stopped")

// Run runs the program under plan pr and returns every compared boundary
// in execution order.
func (e *Evaluator) Run(pr semantics.Precision) ([]Record, error) {
	return e.run(pr, runOpts{})
}

func (e *Evaluator) run(pr semantics.Precision, ro runOpts) ([]Record, error) {
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
	rs := &runState{e: e, opts: ro, total: len(e.r.P.Nodes) * e.modelCalls()}
	if e.opt.FreeRunning {
		rs.opts.sample = 0
	}
	if !e.flow {
		err = rs.forward()
	} else {
		err = rs.flowRun()
	}
	return rs.recs, err
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

func (e *Evaluator) outputName() string {
	if len(e.Doc.Structure.Outputs) > 0 {
		return e.Doc.Structure.Outputs[0].Name
	}
	return "latents"
}

// refFor says whether the reference holds real values at key that can be
// laid out as shape (nil when it does not).
func (e *Evaluator) refFor(key string, shape []int) *refMeta {
	if m, ok := e.refs[key]; ok {
		if m == nil || exec.Numel(m.shape) != exec.Numel(shape) {
			return nil
		}
		return m
	}
	e.refs[key] = nil
	info, err := e.Ref.Info(key)
	if err != nil || info.DType.Components() != 1 {
		return nil
	}
	if _, ok := program.Relayout(nil, info.Shape, shape); !ok {
		return nil
	}
	f := precision.F32
	switch info.DType {
	case trace.BFloat16:
		f = precision.BF16
	case trace.Float16:
		f = precision.F16
	}
	m := &refMeta{key: key, info: info, format: f, shape: slices.Clone(shape)}
	e.refs[key] = m
	return m
}

// refData reads the reference's values at m in our layout: a view of the
// mapping where the trace stores them as f32 in our layout, else a copy.
// done hands the mapped pages back; the values must not be used after it
// unless they were copied.
func (e *Evaluator) refData(m *refMeta) (data []float32, done func(), err error) {
	t, err := e.Ref.Tensor(m.key)
	if err != nil {
		return nil, nil, fmt.Errorf("reference %s: %w", m.key, err)
	}
	v, err := program.RefFloat32(t)
	if err != nil {
		t.Release()
		return nil, nil, fmt.Errorf("reference %s: %w", m.key, err)
	}
	if !program.SameLayout(m.info.Shape, m.shape) {
		v, _ = program.Relayout(v, m.info.Shape, m.shape)
	}
	return v, t.Release, nil
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
