package plan

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// The evaluator's forward walks the program's nodes as the interpreter
// does (exec/program's interp.go: segments entered, input taps served when
// their module's segment starts or when the value is made inside it,
// output taps compared and forced as they are made, temps released after
// their last use, a movement op's input kept while its views live), but a
// node makes a slot, not a tensor: what the value is (its version, the
// units it depends on) and how to make it. A tensor is made only when a
// comparison that is not known yet needs it, or a node that runs reads it.

type slotKind uint8

const (
	slotEnv   slotKind = iota + 1 // a runner's tensor: a weight, an input, a constant, a step input
	slotNode                      // output out of node
	slotRef                       // the reference's tensor at a tap (teacher forcing)
	slotEuler                     // the Euler update of a flow_euler step: x + round(dt·v)
)

// slot is one version of a named value during one forward.
type slot struct {
	kind         slotKind
	ver          uint64
	deps, makers bits
	shape        []int
	format       precision.Format // once made or compared; 0 unknown

	envT exec.Tensor // slotEnv: owned by the runner
	node int         // slotNode: node index and output
	out  int
	in   []*slot // slotNode: the node's inputs (nil for an absent one); slotEuler: x, v
	sibs []*slot // slotNode: every output of the node
	ref  *refMeta
	orig *slot // slotRef: our value it replaced (later taps compare ours)
	step int   // slotEuler

	b *buf // the tensor, once made whole
	// sampleOK: the value is forced where it is made, so nothing reads it
	// but the comparisons, which may then score sampled rows (sample.go).
	sampleOK bool
	dead     bool // the interpreter has freed it
	kept     bool // held past its forward (a flow step's inputs to the update)
}

// buf is a backend tensor shared by the slots and the cache that hold it.
type buf struct {
	t        exec.Tensor
	refs     int
	cached   bool
	external bool // the runner's: never freed here
	parent   *buf // the tensor a view may share storage with
	bytes    int64
}

func (e *Evaluator) hold(b *buf) *buf {
	b.refs++
	return b
}

// drop releases one hold on b and frees it when nothing holds it.
func (e *Evaluator) drop(b *buf) {
	b.refs--
	e.settle(b)
}

func (e *Evaluator) settle(b *buf) {
	if b.refs > 0 || b.cached || b.external || b.t == nil {
		return
	}
	e.B.Free(b.t)
	b.t = nil
	if p := b.parent; p != nil {
		b.parent = nil
		e.drop(p)
	}
}

func newBuf(t exec.Tensor) *buf {
	return &buf{t: t, refs: 1, bytes: int64(exec.Numel(t.Shape())) * int64(max(1, formatBytes(t.Format())))}
}

func formatBytes(f precision.Format) int {
	switch f {
	case precision.BF16, precision.F16:
		return 2
	case precision.F64:
		return 8
	}
	return 4
}

// unmake drops a slot's tensor (it can be made again from its recipe).
func (e *Evaluator) unmake(s *slot) {
	if s.b != nil {
		e.drop(s.b)
		s.b = nil
	}
}

// runState is one Run: its records and the step's forward.
type runState struct {
	e     *Evaluator
	opts  runOpts
	recs  []Record
	done  int
	total int
}

// fwd is the state of one forward (one model call), as the interpreter's
// run is.
type fwd struct {
	rs     *runState
	e      *Evaluator
	p      *program.Program
	step   int
	env    map[string]exec.Tensor
	vals   map[string]*slot // temps and forced values
	envs   map[string]*slot // env values, made on first read
	steps  map[string]*slot // step inputs (latents, timestep)
	active []program.Segment
	root   map[string]string
	views  map[string]int
	dead   map[string]bool
	made   []*slot // every slot of this forward, settled at its end
}

func (rs *runState) newFwd(step int, env map[string]exec.Tensor) *fwd {
	return &fwd{rs: rs, e: rs.e, p: rs.e.r.P, step: step, env: env, vals: map[string]*slot{},
		envs: map[string]*slot{}, steps: map[string]*slot{}, root: map[string]string{}, views: map[string]int{},
		dead: map[string]bool{}}
}

// finish frees what the forward made but what is kept.
func (f *fwd) finish() {
	for _, s := range f.made {
		s.dead = true
		if !s.kept {
			f.e.unmake(s)
		}
	}
	f.made = nil
}

func (f *fwd) add(s *slot) *slot {
	f.made = append(f.made, s)
	return s
}

// get is the slot a node reading name sees now.
func (f *fwd) get(name string) (*slot, error) {
	if s, ok := f.vals[name]; ok {
		return s, nil
	}
	if s, ok := f.envs[name]; ok {
		return s, nil
	}
	v, ok := f.p.Values[name]
	if !ok || v.Kind == program.Temp {
		return nil, fmt.Errorf("value %q is not available (a missing input or weight)", name)
	}
	if v.Kind == program.StepInput {
		if s, ok := f.steps[v.Source]; ok {
			return s, nil
		}
		return nil, fmt.Errorf("program: step input %q (%s) is not in the environment", name, v.Source)
	}
	t, ok := f.env[name]
	if !ok || t == nil {
		return nil, fmt.Errorf("program: %s %q (%s) is not in the environment", v.Kind, name, v.Source)
	}
	s := &slot{kind: slotEnv, ver: f.e.envVersion(v), shape: slices.Clone(t.Shape()), format: t.Format(), envT: t}
	f.envs[name] = s
	return s, nil
}

// forward walks every node once and returns the slots of the program's
// outputs.
func (f *fwd) forward() ([]*slot, error) {
	p := f.p
	for _, v := range p.Values {
		if v.Kind != program.Temp && v.Kind != program.StepInput {
			if t, ok := f.env[v.Name]; !ok || t == nil {
				return nil, fmt.Errorf("program: %s %q (%s) is not in the environment", v.Kind, v.Name, v.Source)
			}
		}
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if err := f.enter(i); err != nil {
			return nil, err
		}
		in := make([]*slot, len(n.In))
		for j, name := range n.In {
			if name == "" {
				continue
			}
			s, err := f.get(name)
			if err != nil {
				return nil, fmt.Errorf("program: node %d (%s %s): %w", i, n.Op, n.Role, err)
			}
			in[j] = s
		}
		outs := f.node(i, n, in)
		if f.e.opt.FreeRunning {
			// every value is ours and read again downstream: made now,
			// once, and freed after its last use as the interpreter
			// does; made on demand instead, a value freed after its last
			// reader ran would be made again, with its inputs, for each
			// later tap that needs it (a VAE's free run went quadratic)
			for _, o := range outs {
				if _, err := f.e.make(o, true); err != nil {
					return nil, fmt.Errorf("program: node %d (%s %s): %w", i, n.Op, n.Role, err)
				}
			}
		}
		for j, name := range n.Out {
			f.vals[name] = outs[j]
			if n.Op.Views() {
				if src := n.In[0]; p.Values[src].Kind == program.Temp {
					rt := f.rootOf(src)
					f.root[name] = rt
					f.views[rt]++
				}
			}
		}
		for _, name := range n.Out {
			if err := f.madeValue(name); err != nil {
				return nil, err
			}
		}
		f.release(i, n)
		f.leave(i + 1)
		f.rs.done++
		if pr := f.e.opt.Progress; pr != nil {
			pr(f.rs.done, f.rs.total)
		}
	}
	outs := make([]*slot, len(p.Outputs))
	for i, name := range p.Outputs {
		s, err := f.get(name)
		if err != nil {
			return nil, err
		}
		outs[i] = s
	}
	return outs, nil
}

// node makes the output slots of node i: versions from the node's key
// and its inputs' versions, the units they depend on, and which units
// made them (a movement op's input's makers, else the node's own unit).
func (f *fwd) node(i int, n *program.Node, in []*slot) []*slot {
	var buf [8]byte
	h := fnv.New64a()
	binary.LittleEndian.PutUint64(buf[:], f.e.nodeKey[i])
	h.Write(buf[:])
	var deps, makers bits
	for _, s := range in {
		if s == nil {
			h.Write([]byte{0})
			continue
		}
		binary.LittleEndian.PutUint64(buf[:], s.ver)
		h.Write(buf[:])
		deps.or(s.deps)
		if transparent(n.Op) {
			makers.or(s.makers)
		}
	}
	if u := f.e.nodeUnit[i]; u >= 0 {
		deps.set(u)
		makers = bits{}
		makers.set(u)
	}
	key := h.Sum64()
	outs := make([]*slot, len(n.Out))
	for j, name := range n.Out {
		outs[j] = f.add(&slot{kind: slotNode, ver: (key + uint64(j)*0x9E3779B97F4A7C15) &^ (1 << 63), deps: deps,
			makers: makers, shape: f.p.Values[name].Shape, node: i, out: j, in: in})
	}
	for _, s := range outs {
		s.sibs = outs
	}
	return outs
}

func (f *fwd) rootOf(name string) string {
	if rt, ok := f.root[name]; ok {
		return rt
	}
	return name
}

// enter opens the segments that start at node i (outermost first) and
// serves their modules' input taps whose values exist already.
func (f *fwd) enter(i int) error {
	for _, st := range f.e.starting[i] {
		f.active = append(f.active, st.seg)
		for _, in := range st.inputs {
			if _, err := f.get(in.name); err != nil {
				continue // made inside the segment: served when made
			}
			if err := f.serve(in.name, in.tap); err != nil {
				return err
			}
		}
	}
	return nil
}

// segmentStart is a segment and the input taps of its module, each with
// its value, in the program's order of values.
type segmentStart struct {
	seg    program.Segment
	inputs []namedTap
}

type namedTap struct {
	name string
	tap  program.Tap
}

// segmentStarts indexes p's segments by the node they start at (those
// of no nodes left out), in p's order of segments: every node of every
// forward asks which segments begin there.
func segmentStarts(p *program.Program) map[int][]segmentStart {
	inputs := map[string][]namedTap{} // by module
	for _, name := range p.Order {
		for _, tp := range p.Values[name].Taps {
			if tp.In {
				inputs[tp.Module] = append(inputs[tp.Module], namedTap{name, tp})
			}
		}
	}
	out := map[int][]segmentStart{}
	for _, s := range p.Segments {
		if s.End > s.Start {
			out[s.Start] = append(out[s.Start], segmentStart{seg: s, inputs: inputs[s.Module]})
		}
	}
	return out
}

// leave closes the segments that end before node i.
func (f *fwd) leave(i int) {
	f.active = slices.DeleteFunc(f.active, func(s program.Segment) bool { return s.End <= i })
}

// madeValue serves a new value's taps: outputs now, inputs of an active
// segment's module now (inputs of a later segment when it starts).
func (f *fwd) madeValue(name string) error {
	taps := f.p.Values[name].Taps
	if s := f.vals[name]; f.rs.opts.sample > 0 && s.kind == slotNode {
		s.sampleOK = f.forcedHere(name, taps)
	}
	for _, tp := range taps {
		if !tp.In {
			if err := f.serve(name, tp); err != nil {
				return err
			}
			continue
		}
		for _, s := range f.active {
			if s.Module == tp.Module {
				if err := f.serve(name, tp); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// forcedHere says whether a value just made is forced before anything
// reads it: one of the taps served as it is made holds the reference's
// values.
func (f *fwd) forcedHere(name string, taps []program.Tap) bool {
	shape := f.p.Values[name].Shape
	for _, tp := range taps {
		here := !tp.In
		for _, s := range f.active {
			here = here || tp.In && s.Module == tp.Module
		}
		if here && f.e.refFor(tp.Key(f.step), shape) != nil {
			return true
		}
	}
	return false
}

// serve compares the value at a tap and, teacher forced, replaces it by
// the reference's tensor for what reads it next (the interpreter's
// Override; free running, its Observe).
func (f *fwd) serve(name string, tp program.Tap) error {
	cur, err := f.get(name)
	if err != nil {
		return err
	}
	ours := cur
	if cur.orig != nil {
		ours = cur.orig
	}
	key := tp.Key(f.step)
	m := f.e.refFor(key, cur.shape)
	if m == nil {
		f.e.noteUnmatched(key, cur.shape)
		return nil
	}
	if err := f.rs.compare(f.step, key, tp.Module, tp.Port, ours, m); err != nil {
		return fmt.Errorf("program: override %s: %w", key, err)
	}
	if f.e.opt.FreeRunning {
		return nil
	}
	forced := f.add(&slot{kind: slotRef, ver: refVersion(key, ours.format, cur.shape), shape: cur.shape,
		format: ours.format, ref: m, orig: ours})
	f.vals[name] = forced
	if ours.kind != slotEnv && !ours.kept {
		// Nothing reads our value any more but comparisons at its later
		// taps, which know its version.
		f.e.unmake(ours)
	}
	return nil
}

// refVersion names the reference's tensor at key uploaded in format f
// and shape.
func refVersion(key string, f precision.Format, shape []int) uint64 {
	return hashString(fmt.Sprintf("ref:%s|%s|%v", key, f, shape))
}

// release frees the temps whose last use is node i, and node i's outputs
// nothing reads; a temp that views another keeps it alive until the view
// is freed.
func (f *fwd) release(i int, n *program.Node) {
	p := f.p
	var done []string
	for _, name := range n.In {
		if name != "" && p.Values[name].Kind == program.Temp {
			if last, ok := p.LastUse(name); ok && last == i {
				done = append(done, name)
			}
		}
	}
	for _, name := range n.Out {
		if _, used := p.LastUse(name); !used && !slices.Contains(p.Outputs, name) {
			done = append(done, name)
		}
	}
	for _, name := range done {
		if slices.Contains(p.Outputs, name) || f.dead[name] {
			continue
		}
		f.dead[name] = true
		if rt, isView := f.root[name]; isView {
			f.free(name)
			if f.views[rt]--; f.views[rt] == 0 && f.dead[rt] {
				f.free(rt)
			}
			continue
		}
		if f.views[name] == 0 {
			f.free(name)
		}
	}
}

func (f *fwd) free(name string) {
	s, ok := f.vals[name]
	if !ok {
		return
	}
	delete(f.vals, name)
	s.dead = true
	if !s.kept {
		f.e.unmake(s)
	}
}

// forward runs a forward run's one model call.
func (rs *runState) forward() error {
	e := rs.e
	env, done, err := e.r.StepEnv(0, nil)
	if err != nil {
		return err
	}
	defer done()
	f := rs.newFwd(0, env)
	defer f.finish()
	outs, err := f.forward()
	if err != nil {
		return err
	}
	if e.opt.FreeRunning { // teacher forced, the output is the reference's own
		name := e.outputName()
		if m := e.refFor("output/"+name, outs[0].shape); m != nil {
			return rs.compare(0, "output/"+name, "", name, outs[0], m)
		}
	}
	return nil
}

// flowRun makes the model calls and Euler updates of a flow_euler run.
// Teacher forced, each update reads the reference's latents of its step
// and (through the forced model output) its velocity; only the last
// update's result is compared (at the next step's latents, or the run's
// output). A run of several latents updates each with its own output.
func (rs *runState) flowRun() error {
	e := rs.e
	total := e.r.Steps()
	steps := e.modelCalls()
	pr := &e.r.Doc.Precision
	timestep, err := program.SpecFor(pr, "cast", roleTimestep)
	if err != nil {
		return err
	}
	scale, err1 := program.SpecFor(pr, "mul", roleScale)
	update, err2 := program.SpecFor(pr, "add", roleUpdate)
	if err := firstErr(err1, err2); err != nil {
		return err
	}
	castU := e.units.id(Unit{Op: "cast", Role: roleTimestep})
	scaleU, updateU := e.units.id(Unit{Op: "mul", Role: roleScale}), e.units.id(Unit{Op: "add", Role: roleUpdate})
	lats := e.r.AllLatents()
	xs := make([]*slot, len(lats))
	ports := make([]string, len(lats))
	for k, lat := range lats {
		if lat == nil {
			return fmt.Errorf("program: the latents' roles are not latents, latents.1, … in order")
		}
		init := "latents:initial"
		if k > 0 {
			init = fmt.Sprintf("latents.%d:initial", k)
		}
		xs[k] = &slot{kind: slotEnv, ver: hashString(init), shape: slices.Clone(lat.Shape()), format: lat.Format(), envT: lat}
		ports[k] = e.latentsPort(k)
	}
	var carried []*slot // the last updates' inputs, held until they are made or dropped
	defer func() {
		for _, s := range carried {
			s.kept = false
			e.unmake(s)
		}
	}()
	for i := range steps {
		env, done, err := e.r.StepEnv(i, nil)
		if err != nil {
			return err
		}
		f := rs.newFwd(i, env)
		var td bits
		td.set(castU)
		for k, x := range xs {
			f.steps[semantics.LatentsRole(k)] = x
		}
		if ts := env[stepTimestepName(f.p)]; ts != nil {
			f.steps["timestep"] = &slot{kind: slotEnv, ver: hashString(fmt.Sprintf("timestep:%d|%s", i, timestep.Out)),
				deps: td, makers: td, shape: slices.Clone(ts.Shape()), format: ts.Format(), envT: ts}
		}
		if ts := env[program.StepNextTimestep]; ts != nil {
			f.steps["next_timestep"] = &slot{kind: slotEnv, ver: hashString(fmt.Sprintf("next_timestep:%d|%s", i, timestep.Out)),
				deps: td, makers: td, shape: slices.Clone(ts.Shape()), format: ts.Format(), envT: ts}
		}
		if ix := env[program.StepIndex]; ix != nil {
			// the call's index: no rule rounds it
			f.steps["index"] = &slot{kind: slotEnv, ver: hashString(fmt.Sprintf("index:%d", i)),
				shape: slices.Clone(ix.Shape()), format: ix.Format(), envT: ix}
		}
		outs, err := f.forward()
		if err == nil && len(outs) < len(xs) {
			err = fmt.Errorf("program: %d outputs for %d latents", len(outs), len(xs))
		}
		if err != nil {
			f.finish()
			done()
			return err
		}
		nexts := make([]*slot, len(xs))
		var held []*slot
		for k, x := range xs {
			lat := lats[k]
			xu := x
			if !e.opt.FreeRunning {
				key := program.Tap{Module: e.model.Module, Port: ports[k]}.Key(i)
				if m := e.refFor(key, lat.Shape()); m != nil {
					xu = &slot{kind: slotRef, ver: refVersion(key, lat.Format(), lat.Shape()), shape: slices.Clone(lat.Shape()),
						format: lat.Format(), ref: m}
				}
			}
			v := outs[k]
			var deps, makers bits
			deps.set(scaleU)
			deps.set(updateU)
			makers.set(updateU)
			nexts[k] = &slot{kind: slotEuler, ver: hashString(fmt.Sprintf("euler:%d|%s|%s|%x|%x", i, scale, update, xu.ver, v.ver)),
				deps: deps, makers: makers, shape: slices.Clone(lat.Shape()), in: []*slot{xu, v}, step: i}
			// The update reads this step's values after its forward has gone:
			// one that is not the reference's is made while its inputs live.
			if v.kind == slotNode {
				if _, err := e.make(v, true); err != nil {
					f.finish()
					done()
					return err
				}
			}
			held = append(held, xu, v)
		}
		for _, s := range carried {
			s.kept = false
			e.unmake(s)
		}
		carried = held
		for _, s := range held {
			s.kept = true
		}
		f.finish()
		done()
		if i+1 < steps {
			xs = nexts
			continue
		}
		for k, next := range nexts {
			name := e.outputNameOf(k)
			key := "output/" + name
			module, port := "", name
			if i+1 < total {
				key = program.Tap{Module: e.model.Module, Port: ports[k]}.Key(i + 1)
				module, port = e.model.Module, ports[k]
			}
			if m := e.refFor(key, next.shape); m != nil && err == nil {
				err = rs.compare(i+1, key, module, port, next, m)
			}
			e.unmake(next)
		}
		return err
	}
	return nil
}

// latentsPort is the model's argument port the structure names for the
// k-th latents ("" where it names none: the update is not teacher forced).
func (e *Evaluator) latentsPort(k int) string {
	return e.model.Inputs[semantics.LatentsRole(k)]
}

// outputNameOf is the request output of the k-th latents.
func (e *Evaluator) outputNameOf(k int) string {
	if outs := e.r.Doc.Structure.Outputs; k > 0 && k < len(outs) {
		return outs[k].Name
	}
	return e.outputName()
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stepTimestepName is the name of the program's timestep step input.
func stepTimestepName(p *program.Program) string {
	for _, v := range p.ValuesOf(program.StepInput) {
		if v.Source == "timestep" {
			return v.Name
		}
	}
	return ""
}

// make makes a slot's whole tensor (once; the slot holds it until it is
// freed or unmade). input says a node reads it: such a tensor is worth
// keeping in the cache for the next run.
func (e *Evaluator) make(s *slot, input bool) (*buf, error) {
	if s.b != nil {
		return s.b, nil
	}
	switch s.kind {
	case slotEnv:
		s.b = &buf{t: s.envT, refs: 1, external: true}
	case slotRef:
		if b := e.cache.get(s.ver); b != nil {
			s.b = e.hold(b)
			break
		}
		data, done, err := e.refData(s.ref)
		if err != nil {
			return nil, err
		}
		t, err := e.B.Upload(data, s.shape, s.format)
		done()
		if err != nil {
			return nil, err
		}
		s.b = newBuf(t)
		if input {
			e.cache.put(e, s.ver, s.b)
		}
	case slotNode:
		if err := e.runNode(s, input); err != nil {
			return nil, err
		}
	case slotEuler:
		x, err := e.make(s.in[0], true)
		if err != nil {
			return nil, err
		}
		v, err := e.make(s.in[1], true)
		if err != nil {
			return nil, err
		}
		t, err := e.r.Update(s.step, x.t, v.t)
		if err != nil {
			return nil, err
		}
		s.b = newBuf(t)
	}
	s.format = s.b.t.Format()
	return s.b, nil
}

// runNode runs a node slot's node (or finds its results in the cache) and
// gives every output slot of it its tensor.
func (e *Evaluator) runNode(s *slot, input bool) error {
	n := &e.r.P.Nodes[s.node]
	views := n.Op.Views()
	if !views {
		hit := true
		for _, o := range s.sibs {
			if o.b == nil && e.cache.peek(o.ver) == nil {
				hit = false
			}
		}
		if hit {
			for _, o := range s.sibs {
				if o.b == nil {
					o.b = e.hold(e.cache.get(o.ver))
					o.format = o.b.t.Format()
				}
			}
			return nil
		}
	}
	ts := make([]exec.Tensor, len(s.in))
	var made []*slot
	for j, in := range s.in {
		if in == nil {
			continue
		}
		wasMade := in.b != nil
		b, err := e.make(in, true)
		if err != nil {
			return err
		}
		if !wasMade {
			made = append(made, in)
		}
		ts[j] = b.t
	}
	outs, err := program.RunNode(e.B, n, ts)
	for _, in := range made {
		if in.dead && !in.kept {
			defer e.unmake(in) // after the views below hold what they view
		}
	}
	if err != nil {
		return fmt.Errorf("program: node %d (%s %s): %w", s.node, n.Op, n.Role, err)
	}
	if len(outs) != len(s.sibs) {
		for _, t := range outs {
			e.B.Free(t)
		}
		return fmt.Errorf("program: node %d (%s %s): %d results, want %d", s.node, n.Op, n.Role, len(outs), len(s.sibs))
	}
	for j, o := range s.sibs {
		b := newBuf(outs[j])
		if views && s.in[0] != nil {
			b.parent = e.hold(s.in[0].b)
		}
		if o.b != nil { // made before, alone: keep that one
			e.B.Free(outs[j])
			if b.parent != nil {
				e.drop(b.parent)
			}
			continue
		}
		o.b, o.format = b, outs[j].Format()
		if input && !views {
			e.cache.put(e, o.ver, b)
		}
	}
	return nil
}
