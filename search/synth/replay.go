package synth

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"strconv"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// A model repeats its blocks: calls whose trees hold ports and parameters
// of the same shapes. What glue found for a target of the first such call
// is tried first on the same target of a later one: the first call's
// expression, its leaves taken from the later scope at the same places,
// kept only if it explains the later target as glue would accept it; and
// a target glue could not explain in the first call is not searched again
// in a later one whose scope is alike. Only a search that left the
// state of the discovery as it found it (no record a factor reader
// reads, no value emitted, no scope value added or marked) is replayed:
// a replay changes none of it.

// recall is what glue found for one target of a call, kept for the same
// target of the calls repeating it.
type recall struct {
	scope []scopeSlot // the scope as glue saw it, in order
	found *val        // glue's result; nil: nothing explained the target
	err   float64     // found's error against its own target
}

// scopeSlot is one value of a scope as glue saw it: the value and what
// the forms read of it besides its data.
type scopeSlot struct {
	v                             *val
	shape                         []int
	format                        precision.Format
	opaque, param, own, arg, used bool
	captured                      bool
}

// replays holds the recalls of a discovery and what finds them.
type replays struct {
	recalls map[string]*recall
	sigs    map[int]uint64 // call ID → its tree's signature
	seen    map[string]int // (call ID, target place) → explanations so far
}

func newReplays() *replays {
	return &replays{recalls: map[string]*recall{}, sigs: map[int]uint64{}, seen: map[string]int{}}
}

// slotsOf is the scope's values as glue sees them now.
func slotsOf(sc *scope) []scopeSlot {
	out := make([]scopeSlot, len(sc.vals))
	for i, v := range sc.vals {
		out[i] = scopeSlot{v: v, shape: v.shape, format: v.format, opaque: v.opaque, param: v.param,
			own: sc.own[v], arg: sc.arg[v], used: v.used, captured: len(v.keys) > 0}
	}
	return out
}

// alike reports whether two scopes look alike to glue, value by value.
func alike(a, b []scopeSlot) bool {
	return slices.EqualFunc(a, b, func(x, y scopeSlot) bool {
		return slices.Equal(x.shape, y.shape) && x.format == y.format && x.opaque == y.opaque && x.param == y.param &&
			x.own == y.own && x.arg == y.arg && x.used == y.used && x.captured == y.captured
	})
}

// glueRecalled is glueWithinBudget with the recall of a repeated call:
// pass names the place in the walk that asks (a first explanation, or
// one tried again), so that each recall answers the same question.
func (s *synth) glueRecalled(target *val, sc *scope, pass string) *val {
	key := s.recallKey(target, sc, pass)
	if key == "" || s.replay == nil {
		return s.glueWithinBudget(target, sc)
	}
	if r, ok := s.replay.recalls[key]; ok && alike(r.scope, slotsOf(sc)) {
		if r.found == nil {
			s.logReplay(target, "not searched again: the first call of this shape found nothing")
			return nil
		}
		if v := s.replayed(r, target, sc); v != nil {
			s.logReplay(target, "replayed from the first call of this shape")
			return v
		}
	}
	before, slots, used, cuts := s.stateSizes(), slotsOf(sc), usedCount(sc), len(sc.cutJoins)
	v := s.glueWithinBudget(target, sc)
	if _, ok := s.replay.recalls[key]; ok || s.hurried() || s.ctx != nil && s.ctx.Err() != nil {
		return v
	}
	if !slices.Equal(before, s.stateSizes()) || len(sc.vals) != len(slots) || usedCount(sc) != used || len(sc.cutJoins) != cuts {
		return v // the search changed what later ones read: not replayable
	}
	r := &recall{scope: slots, found: v}
	if v != nil {
		if v.numel() != target.numel() {
			return v
		}
		r.err = relRMS(target.format, v.data, target.data)
	}
	s.replay.recalls[key] = r
	return v
}

func (s *synth) logReplay(target *val, how string) {
	if s.logf != nil {
		s.logf("recall %s %v: %s", target.origin, target.shape, how)
	}
}

// recallKey names a target by its call tree's signature, its place in
// the call (which child's argument, or the call's own result, and the
// port), the pass, and how many times it was asked before within this
// call; "" where the target is no port of the call or its children.
func (s *synth) recallKey(target *val, sc *scope, pass string) string {
	if len(target.keys) == 0 || s.replay == nil {
		return ""
	}
	m, port, ok := splitKey(target.keys[0])
	if !ok {
		return ""
	}
	place := -2
	if m == sc.module {
		place = -1
	} else {
		for i, ch := range s.children(sc.call) {
			if moduleOf(ch) == m {
				place = i
				break
			}
		}
	}
	if place == -2 {
		return ""
	}
	where := fmt.Sprintf("%d|%s|%t|%t|%s", place, port, s.readingArg, s.readerParams, pass)
	seen := strconv.Itoa(sc.call.ID) + "|" + where
	n := s.replay.seen[seen]
	s.replay.seen[seen] = n + 1
	return fmt.Sprintf("%x|%s|%d", s.signature(sc.call), where, n)
}

// signature hashes a call's tree: its ports' names, shapes and dtypes,
// its parameters' shapes, and its children's signatures in order (never
// a module, class or parameter name).
func (s *synth) signature(c trace.Call) uint64 {
	if h, ok := s.replay.sigs[c.ID]; ok {
		return h
	}
	h := fnv.New64a()
	for _, p := range c.Tensors {
		fmt.Fprint(h, p.Name, ":")
		if info, err := s.tr.Info(p.Key); err == nil {
			fmt.Fprint(h, info.Shape, info.DType)
		}
		fmt.Fprint(h, ";")
	}
	for _, name := range c.Params {
		if t, err := s.tr.Param(name); err == nil {
			fmt.Fprint(h, "p", t.Shape, t.DType, ";")
		}
	}
	for _, ch := range s.children(c) {
		fmt.Fprintf(h, "c%x;", s.signature(ch))
	}
	sum := h.Sum64()
	s.replay.sigs[c.ID] = sum
	return sum
}

// replayed rebuilds r's expression over sc's values and returns it if it
// explains target as glue would accept it: within the format's
// tolerance at every step, no row far off, and no looser than the first
// call's explanation of its own target (by a factor of 4, or the
// format's floor); nil otherwise.
func (s *synth) replayed(r *recall, target *val, sc *scope) *val {
	b := rebinder{s: s, to: map[*val]*val{}}
	for i, slot := range r.scope {
		b.to[slot.v] = sc.vals[i]
	}
	v := b.rebuild(r.found)
	if v == nil || v.numel() != target.numel() {
		return nil
	}
	tol := tolerance(target.format)
	e := relRMS(target.format, v.data, target.data)
	floor := looseFloor(target.format)
	if e > tol || e > max(floor, 4*r.err) || e > floor && wrongRow(v, target, tol) || !s.everyStep(v, target, tol) {
		return nil
	}
	return v
}

// rebinder rebuilds an expression with its leaves moved to another
// scope's values.
type rebinder struct {
	s  *synth
	to map[*val]*val // a value of the first scope → the same place's now
}

// rebuild is v over the new leaves, nil where a leaf has no place in the
// new scope (a captured value or parameter outside it) or a node holds
// what a replay cannot carry (a fit read by the factors, another
// result of a node, data given per step).
func (b rebinder) rebuild(v *val) *val {
	if v == nil {
		return nil
	}
	if w, ok := b.to[v]; ok {
		return w
	}
	if len(v.keys) > 0 || v.param || v.perStep != nil || v.fit != nil {
		return nil
	}
	if v.from == nil {
		return v // a constant: the same in every call of the shape
	}
	e := v.from
	if e.node != nil || len(e.sibling) > 0 {
		return nil
	}
	args := make([]*val, len(e.args))
	for i, a := range e.args {
		if a == nil {
			continue
		}
		if args[i] = b.rebuild(a); args[i] == nil {
			return nil
		}
	}
	w := b.s.derive(&expr{op: e.op, attrs: e.attrs, args: args, out: e.out, label: e.label, pick: e.pick, math: e.math, round: e.round})
	if w == nil || !slices.Equal(w.shape, v.shape) {
		return nil
	}
	w.iota, w.reshapedFrom = v.iota, v.reshapedFrom
	b.to[v] = w
	return w
}

// memoFields are the discovery's maps that only memoise (a value's data
// at other steps, its columns' ranges, the parameters read): a search
// that fills them changes nothing a later search decides by.
var memoFields = map[string]bool{"steps": true, "columns": true, "params": true, "calledParams": true, "carriedSeen": true,
	// and the scratch of the attention and join searches, keyed by the
	// candidate values they made or by shapes
	"joint": true, "relConsts": true, "headsAxis": true, "qkScale": true, "qkWidth": true}

// stateSizes are the lengths of the discovery's slices and maps other
// than memos (its records, hints, joins, opaque values) and of the
// program emitted: a search that changes one is not replayed.
func (s *synth) stateSizes() []int {
	out := []int{len(s.em.p.Nodes)}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if memoFields[v.Type().Field(i).Name] {
			continue
		}
		if f := v.Field(i); f.Kind() == reflect.Slice || f.Kind() == reflect.Map {
			out = append(out, f.Len())
		}
	}
	return out
}

func usedCount(sc *scope) int {
	n := 0
	for _, v := range sc.vals {
		if v.used {
			n++
		}
	}
	return n
}
