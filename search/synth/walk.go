package synth

import (
	"fmt"
	"slices"
	"time"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// scope is what the glue search may build a call's values from: the
// call's arguments, its own parameters, and the results of its children
// so far, in creation order.
type scope struct {
	module string     // module path, with "#<ordinal>" from the second call on
	call   trace.Call // the call the scope explains
	vals   []*val
	// own: values made inside the scope (children's results), which the
	// attention search draws its operands from.
	own map[*val]bool
	arg map[*val]bool // the call's arguments
	// vecs memoises the vectors (vectors) by batch and width.
	vecs map[string][]vec
	// acts memoises values' data after an activation (activatedOf).
	acts map[actKey][]float32
	// cutJoins: joins of maps a value of the scope was cut from
	// (joinedMapCut), operands of its attention as the own joins are
	cutJoins []*val
}

// emptied is a scope of sc's module and call holding no values yet.
func (sc *scope) emptied() *scope {
	return &scope{module: sc.module, call: sc.call, own: map[*val]bool{}, arg: map[*val]bool{}, vecs: map[string][]vec{}}
}

func (sc *scope) add(v *val, own bool) {
	sc.vals = append(sc.vals, v)
	if own {
		sc.own[v] = true
	}
}

// capture reads a boundary of step 0 as a value.
func (s *synth) capture(key string) (*val, error) {
	t, err := s.tr.Tensor(key)
	if err != nil {
		return nil, err
	}
	data, err := t.Float32Rounded()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	s.seq++
	shape := slices.Clone(t.Shape)
	if c := t.DType.Components(); c > 1 {
		shape = append(shape, c) // complex: (real, imaginary) pairs on a last axis
	}
	return &val{shape: shape, data: slices.Clone(data), format: t.DType.Format(), origin: boundaryName(key), seq: s.seq, keys: []string{key}, intType: !t.DType.IsFloat()}, nil
}

// boundaryName drops a key's scope ("s0/a.b/out" → "a.b/out").
func boundaryName(key string) string {
	m, p, ok := splitKey(key)
	if !ok {
		return key
	}
	return m + "/" + p
}

// call explains one call of step 0 given its bound arguments (port →
// value) and returns its results by port. Every value it returns carries
// the reference's data (teacher forcing) and, when explained, how the
// program computes it.
func (s *synth) call(c trace.Call, args map[string]*val) (map[string]*val, error) {
	if err := s.ctx.Err(); err != nil {
		return nil, fmt.Errorf("synth: stopped at %s: %w", c.Module, err)
	}
	module := moduleOf(c)
	outer := s.scopeOf
	s.scopeOf = module
	defer func() { s.scopeOf = outer }()
	sc := &scope{module: module, call: c, own: map[*val]bool{}, arg: map[*val]bool{}, vecs: map[string][]vec{}}
	for _, p := range c.Tensors {
		if v, ok := args[p.Name]; ok {
			sc.add(v, false)
			sc.arg[v] = true
		}
	}
	for _, name := range c.Params {
		v, err := s.param(name)
		if err != nil {
			return nil, err
		}
		sc.add(v, false)
	}
	start := len(s.em.p.Nodes)
	outs := map[string]*val{}
	children := s.children(c)
	if len(children) > 0 {
		s.addUncalledProjections(sc)
		s.addUncalledTables(sc)
	}
	if len(children) == 0 {
		if err := s.leaf(c, sc, args, outs); err != nil {
			return nil, err
		}
	} else {
		for _, ch := range children {
			chArgs := map[string]*val{}
			prev := ""
			for _, p := range ch.Tensors {
				if trace.IsResult(p.Name) {
					continue
				}
				target, err := s.capture(p.Key)
				if err != nil {
					return nil, err
				}
				s.readerParams, s.readingArg = len(ch.Params) > 0, true
				v := s.explain(target, sc)
				s.readerParams, s.readingArg = false, false
				markUsed(v)
				if q, ok := chArgs[prev]; ok && v.opaque && q.opaque {
					if cos, sin := s.tablePair(q, v, sc); cos != nil {
						chArgs[prev], v = cos, sin
					}
				}
				chArgs[p.Name] = v
				prev = p.Name
				if !slices.Contains(sc.vals, v) {
					sc.add(v, false)
				}
			}
			s.argsAgain(ch, sc, chArgs)
			res, err := s.call(ch, chArgs)
			if err != nil {
				return nil, err
			}
			for _, p := range ch.Tensors {
				if v, ok := res[p.Name]; ok {
					sc.add(v, true)
				}
			}
		}
		for _, p := range c.Tensors {
			if !trace.IsResult(p.Name) {
				continue
			}
			target, err := s.capture(p.Key)
			if err != nil {
				return nil, err
			}
			outs[p.Name] = s.explain(target, sc)
		}
		s.explainAgain(c, sc, outs)
		s.stepSwitched(c, sc, outs)
		if len(c.Params) > 0 || len(s.madeWeights(sc)) > 0 {
			s.refitAsLeaf(c, sc, args, outs)
		}
	}
	for _, p := range c.Tensors {
		if v, ok := outs[p.Name]; ok && !s.needsOpaque(v) {
			if _, err := s.em.emit(v, module); err != nil {
				return nil, err
			}
		}
	}
	s.keepCarried(sc.vals...)
	for _, p := range c.Tensors {
		s.keepCarried(outs[p.Name])
	}
	s.em.segment(module, module, start)
	s.calls++
	s.report(PhaseCalls, s.calls, s.callsTotal)
	return outs, nil
}

// explainAgain tries each result of c that nothing explained once more
// after c's later results are explained: a result may read one returned
// after it (a router's weights gathered at the indices it returns next).
// Only results followed by an explained one are tried again.
func (s *synth) explainAgain(c trace.Call, sc *scope, outs map[string]*val) {
	var names []string
	for _, p := range c.Tensors {
		if trace.IsResult(p.Name) {
			names = append(names, p.Name)
		}
	}
	for i, name := range names {
		v := outs[name]
		if v == nil || !v.opaque {
			continue
		}
		var later []*val
		for _, n := range names[i+1:] {
			if w := outs[n]; w != nil && !w.opaque && !slices.Contains(sc.vals, w) {
				later = append(later, w)
			}
		}
		if len(later) == 0 {
			continue
		}
		for _, w := range later {
			sc.add(w, false) // read as the call's other values are
		}
		target, err := s.capture(c.Tensors[slices.IndexFunc(c.Tensors, func(p trace.Port) bool { return p.Name == name })].Key)
		if err != nil {
			continue
		}
		if w := s.glueRecalled(target, sc, "again"); w != nil && !w.opaque {
			outs[name] = w
			s.opaque = slices.DeleteFunc(s.opaque, func(o *val) bool { return o == v })
		}
	}
}

// argsAgain tries each argument of the call ch that nothing explained once
// more after its later arguments are explained (they are in the scope
// now): an argument may be computed from one passed after it (an
// attention's output and, next, the values it attended over, which a
// value embedding changed after the projection). Only arguments followed
// by an explained one are tried again.
func (s *synth) argsAgain(ch trace.Call, sc *scope, args map[string]*val) {
	var names []string
	for _, p := range ch.Tensors {
		if !trace.IsResult(p.Name) {
			names = append(names, p.Name)
		}
	}
	for i, name := range names {
		v := args[name]
		if v == nil || !v.opaque || !slices.ContainsFunc(names[i+1:], func(n string) bool { return args[n] != nil && !args[n].opaque }) {
			continue
		}
		target, err := s.capture(ch.Tensors[slices.IndexFunc(ch.Tensors, func(p trace.Port) bool { return p.Name == name })].Key)
		if err != nil {
			continue
		}
		// the later arguments are read as the call's own values are (an
		// attention's operands come from those)
		var later []*val
		for _, n := range names[i+1:] {
			if a := args[n]; a != nil && !a.opaque && !sc.own[a] {
				sc.own[a] = true
				later = append(later, a)
			}
		}
		w := s.explain(target, sc)
		for _, a := range later {
			delete(sc.own, a)
		}
		if w.opaque {
			s.opaque = slices.DeleteFunc(s.opaque, func(o *val) bool { return o == target })
			continue
		}
		markUsed(w)
		args[name] = w
		s.opaque = slices.DeleteFunc(s.opaque, func(o *val) bool { return o == v })
		sc.vals = slices.DeleteFunc(sc.vals, func(o *val) bool { return o == v })
		if !slices.Contains(sc.vals, w) {
			sc.add(w, false)
		}
	}
}

// explain finds the expression over the scope that reproduces target and
// returns a value with target's data bound to it; a target nothing
// explains is returned opaque (the program would have to take it from
// the trace).
func (s *synth) explain(target *val, sc *scope) *val {
	if s.logf == nil {
		return s.explainOnce(target, sc)
	}
	start, evals := time.Now(), s.ev.evals
	v := s.explainOnce(target, sc)
	how := "opaque"
	if v != nil && !v.opaque {
		how = "explained"
		for w, sep := v, " by "; w.from != nil; sep = " of " {
			how += sep + w.from.desc()
			if w.from.op != program.OpCast && w.from.op != program.OpReshape || len(w.from.args) == 0 || w.from.args[0] == nil {
				break
			}
			w = w.from.args[0]
		}
	}
	s.logf("explain %s %v: %s in %.2fs (%d evaluations)", target.origin, target.shape, how, time.Since(start).Seconds(), s.ev.evals-evals)
	return v
}

// glueWithinBudget is glue, except that a form the budget stopped leaves
// the target unexplained: past the budget every run fails, and a form may
// meet the nil values that leaves (the search stops at the next call).
// A panic within the budget is a bug: told to Options.Fault, which leaves
// the target unexplained too, or, without one, it goes on.
func (s *synth) glueWithinBudget(target *val, sc *scope) (v *val) {
	defer func() {
		if r := recover(); r != nil {
			if s.ctx != nil && s.ctx.Err() != nil || s.hurried() {
				v = nil
				return
			}
			if s.fault == nil {
				panic(r)
			}
			s.fault(target.origin, fmt.Errorf("%v", r))
			v = nil
		}
	}()
	return s.glue(target, sc)
}

// explainOnce is explain without the log.
func (s *synth) explainOnce(target *val, sc *scope) *val {
	var v *val
	if s.readingArg && !s.hurried() && !holdsCopy(sc, target) {
		// an argument the scope holds no copy of, made by an earlier
		// call and kept (a frame cache): exact, and before glue, whose
		// search over a large scope fails slowly
		v = s.fromCarried(target)
	}
	if v == nil {
		v = s.inTargetShape(s.glueRecalled(target, sc, "first"), target)
		if v != nil && !slices.Contains(sc.vals, v) && s.fewWholeConstants(target) && !s.readsRequestWhole(v, map[*val]bool{}) {
			// one to three whole numbers equal at every step, made by
			// an expression that reads no request input as a whole: too
			// few entries to be evidence of it (σ₀ sliced for a data
			// type id of 1, a table row's argmin for a second timestep
			// of 0); the model makes them from Python numbers, a
			// constant below. A guidance scale the request gives, times
			// 1000, stays the request's.
			v = nil
		}
	}
	if v == nil && len(target.shape) >= 3 && target.shape[len(target.shape)-1] == 2 && s.sameEveryStep([]*val{target}) {
		// a complex RoPE table no call makes (the model gathers it from
		// tables it keeps, by ids made from the request's shapes)
		// ids read back from its angles, together with the trace's other
		// complex tables where it holds some (every table rotates by the
		// same frequencies: one split into axes for all of them, and ids
		// that jump in one table read against another's), else alone
		if more := s.otherComplexTables(target); len(more) > 0 {
			if f := s.fitReadRopeWith([]*val{target}, more); len(f) == 1 && f[0] != nil {
				v = f[0]
			}
		}
		if v == nil {
			if f := s.fitReadRope([]*val{target}); len(f) == 1 && f[0] != nil {
				v = f[0]
			}
		}
		if v == nil {
			// fractional positions (a grid normalised into [−1, 1]),
			// pairs padded with zeros: a ladder read off the angles
			v = s.fitGridCoordComplex(target)
		}
		if v != nil && v.fit != nil && v.fit.kind == "rope_table" {
			s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: target.origin, fit: v.fit})
		}
	}
	if v == nil && len(target.shape) >= 2 && target.shape[len(target.shape)-1] >= 4 && !target.integral() {
		// one tensor holding a RoPE table's sin and cos side by side, made
		// from the request's shape (handed to every block as one value)
		v = s.fitSideBySideTable(target)
	}
	if v == nil && target.integral() && len(target.shape) >= 2 {
		// ids of relative positions (T5's buckets) made from the
		// request's shape
		v = s.relBuckets(target)
	}
	if v == nil && isFill(target) {
		// one integer everywhere (token type ids, a segment index):
		// made from the request's shape
		s.em.constant(target, fmt.Sprintf("%g everywhere (made from the request's shape)", target.data[0]))
		return target
	}
	if v == nil && isIota(target) {
		// positions 0…n−1 along the last axis: made from the request's
		// shape alone
		target.iota = true
		s.em.iota(target)
		return target
	}
	if v == nil {
		// the positions of a grid's cells ([N, k] or [k, N]), row-major or
		// tile by tile: made from the request's shape alone (an image's
		// patch rows and columns; merged patches visited together)
		if order := gridIDsOrder(target); order != "" {
			s.em.constant(target, fmt.Sprintf("the positions of a grid's cells, %s (made from the request's shape)", order))
			return target
		}
	}
	if v == nil && (!s.integerRequest() || s.sameEveryStep([]*val{target})) {
		// the corner rows of a learned position table resampled
		// bilinearly to the patches' grid: made from the grid's shape
		if b := bilinearCornersOf(target); b != nil {
			s.em.constant(target, fmt.Sprintf("the corner rows of a %d×%d table resampled bilinearly to a %d×%d grid, cells in tiles %v (made from the grid's shape)", b.g, b.g, b.h, b.w, b.tiles))
			s.bilinear = append(s.bilinear, bilinearRecord{ids: target, grid: *b})
			return target
		}
	}
	if v == nil && relCoordsTable(target) && (len(s.tr.Steps()) < 2 || s.sameEveryStep([]*val{target})) {
		// a window's relative coordinates (linear or log-spaced), the
		// input of a position MLP: made from the grid's shape at init
		s.em.constant(target, "relative coordinates of a window's offsets, one axis per channel, odd about the centre (a table the model makes from its grid's shape at init)")
		return target
	}
	if v == nil && pairCoordsTable(target) && (len(s.tr.Steps()) < 2 || s.sameEveryStep([]*val{target})) {
		s.em.constant(target, "relative coordinates of every (query, key) pair of a window, one axis per channel, odd about zero (a table the model makes from its window's shape at init)")
		return target
	}
	if v == nil && (len(s.tr.Steps()) < 2 || s.sameEveryStep([]*val{target})) {
		if note := pairOffsetsTable(target); note != "" {
			s.em.constant(target, note)
			return target
		}
		if note := bandMaskNote(target); note != "" {
			s.em.constant(target, note)
			return target
		}
	}
	if v == nil && isBounds(target) && (!s.integerRequest() || s.invariant(target.format, func(st int) ([]float32, bool) { return s.at(target, st) }, 0)) {
		// segment bounds (cumulative lengths: windows, packed images) in a
		// run whose request holds no integers, or equal at every step: made
		// from the request's shapes
		s.em.constant(target, fmt.Sprintf("segment bounds %v (cumulative lengths made from the request's shapes)", target.data))
		return target
	}
	if v == nil && target.integral() && len(s.tr.Steps()) < 2 && fewValues(target, 4) && !s.integerRequest() {
		// one captured step, so no invariance to read: integers no
		// expression makes, in a run whose request holds no integers (an
		// image or a sound), come from its shapes alone (a shifted
		// window's mask of 0 and −100)
		s.em.constant(target, "integer values of a run whose request holds only floating values: a pattern made from the request's shapes")
		return target
	}
	if v == nil && target.integral() && s.invariant(target.format, func(st int) ([]float32, bool) { return s.at(target, st) }, 0) {
		// integer values equal at every step that no request input holds:
		// positions or indices made from the request's shapes
		s.em.constant(target, "integer values equal at every captured step: positions made from the request's shapes")
		return target
	}
	if v == nil && !s.readingArg && !s.hurried() {
		// a value an earlier call made and the Python side kept (a
		// frame cache)
		v = s.fromCarried(target)
	}
	if v == nil {
		target.opaque = true
		target.unsearched = s.hurried()
		s.opaque = append(s.opaque, target)
		return target
	}
	if v == target {
		return v
	}
	if slices.Contains(sc.vals, v) {
		// the same tensor as a value the scope holds: one value, two boundaries
		v.keys = append(v.keys, target.keys...)
		if v.name != "" {
			s.em.tapAll(v)
		}
		return v
	}
	// Teacher forcing: later searches see the reference's data under the
	// expression's binding.
	if v.from == nil && v.name != "" && len(v.keys) > 0 && v != target {
		// an existing bound value: the target is the same tensor
		v.keys = append(v.keys, target.keys...)
		return v
	}
	out := &val{shape: target.shape, data: target.data, format: target.format, origin: target.origin,
		from: v.from, name: v.name, keys: append(slices.Clone(v.keys), target.keys...), seq: target.seq, fit: v.fit}
	if v.name != "" {
		// already emitted: share the binding
		s.em.tapAll(out)
	}
	return out
}

// needsOpaque reports whether computing v reads an opaque value.
func (s *synth) needsOpaque(v *val) bool {
	if v == nil {
		return false
	}
	if v.name != "" {
		return false
	}
	if v.from == nil {
		return v.opaque
	}
	for _, a := range v.from.args {
		if a != nil && s.needsOpaque(a) {
			return true
		}
	}
	return false
}

// children are c's child calls in entry order.
func (s *synth) children(c trace.Call) []trace.Call {
	var out []trace.Call
	for _, id := range s.tr.Tree().Children(c.ID) {
		if ch, ok := s.tr.Tree().Call(id); ok {
			out = append(out, ch)
		}
	}
	return out
}

// moduleOf is the call's module as its keys spell it.
func moduleOf(c trace.Call) string {
	if c.Ordinal > 0 {
		return fmt.Sprintf("%s#%d", c.Module, c.Ordinal)
	}
	return c.Module
}

// param returns a parameter as a weight value (declared once).
func (s *synth) param(name string) (*val, error) {
	if v, ok := s.params[name]; ok {
		return v, nil
	}
	key, ok := s.tr.Manifest.Params[name]
	if !ok {
		return nil, fmt.Errorf("parameter %q has no tensor", name)
	}
	v, err := s.capture(key)
	if err != nil {
		return nil, err
	}
	v.origin, v.keys = name, nil
	v.param = true
	s.em.bindLeaf(v, program.Weight, "param:"+name, name)
	s.params[name] = v
	return v, nil
}

// isIota reports whether v holds c…c+n−1 along its last axis in every
// row (positions; c an offset such as a learned table's 2).
func isIota(v *val) bool {
	if len(v.shape) == 0 || v.numel() == 0 {
		return false
	}
	n := v.shape[len(v.shape)-1]
	c := v.data[0]
	for i, x := range v.data {
		if x != float32(i%n)+c {
			return false
		}
	}
	return n > 1 && c >= 0 && c <= 16
}

// markUsed marks v, and what it moves, as read by a call.
func markUsed(v *val) {
	for v != nil {
		v.used = true
		if v.from == nil || len(v.from.args) == 0 {
			return
		}
		switch v.from.op {
		case program.OpReshape, program.OpPermute, program.OpCast:
			v = v.from.args[0]
		default:
			return
		}
	}
}

// isFill reports whether v holds one small integer everywhere.
func isFill(v *val) bool {
	if v.numel() < 2 || !v.integral() || v.data[0] < 0 || v.data[0] > 16 {
		return false
	}
	for _, x := range v.data {
		if x != v.data[0] {
			return false
		}
	}
	return true
}

// fewWholeConstants reports whether t holds one to three whole numbers,
// equal at every captured step of a run of several.
func (s *synth) fewWholeConstants(t *val) bool {
	return t.numel() < 4 && t.integral() && len(s.tr.Steps()) >= 2 &&
		s.invariant(t.format, func(st int) ([]float32, bool) { return s.at(t, st) }, 0)
}

// readsRequestWhole reports whether v's expression reads an input of the
// request (or a step input) other than through a selection of some of
// its entries (a slice, a gather, an argmin).
func (s *synth) readsRequestWhole(v *val, seen map[*val]bool) bool {
	if v == nil || seen[v] {
		return false
	}
	seen[v] = true
	if pv := s.em.p.Values[v.name]; v.name != "" && pv != nil && (pv.Kind == program.Input || pv.Kind == program.StepInput) {
		return true
	}
	if v.from == nil {
		return false
	}
	switch v.from.op {
	case program.OpSlice, program.OpChunk, program.OpGather, program.OpArgMin:
		return false
	}
	for _, a := range v.from.args {
		if s.readsRequestWhole(a, seen) {
			return true
		}
	}
	return false
}

// refitAsLeaf explains the results the children did not, by fitting the
// call as a whole to its own arguments and parameters (a module whose
// children see only a gathered part of its work: the experts of a
// mixture, called on the tokens routed to each), the weights its children
// made from parameters alone then tried before them (madeWeights: a
// parametrized convolution's weight).
func (s *synth) refitAsLeaf(c trace.Call, sc *scope, args map[string]*val, outs map[string]*val) {
	var names []string
	var targets []*val
	missing := false
	for _, p := range c.Tensors {
		if v, ok := outs[p.Name]; ok && trace.IsResult(p.Name) {
			names, targets = append(names, p.Name), append(targets, v)
			missing = missing || v.opaque
		}
	}
	if !missing {
		return
	}
	xs, params := s.callInputs(c, args)
	if len(xs) == 0 {
		return
	}
	var tries [][]*val
	if len(params) > 0 {
		tries = append(tries, params)
	}
	if made := s.madeWeights(sc); len(made) > 0 {
		tries = append(tries, append(made, params...))
	}
	for _, ps := range tries {
		if !slices.ContainsFunc(targets, func(t *val) bool { return t.opaque }) {
			return
		}
		for i, f := range s.fitLeaf(sc, xs, ps, targets) {
			if t := targets[i]; f != nil && t.opaque {
				t.opaque = false
				s.opaque = slices.DeleteFunc(s.opaque, func(v *val) bool { return v == t })
				outs[names[i]] = f
			}
		}
	}
}

// callInputs are a call's explained tensor arguments, in port order, and
// its parameters.
func (s *synth) callInputs(c trace.Call, args map[string]*val) (xs, params []*val) {
	for _, p := range c.Tensors {
		if v, ok := args[p.Name]; ok && !trace.IsResult(p.Name) {
			xs = append(xs, v)
		}
	}
	for _, name := range c.Params {
		params = append(params, s.params[name])
	}
	return xs, params
}

// tablePair explains two arguments of a call that no expression explains
// one at a time, in turn, as a cos and a sin RoPE table made in the
// forward from the request's shapes (no call makes them: a method of the
// model builds them and passes the pair to each block): the ids, the
// split into axes and θ read back from both together (fitReadRope). It
// returns the two explained values, the opaque ones replaced in the scope
// and the opaque list; nil where the pair is not such tables.
func (s *synth) tablePair(c, sn *val, sc *scope) (*val, *val) {
	if !slices.Equal(c.shape, sn.shape) || len(c.shape) < 2 || c.integral() || !unitOrDead(c, sn) || !s.tablesOfShape([]*val{c, sn}) {
		return nil, nil
	}
	f := s.shapeTables(c, sn)
	if f == nil {
		return nil, nil
	}
	cos, sin := adopt(c, f[0]), adopt(sn, f[1])
	for _, t := range []*val{c, sn} {
		s.opaque = slices.DeleteFunc(s.opaque, func(o *val) bool { return o == t })
	}
	if i := slices.Index(sc.vals, c); i >= 0 {
		sc.vals[i] = cos
	}
	if f[0].fit != nil && f[0].fit.kind == "rope_table" {
		s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: c.origin, fit: f[0].fit})
	}
	return cos, sin
}

// gridIDsOrder reports whether v holds, for each cell of a grid of k ≥ 2
// axes, its k coordinates: [N, k] (one row per cell) or [k, N] (one row
// per axis), every axis at least 2 long, every cell once, in an order the
// grid's shape makes: row-major, or the last two axes cut into square
// tiles (and tiles of tiles) visited row-major, each tile's cells
// row-major within it (merged patches, attention windows). It returns the
// order's description; "" where v is no such grid.
func gridIDsOrder(v *val) string {
	if len(v.shape) != 2 || !v.integral() {
		return ""
	}
	for _, perCell := range []bool{true, false} {
		n, k := v.shape[0], v.shape[1]
		if !perCell {
			n, k = k, n
		}
		if k < 2 || k > 4 || n < 4 {
			continue
		}
		cells := make([][]int, n)
		for c := range cells {
			cells[c] = make([]int, k)
			for a := range k {
				if perCell {
					cells[c][a] = int(v.data[c*k+a])
				} else {
					cells[c][a] = int(v.data[a*n+c])
				}
			}
		}
		if how := gridOrder(cells, k); how != "" {
			return how
		}
	}
	return ""
}

// gridOrder names the order of cells (each k coordinates) over the grid
// they fill: "" unless every cell of the grid appears once, in row-major
// order or in tiles of the last two axes (gridTiles).
func gridOrder(cells [][]int, k int) string {
	dims := make([]int, k)
	size := 1
	for a := range k {
		for _, c := range cells {
			if c[a] < 0 {
				return ""
			}
			dims[a] = max(dims[a], c[a]+1)
		}
		size *= dims[a]
	}
	if size != len(cells) || slices.Contains(dims, 1) {
		return ""
	}
	for _, tiles := range gridTiles(dims[k-2], dims[k-1]) {
		if tiledOrder(cells, tiles) {
			if len(tiles) == 0 {
				return "row-major"
			}
			return fmt.Sprintf("row-major in tiles of %v cells of the last two axes (a tile's cells row-major, then the next tile)", tiles)
		}
	}
	return ""
}

// gridTiles are the tilings gridOrder tries for a last-two-axes grid of
// h × w: none (row-major), square tiles of side s, and tiles of side S
// cut into tiles of side s (s dividing S), smallest first.
func gridTiles(h, w int) [][]int {
	out := [][]int{nil}
	side := max(h, w)
	for s := 2; s < side; s++ {
		out = append(out, []int{s})
	}
	for s := 2; s < side; s++ {
		for big := 2 * s; big < side; big += s {
			out = append(out, []int{s, big})
		}
	}
	return out
}

// tiledOrder reports whether cells, in their order, are sorted by the key
// (leading axes, then for each tile side from the largest: the last two
// axes' tile indices, then the coordinates within the smallest tile).
func tiledOrder(cells [][]int, tiles []int) bool {
	for i := 1; i < len(cells); i++ {
		if slices.Compare(tileKey(cells[i-1], tiles), tileKey(cells[i], tiles)) >= 0 {
			return false
		}
	}
	return true
}

// tileKey is a cell's place in the tiled order: its leading axes, then
// for each tile side from the largest the last two axes' tile indices,
// then its coordinates within the smallest tile.
func tileKey(c []int, tiles []int) []int {
	k := len(c)
	out := slices.Clone(c[:k-2])
	h, w := c[k-2], c[k-1]
	for i := len(tiles) - 1; i >= 0; i-- {
		out = append(out, h/tiles[i], w/tiles[i])
		h, w = h%tiles[i], w%tiles[i]
	}
	return append(out, h, w)
}

// fewValues reports whether v holds at most n distinct values.
func fewValues(v *val, n int) bool {
	seen := map[float32]bool{}
	for _, x := range v.data {
		if seen[x] = true; len(seen) > n {
			return false
		}
	}
	return true
}

// integerRequest reports whether some input of the request is of an
// integer or boolean dtype (ids, a mask), or cannot be read.
func (s *synth) integerRequest() bool {
	for _, key := range s.tr.Manifest.Inputs {
		t, err := s.tr.Tensor(key)
		if err != nil || !t.DType.IsFloat() {
			return true
		}
	}
	return false
}

// inTargetShape reshapes an explanation whose expression makes the
// target's values in another shape of as many entries (a 0-dim timestep
// read as a [1] product with a constant) to the target's, so that the
// program declares the shape its op makes.
func (s *synth) inTargetShape(v, target *val) *val {
	if v == nil || v.from == nil || v.from.pick < 0 || v.from.pick >= len(v.from.shapes) {
		return v
	}
	made := v.from.shapes[v.from.pick]
	if slices.Equal(made, target.shape) || (&val{shape: made}).numel() != target.numel() {
		return v
	}
	inner := &val{shape: slices.Clone(made), data: v.data, format: v.format, origin: v.origin, from: v.from, seq: v.seq}
	r := s.reshape(inner, target.shape)
	if r == nil {
		return v
	}
	r.fit = v.fit
	return adopt(target, r)
}
