package plan

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// referenceRun is the plain statement of what an Evaluator run measures,
// for the tests to hold the lazy one against: the program run whole by
// the interpreter, every tapped value compared as it is made (Observe),
// and, teacher forced, replaced by the reference's tensor in our value's
// format (Override, outputs included), then the flow's Euler updates from
// the reference's latents and the forced velocity; no memo, no cache, no
// sample. It keeps both sides of every record.
func referenceRun(b exec.Backend, tr *trace.Trace, doc *semantics.Document, pr semantics.Precision, free bool, steps int) ([]Record, error) {
	d := *doc
	d.Precision = pr
	r, err := program.NewRunner(b, &d, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	x := &refEval{b: b, tr: tr, r: r, free: free, units: newUnitTable(), flow: d.Structure.Run == "flow_euler",
		model: d.Structure.Model}
	p := r.P
	x.nodeUnit = make([]int, len(p.Nodes))
	for i := range p.Nodes {
		x.nodeUnit[i] = -1
		if u, ok := nodeUnit(&p.Nodes[i]); ok {
			x.nodeUnit[i] = x.units.id(u)
		}
	}
	hooks := program.Hooks{Run: x.runNode}
	if free {
		hooks.Observe = x.observe
	} else {
		hooks.Override, hooks.OverrideOutputs = x.override, true
	}
	r.It.Hooks = hooks
	if !x.flow {
		x.reset()
		out, err := r.Run(nil)
		if err != nil {
			return nil, err
		}
		defer b.Free(out)
		if free {
			name := outputOf(&d)
			if err := x.compare(0, "output/"+name, "", name, out); err != nil {
				return nil, err
			}
		}
		return x.recs, nil
	}
	return x.recs, x.runFlow(steps, &d)
}

func outputOf(d *semantics.Document) string {
	if len(d.Structure.Outputs) > 0 {
		return d.Structure.Outputs[0].Name
	}
	return "latents"
}

type refInfo struct{ deps, makers bits }

type refEval struct {
	b        exec.Backend
	tr       *trace.Trace
	r        *program.Runner
	free     bool
	flow     bool
	model    semantics.Boundary
	units    *unitTable
	nodeUnit []int
	info     map[exec.Tensor]refInfo
	orig     map[exec.Tensor]exec.Tensor
	recs     []Record
}

func (x *refEval) reset() {
	x.info = map[exec.Tensor]refInfo{}
	x.orig = map[exec.Tensor]exec.Tensor{}
}

func (x *refEval) about(t exec.Tensor, name string) refInfo {
	if in, ok := x.info[t]; ok {
		return in
	}
	var in refInfo
	if v, ok := x.r.P.Values[name]; ok && v.Kind == program.StepInput && v.Source == "timestep" {
		in.deps.set(x.units.id(Unit{Op: "cast", Role: roleTimestep}))
		in.makers = in.deps
	}
	x.info[t] = in
	return in
}

func (x *refEval) runNode(step, i int, n *program.Node, in []exec.Tensor) ([]exec.Tensor, error) {
	var deps, makers bits
	for j, t := range in {
		if t == nil {
			continue
		}
		ti := x.about(t, n.In[j])
		deps.or(ti.deps)
		if transparent(n.Op) {
			makers.or(ti.makers)
		}
	}
	if u := x.nodeUnit[i]; u >= 0 {
		deps.set(u)
		makers = bits{}
		makers.set(u)
	}
	outs, err := program.RunNode(x.b, n, in)
	for _, o := range outs {
		x.info[o] = refInfo{deps: deps, makers: makers}
	}
	return outs, err
}

func (x *refEval) refValues(key string, shape []int) ([]float32, precision.Format, bool) {
	info, err := x.tr.Info(key)
	if err != nil || info.DType.Components() != 1 {
		return nil, 0, false
	}
	if _, ok := program.Relayout(nil, info.Shape, shape); !ok || exec.Numel(info.Shape) != exec.Numel(shape) {
		return nil, 0, false
	}
	t, err := x.tr.Tensor(key)
	if err != nil {
		return nil, 0, false
	}
	v, err := t.Float32()
	if err != nil {
		return nil, 0, false
	}
	v, _ = program.Relayout(slices.Clone(v), info.Shape, shape)
	f := precision.F32
	switch info.DType {
	case trace.BFloat16:
		f = precision.BF16
	case trace.Float16:
		f = precision.F16
	}
	return v, f, true
}

func (x *refEval) override(step int, tp program.Tap, like exec.Tensor) (exec.Tensor, bool, error) {
	key := tp.Key(step)
	ref, _, ok := x.refValues(key, like.Shape())
	if !ok {
		return nil, false, nil
	}
	ours := like
	if o, ok := x.orig[like]; ok {
		ours = o
	}
	if err := x.compare(step, key, tp.Module, tp.Port, ours); err != nil {
		return nil, false, err
	}
	t, err := x.b.Upload(ref, like.Shape(), like.Format())
	if err != nil {
		return nil, false, err
	}
	x.info[t] = refInfo{}
	x.orig[t] = ours
	return t, true, nil
}

func (x *refEval) observe(step int, tp program.Tap, t exec.Tensor) error {
	return x.compare(step, tp.Key(step), tp.Module, tp.Port, t)
}

func (x *refEval) compare(step int, key, module, port string, t exec.Tensor) error {
	ref, f, ok := x.refValues(key, t.Shape())
	if !ok {
		return nil
	}
	if _, ok := x.info[t]; !ok && x.flow && module == x.model.Module && port == x.model.Inputs["timestep"] {
		var in refInfo // the timestep the runner casts, outside the program
		in.deps.set(x.units.id(Unit{Op: "cast", Role: roleTimestep}))
		in.makers = in.deps
		x.info[t] = in
	}
	ours, err := x.b.Download(t)
	if err != nil {
		return err
	}
	ti := x.info[t]
	var n, exact int
	for i := range ref {
		n++
		if exactIn(t.Format(), f, ours[i], ref[i]) {
			exact++
		}
	}
	var sum precision.Sums
	sum.Add(f, ours, ref)
	sd, sr := sum.D2, sum.R2
	if sum.Mismatched > 0 {
		sd = math.Inf(1)
	}
	classes := func(b bits) string {
		e := &Evaluator{units: x.units}
		return e.className(b)
	}
	opClass := classes(ti.makers)
	if opClass == "" {
		opClass = ClassCopy
	}
	x.recs = append(x.recs, Record{Key: key, Step: step, Module: module, Port: port, Shape: slices.Clone(t.Shape()),
		Format: f, OursFormat: t.Format(), N: n, Exact: exact, SumD2: sd, SumR2: sr, Masked: sum.Masked, Mismatched: sum.Mismatched, OpClass: opClass,
		DependsOn: classes(ti.deps), cone: ti.deps, Ours: ours, Ref: ref})
	return nil
}

func (x *refEval) runFlow(limit int, d *semantics.Document) error {
	r := x.r
	total := r.Steps()
	steps := total
	if limit > 0 {
		steps = min(total, limit)
	}
	latPort := x.model.Inputs["latents"]
	scale, update := x.units.id(Unit{Op: "mul", Role: roleScale}), x.units.id(Unit{Op: "add", Role: roleUpdate})
	xt := r.Latents()
	var carried *refInfo
	for i := range steps {
		x.reset()
		if carried != nil {
			x.info[xt] = *carried
		}
		outs, err := r.Forward(i, xt)
		if err != nil {
			return err
		}
		xu := xt
		if !x.free {
			like := r.Latents()
			if ref, _, ok := x.refValues(program.Tap{Module: x.model.Module, Port: latPort}.Key(i), like.Shape()); ok {
				if xu, err = x.b.Upload(ref, like.Shape(), like.Format()); err != nil {
					return err
				}
			}
		}
		next, err := r.Update(i, xu, outs[0])
		if err != nil {
			return err
		}
		var ni refInfo
		ni.deps.set(scale)
		ni.deps.set(update)
		ni.makers.set(update)
		if i+1 < steps {
			xt, carried = next, &ni
			continue
		}
		key, module, port := "output/"+outputOf(d), "", outputOf(d)
		if i+1 < total {
			key = program.Tap{Module: x.model.Module, Port: latPort}.Key(i + 1)
			module, port = x.model.Module, latPort
		}
		x.info[next] = ni
		return x.compare(i+1, key, module, port, next)
	}
	return nil
}

// sameRecords says how two runs' records differ ("" when they do not): in
// keys and order, values counted, exact values, sums, formats and classes.
func sameRecords(got, want []Record) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if g.Key != w.Key || g.N != w.N || g.Exact != w.Exact || g.SumD2 != w.SumD2 || g.SumR2 != w.SumR2 ||
			g.Masked != w.Masked || g.Mismatched != w.Mismatched ||
			g.Format != w.Format || g.OursFormat != w.OursFormat || g.OpClass != w.OpClass || g.DependsOn != w.DependsOn ||
			!slices.Equal(g.Shape, w.Shape) {
			return fmt.Sprintf("record %d: %s N %d exact %d sums %g %g %s/%s %s <%s>\n  want %s N %d exact %d sums %g %g %s/%s %s <%s>",
				i, g.Key, g.N, g.Exact, g.SumD2, g.SumR2, g.Format, g.OursFormat, g.OpClass, g.DependsOn,
				w.Key, w.N, w.Exact, w.SumD2, w.SumR2, w.Format, w.OursFormat, w.OpClass, w.DependsOn)
		}
	}
	return ""
}
