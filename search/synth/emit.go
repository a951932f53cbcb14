package synth

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// emitter assembles the program: values bound to names, nodes in
// execution order, segments, and the precision rules of nodes whose
// result is stored in another format than the activations'.
type emitter struct {
	p     *program.Program
	act   precision.Format
	rules []semantics.PrecisionRule
	n     int
	// consts lists the values taken from the trace as constants, for the
	// document's notes.
	consts []*val
	// multi: the outputs of multi-result nodes already emitted.
	multi map[*expr][]string
	// notes: why a constant holds what it holds, by value name.
	notes     map[string]string
	fromTrace map[string]bool
}

func newEmitter(act precision.Format) *emitter {
	return &emitter{p: &program.Program{Values: map[string]*program.Value{}}, act: act, multi: map[*expr][]string{}, notes: map[string]string{}, fromTrace: map[string]bool{}}
}

func (em *emitter) addValue(v *program.Value) string {
	base := strings.Join(strings.Fields(v.Name), "_")
	name := base
	for i := 2; em.p.Values[name] != nil; i++ {
		name = base + "#" + strconv.Itoa(i)
	}
	v.Name = name
	em.p.Values[name] = v
	em.p.Order = append(em.p.Order, name)
	return name
}

// dropUnusedConsts removes the constants no node reads, no output is
// and no boundary taps: made for candidates that lost (zeros for a
// padding tried and not taken), they would only weigh on the document.
func (em *emitter) dropUnusedConsts() {
	used := map[string]bool{}
	for _, n := range em.p.Nodes {
		for _, in := range n.In {
			used[in] = true
		}
	}
	for _, o := range em.p.Outputs {
		used[o] = true
	}
	em.p.Order = slices.DeleteFunc(em.p.Order, func(name string) bool {
		v := em.p.Values[name]
		if v.Kind != program.Const || used[name] || len(v.Taps) > 0 || em.fromTrace[name] {
			return false
		}
		delete(em.p.Values, name)
		return true
	})
}

// bindLeaf declares a weight, input or step input and binds v to it.
func (em *emitter) bindLeaf(v *val, kind program.ValueKind, name, source string) string {
	v.name = em.addValue(&program.Value{Name: name, Kind: kind, Source: source, Shape: slices.Clone(v.shape)})
	em.tapAll(v)
	return v.name
}

// tapAll taps every boundary v is.
func (em *emitter) tapAll(v *val) {
	for _, k := range v.keys {
		em.tap(v, k)
	}
}

// tap records that v is the reference's tensor at key's boundary.
func (em *emitter) tap(v *val, key string) {
	if v.name == "" || key == "" {
		return
	}
	module, port, ok := splitKey(key)
	if !ok {
		return
	}
	pv := em.p.Values[v.name]
	for _, t := range pv.Taps {
		if t.Module == module && t.Port == port {
			return
		}
	}
	pv.Taps = append(pv.Taps, program.Tap{Module: module, Port: port})
}

// splitKey splits "s0/<module>/<port>" into the module (with its
// "#ordinal") and the port.
func splitKey(key string) (module, port string, ok bool) {
	i := strings.IndexByte(key, '/')
	j := strings.LastIndexByte(key, '/')
	if i < 0 || j <= i {
		return "", "", false
	}
	return key[i+1 : j], key[j+1:], true
}

// emit makes v's program value (and, first, its arguments'): the node of
// a computed value, or a constant for an opaque one.
func (em *emitter) emit(v *val, scope string) (string, error) {
	if v.name != "" {
		return v.name, nil
	}
	if v.from == nil && !v.opaque && v.constNote != "" {
		em.constant(v, v.constNote)
		return v.name, nil
	}
	if v.from == nil && v.scalar {
		em.constScalar(v)
		return v.name, nil
	}
	if v.from == nil {
		if !v.opaque && v.beforeLoop == "" {
			return "", fmt.Errorf("value %s is neither bound nor computed", v)
		}
		em.consts = append(em.consts, v)
		name := em.addValue(&program.Value{Name: "const:" + v.origin, Kind: program.Const, Shape: slices.Clone(v.shape),
			Data: slices.Clone(v.data), Format: v.format})
		v.name = name
		em.notes[name] = "taken from the trace (step 0): " + whyOpaque(v) + " from the request"
		em.fromTrace[name] = true
		em.tapAll(v)
		return name, nil
	}
	e := v.from
	in := make([]string, len(e.args))
	for i, a := range e.args {
		if a == nil {
			continue
		}
		name, err := em.emit(a, scope)
		if err != nil {
			return "", err
		}
		in[i] = name
	}
	key := e
	if e.node != nil {
		key = e.node
	}
	if outs, ok := em.multi[key]; ok {
		v.name = outs[e.pick]
		em.tapAll(v)
		return v.name, nil
	}
	em.n++
	role := fmt.Sprintf("%s.%s%d", scope, e.op, em.n)
	n := max(1, len(e.shapes)) // an op of several results (RoPE tables, a router) makes them all at once
	var outs []string
	for i := range n {
		name := role
		if n > 1 {
			name += "." + strconv.Itoa(i)
		}
		shape := v.shape
		if i != e.pick {
			shape = e.shapes[i]
		}
		outs = append(outs, em.addValue(&program.Value{Name: name, Kind: program.Temp, Shape: slices.Clone(shape)}))
	}
	if n > 1 {
		em.multi[key] = outs
	}
	out := outs[e.pick]
	em.p.Nodes = append(em.p.Nodes, program.Node{Op: e.op, In: in, Out: outs, Role: role, Attrs: e.attrs})
	if rounds(e.op) && (e.out != em.act || e.math != 0 || e.round != 0) {
		r := semantics.PrecisionRule{Op: e.op.String(), Role: role, Out: e.out.String(), Pinned: true}
		if e.math != 0 {
			r.Math = e.math.String()
		}
		if e.round != 0 {
			r.Round = e.round.String()
		}
		em.rules = append(em.rules, r)
	}
	v.name = out
	em.tapAll(v)
	return out, nil
}

// rounds reports whether op's result is stored by its precision spec
// (movement ops keep their input's format).
func rounds(op program.Op) bool {
	switch op {
	case program.OpReshape, program.OpSlice, program.OpChunk, program.OpConcat, program.OpRepeat, program.OpGather, program.OpRelBucket, program.OpSegmentMask, program.OpMaxPool2D, program.OpArgMin,
		program.OpPatchify, program.OpUnpatchify, program.OpCast, program.OpPermute:
		return false
	}
	return true
}

// segment records that nodes [start, now) compute the call at module.
func (em *emitter) segment(address, module string, start int) {
	em.p.Segments = append(em.p.Segments, program.Segment{Address: address, Module: module, Start: start, End: len(em.p.Nodes)})
}

// constScalar declares a scalar constant and binds v to it.
func (em *emitter) constScalar(v *val) {
	v.name = em.addValue(&program.Value{Name: "const:" + strconv.FormatFloat(float64(v.data[0]), 'g', -1, 32), Kind: program.Const,
		Shape: slices.Clone(v.shape), Data: slices.Clone(v.data), Format: v.format})
}

// iota declares positions 0…n−1 as a constant and binds v to it.
func (em *emitter) iota(v *val) {
	v.name = em.addValue(&program.Value{Name: "const:positions", Kind: program.Const,
		Shape: slices.Clone(v.shape), Data: slices.Clone(v.data), Format: precision.F32})
	em.notes[v.name] = fmt.Sprintf("positions %g…%g along the last axis (made from the request's shape)", v.data[0], v.data[0]+float32(v.shape[len(v.shape)-1]-1))
	em.tapAll(v)
}

// constant declares v's data as a constant with a note saying why it is
// one, and binds v to it.
func (em *emitter) constant(v *val, note string) {
	v.name = em.addValue(&program.Value{Name: "const:" + v.origin, Kind: program.Const,
		Shape: slices.Clone(v.shape), Data: slices.Clone(v.data), Format: v.format})
	em.notes[v.name] = note
	em.tapAll(v)
}
