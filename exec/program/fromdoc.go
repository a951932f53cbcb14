package program

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// Value names the runner gives a flow_euler program's step inputs.
const (
	StepLatents  = stepLatents
	StepTimestep = stepTimestep
	// StepNextTimestep is the step input σ[i+1] (source "next_timestep").
	StepNextTimestep = stepNextTimestep
	// StepIndex is the step input i, the model call's index (source "index").
	StepIndex = stepIndex
)

// ParseOp reads an op's name (Op.String).
func ParseOp(name string) (Op, error) {
	for o := Op(1); o < opEnd; o++ {
		if o.String() == name {
			return o, nil
		}
	}
	return 0, fmt.Errorf("program: unknown op %q", name)
}

var valueKindNames = map[string]ValueKind{"weight": Weight, "input": Input, "step_input": StepInput, "const": Const, "temp": Temp}

// kindName is the document's name of a value kind.
func kindName(k ValueKind) string {
	for n, v := range valueKindNames {
		if v == k {
			return n
		}
	}
	return ""
}

// buildProgram makes the program a version 2 document carries, for a
// request of the given shapes: each weight and input must have the shape
// the program was recovered at (a program is built for one request's
// shapes), every node's output shape is inferred and checked, and every
// node's precision comes from the document's rules by op and role.
func buildProgram(doc *semantics.Document, shapes Shapes) (*Program, error) {
	dp := doc.Program
	p := &Program{Values: map[string]*Value{}}
	for _, dv := range dp.Values {
		k, ok := valueKindNames[dv.Kind]
		if !ok {
			return nil, fmt.Errorf("value %q: unknown kind %q", dv.Name, dv.Kind)
		}
		v := &Value{Name: dv.Name, Kind: k, Source: dv.Source, Shape: slices.Clone(dv.Shape)}
		for _, t := range dv.Taps {
			v.Taps = append(v.Taps, Tap{Module: t.Module, Port: t.Port, In: t.In})
		}
		var have []int
		switch k {
		case Weight:
			have, ok = shapes.Weights[dv.Source]
		case Input:
			have, ok = shapes.Inputs[dv.Source]
		case StepInput:
			if isLatents(dv.Source) {
				have, ok = shapes.Inputs[dv.Source]
			} else {
				have, ok = dv.Shape, true
			}
		case Const:
			f, err := precision.ParseFormat(dv.Format)
			if err != nil {
				return nil, fmt.Errorf("const %q: %w", dv.Name, err)
			}
			v.Format, v.Data = f, dv.Data
			have, ok = dv.Shape, true
		default:
			have, ok = dv.Shape, true
		}
		if !ok {
			return nil, fmt.Errorf("%s %q (%s): the request has no such %s", dv.Kind, dv.Name, dv.Source, dv.Kind)
		}
		if !slices.Equal(have, dv.Shape) {
			return nil, fmt.Errorf("%s %q (%s) is %v; the program was recovered for %v (a program is built for one request's shapes)", dv.Kind, dv.Name, dv.Source, have, dv.Shape)
		}
		if p.Values[v.Name] != nil {
			return nil, fmt.Errorf("value %q declared twice", v.Name)
		}
		p.Values[v.Name] = v
		p.Order = append(p.Order, v.Name)
	}
	for i, dn := range dp.Nodes {
		n, err := nodeFromDoc(&doc.Precision, dn)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s %s): %w", i, dn.Op, dn.Role, err)
		}
		in := make([][]int, len(n.In))
		for j, name := range n.In {
			if name == "" {
				continue
			}
			v, ok := p.Values[name]
			if !ok {
				return nil, fmt.Errorf("node %d (%s %s): input %q is not declared", i, dn.Op, dn.Role, name)
			}
			in[j] = v.Shape
		}
		outs, err := inferShapes(&n, in)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s %s): %w", i, dn.Op, dn.Role, err)
		}
		if len(outs) != len(n.Out) {
			return nil, fmt.Errorf("node %d (%s %s): %d outputs named, the op makes %d", i, dn.Op, dn.Role, len(n.Out), len(outs))
		}
		for j, name := range n.Out {
			v, ok := p.Values[name]
			if !ok {
				return nil, fmt.Errorf("node %d (%s %s): output %q is not declared", i, dn.Op, dn.Role, name)
			}
			if !slices.Equal(v.Shape, outs[j]) {
				return nil, fmt.Errorf("node %d (%s %s): output %q is declared %v, the op makes %v", i, dn.Op, dn.Role, name, v.Shape, outs[j])
			}
		}
		p.Nodes = append(p.Nodes, n)
	}
	for _, s := range dp.Segments {
		p.Segments = append(p.Segments, Segment{Address: s.Address, Module: s.Module, Start: s.Start, End: s.End})
	}
	p.Outputs = slices.Clone(dp.Outputs)
	if err := p.finalize(); err != nil {
		return nil, err
	}
	return p, nil
}

// nodeFromDoc converts a document node, resolving its precision spec.
func nodeFromDoc(pr *semantics.Precision, dn semantics.ProgramNode) (Node, error) {
	op, err := ParseOp(dn.Op)
	if err != nil {
		return Node{}, err
	}
	n := Node{Op: op, In: slices.Clone(dn.In), Out: slices.Clone(dn.Out), Role: dn.Role}
	a, d := &n.Attrs, &dn.Attrs
	if d.Act != "" {
		if a.Act, err = exec.ParseAct(d.Act); err != nil {
			return Node{}, err
		}
	}
	if m := d.Norm; m != nil {
		a.Norm = exec.NormParams{Eps: float32(m.Eps), Offset: float32(m.Offset), Group: m.Group}
		switch m.Kind {
		case "layer":
			a.Norm.Kind = exec.NormLayer
		case "rms":
			a.Norm.Kind = exec.NormRMS
		default:
			return Node{}, fmt.Errorf("norm kind %q", m.Kind)
		}
	}
	a.Modulate.PlusOne = d.PlusOne
	if r := d.Rope; r != nil {
		l, err := parseRopeLayout(r.Layout)
		if err != nil {
			return Node{}, err
		}
		a.Rope = exec.RopeParams{Heads: r.Heads, Layout: l, RotaryDim: r.RotaryDim}
	}
	if t := d.Attention; t != nil {
		a.Attention = attentionFromDoc(t)
		switch t.Mask {
		case "", "none":
			a.Attention.Mask = exec.MaskNone
		case "causal":
			a.Attention.Mask = exec.MaskCausal
		case "explicit":
			a.Attention.Mask = exec.MaskExplicit
		default:
			return Node{}, fmt.Errorf("attention mask %q", t.Mask)
		}
	}
	if t := d.Timestep; t != nil {
		a.Timestep = exec.TimestepParams{Dim: t.Dim, FlipSinToCos: t.FlipSinToCos, FreqShift: float32(t.FreqShift),
			Scale: float32(t.Scale), MaxPeriod: float32(t.MaxPeriod)}
		for _, o := range t.FreqOverrides {
			if o.Index < 0 || o.Index >= t.Dim/2 || !(math.Abs(o.Value) <= math.MaxFloat32) {
				return Node{}, fmt.Errorf("timestep frequency override %d = %g: outside [0, %d) or not an f32", o.Index, o.Value, t.Dim/2)
			}
			a.Timestep.FreqOverrides = append(a.Timestep.FreqOverrides, exec.FreqOverride{Index: o.Index, Value: float32(o.Value)})
		}
	}
	if t := d.RopeTable; t != nil {
		l, err := parseRopeLayout(t.Layout)
		if err != nil {
			return Node{}, err
		}
		ff, err := precision.ParseFormat(t.FreqFormat)
		if err != nil {
			return Node{}, err
		}
		af, err := precision.ParseFormat(t.AngleFormat)
		if err != nil {
			return Node{}, err
		}
		a.RopeTable = exec.RopeTableParams{Theta: t.Theta, AxesDims: slices.Clone(t.AxesDims), Layout: l, FreqFormat: ff, AngleFormat: af, Rotated: slices.Clone(t.Rotated), FreqAxes: slices.Clone(t.FreqAxes), Joined: t.Joined}
	}
	if t := d.Patch; t != nil {
		a.Patch = exec.PatchParams{Patch: t.Patch, Height: t.Height, Width: t.Width}
	}
	if d.Format != "" {
		if a.Format, err = precision.ParseFormat(d.Format); err != nil {
			return Node{}, err
		}
	}
	a.Shape, a.Perm = slices.Clone(d.Shape), slices.Clone(d.Perm)
	a.Axis, a.Start, a.End, a.N = d.Axis, d.Start, d.End, d.N
	if r := d.Route; r != nil {
		if !slices.Contains(RouteScores, r.Score) {
			return Node{}, fmt.Errorf("route: score %q is not one of softmax, sigmoid or none", r.Score)
		}
		if r.Margin != 0 && (!r.Stepwise || !(r.Margin > 0 && r.Margin <= math.MaxFloat32)) {
			return Node{}, fmt.Errorf("route: margin %g must be a positive finite number of a stepwise router", r.Margin)
		}
		a.Route = RouteParams{K: r.K, Score: r.Score, Normalize: r.Normalize, Scale: float32(r.Scale), TiesHigh: r.TiesHigh, Chosen: r.Chosen, Dense: r.Dense, Stepwise: r.Stepwise, Margin: float32(r.Margin)}
	}
	a.UpFirst = d.UpFirst
	if x := d.Experts; x != nil {
		a.Experts = ExpertsParams{Beta: float32(x.Beta), Limit: float32(x.Limit), UpOffset: float32(x.UpOffset), Ungated: x.Ungated, Squared: x.Squared}
		if err := a.Experts.check(a.Act); err != nil {
			return Node{}, err
		}
	}
	if c := d.Conv; c != nil {
		a.Conv = ConvParams{Pad: c.Pad, Groups: c.Groups, Stride: c.Stride, Seq: c.Seq, Kernel: c.Kernel, Ceil: c.Ceil, Dilation: c.Dilation}
	}
	if l := d.LinearAttention; l != nil {
		k, err := exec.ParseAct(l.Kernel)
		if err != nil {
			return Node{}, fmt.Errorf("linear attention kernel: %w", err)
		}
		a.LinearAttention = LinearAttentionParams{Heads: l.Heads, Kernel: k, Eps: float32(l.Eps)}
	}
	if m := d.Memory; m != nil {
		a.Memory = MemoryParams{Eps: float32(m.Eps)}
	}
	if r := d.Recurrence; r != nil {
		c, err := exec.ParseCell(r.Cell)
		if err != nil {
			return Node{}, err
		}
		a.Recurrence = exec.RecurrenceParams{Cell: c, Reverse: r.Reverse}
	}
	if k := d.Sinkhorn; k != nil {
		a.Sinkhorn = exec.SinkhornParams{Steps: k.Steps, Eps: float32(k.Eps), RowsFirst: k.RowsFirst}
	}
	if g := d.Angular; g != nil {
		a.Angular = AngularParams{Heads: g.Heads, Power: g.Power}
	}
	if r := d.Bucket; r != nil {
		a.Bucket = BucketParams{NumBuckets: r.NumBuckets, MaxDistance: r.MaxDistance, Bidirectional: r.Bidirectional, SignedLog: r.SignedLog}
		if err := a.Bucket.check(); err != nil {
			return Node{}, err
		}
	}
	if !op.exact() {
		if n.Spec, err = SpecFor(pr, op.String(), n.Role); err != nil {
			return Node{}, err
		}
	}
	return n, nil
}

// withSpecs is p with every node's spec resolved from pr (buildProgram's
// program of the same document under another plan): the nodes are new,
// the values, constants included, are p's.
func (p *Program) withSpecs(pr *semantics.Precision) (*Program, error) {
	q := *p
	q.Nodes = slices.Clone(p.Nodes)
	for i := range q.Nodes {
		n := &q.Nodes[i]
		if n.Op.exact() {
			continue
		}
		var err error
		if n.Spec, err = SpecFor(pr, n.Op.String(), n.Role); err != nil {
			return nil, fmt.Errorf("node %d (%s %s): %w", i, n.Op, n.Role, err)
		}
	}
	return &q, nil
}

func parseRopeLayout(s string) (exec.RopeLayout, error) {
	switch s {
	case "interleaved":
		return exec.RopeInterleaved, nil
	case "half":
		return exec.RopeHalf, nil
	}
	return 0, fmt.Errorf("rope layout %q", s)
}

// ToDoc writes a program in the document's form (the inverse of what a
// version 2 document's Build reads; precision specs are not written: they
// come from the document's rules).
func ToDoc(p *Program) *semantics.Program {
	dp := &semantics.Program{Outputs: slices.Clone(p.Outputs)}
	for _, name := range p.Order {
		v := p.Values[name]
		dv := semantics.ProgramValue{Name: v.Name, Kind: kindName(v.Kind), Source: v.Source, Shape: slices.Clone(v.Shape)}
		if v.Kind == Const {
			dv.Format, dv.Data = v.Format.String(), slices.Clone(v.Data)
		}
		for _, t := range v.Taps {
			dv.Taps = append(dv.Taps, semantics.ProgramTap{Module: t.Module, Port: t.Port, In: t.In})
		}
		dp.Values = append(dp.Values, dv)
	}
	for _, n := range p.Nodes {
		dp.Nodes = append(dp.Nodes, semantics.ProgramNode{Op: n.Op.String(), In: slices.Clone(n.In), Out: slices.Clone(n.Out), Role: n.Role, Attrs: attrsToDoc(n.Op, &n.Attrs)})
	}
	for _, s := range p.Segments {
		dp.Segments = append(dp.Segments, semantics.ProgramSegment{Address: s.Address, Module: s.Module, Start: s.Start, End: s.End})
	}
	return dp
}

// attrsToDoc writes the attributes op reads.
func attrsToDoc(op Op, a *Attrs) semantics.NodeAttrs {
	var d semantics.NodeAttrs
	switch op {
	case OpAct, OpGLU, OpGatedResidual, OpExperts:
		d.Act = a.Act.String()
	case OpNorm:
		d.Norm = &semantics.NormAttrs{Kind: a.Norm.Kind.String(), Eps: float64(a.Norm.Eps), Offset: float64(a.Norm.Offset), Group: a.Norm.Group}
	case OpModulate:
		d.PlusOne = a.Modulate.PlusOne
	case OpConv2D:
		d.Conv = &semantics.ConvAttrs{Pad: a.Conv.Pad, Groups: a.Conv.Groups, Stride: a.Conv.Stride, Seq: a.Conv.Seq, Dilation: a.Conv.Dilation}
	case OpMaxPool2D:
		d.Conv = &semantics.ConvAttrs{Pad: a.Conv.Pad, Stride: a.Conv.Stride, Kernel: a.Conv.Kernel, Ceil: a.Conv.Ceil}
	case OpAngular:
		d.Angular = &semantics.AngularAttrs{Heads: a.Angular.Heads, Power: a.Angular.Power}
	case OpSinkhorn:
		d.Sinkhorn = &semantics.SinkhornAttrs{Steps: a.Sinkhorn.Steps, Eps: float64(a.Sinkhorn.Eps), RowsFirst: a.Sinkhorn.RowsFirst}
	case OpRecurrence:
		d.Recurrence = &semantics.RecurrenceAttrs{Cell: a.Recurrence.Cell.String(), Reverse: a.Recurrence.Reverse}
	case OpMemoryScan:
		d.Memory = &semantics.MemoryAttrs{Eps: float64(a.Memory.Eps)}
	case OpRelBucket:
		d.Bucket = &semantics.BucketAttrs{NumBuckets: a.Bucket.NumBuckets, MaxDistance: a.Bucket.MaxDistance, Bidirectional: a.Bucket.Bidirectional, SignedLog: a.Bucket.SignedLog}
	case OpLinearAttention:
		l := a.LinearAttention
		d.LinearAttention = &semantics.LinearAttentionAttrs{Heads: l.Heads, Kernel: l.Kernel.String(), Eps: float64(l.Eps)}
	case OpRope:
		d.Rope = &semantics.RopeAttrs{Heads: a.Rope.Heads, Layout: a.Rope.Layout.String(), RotaryDim: a.Rope.RotaryDim}
	case OpAttention:
		d.Attention = attentionToDoc(&a.Attention)
		d.Attention.Mask = a.Attention.Mask.String()
	case OpTimestepEmbed:
		t := a.Timestep
		d.Timestep = &semantics.TimestepAttrs{Dim: t.Dim, FlipSinToCos: t.FlipSinToCos, FreqShift: float64(t.FreqShift), Scale: float64(t.Scale), MaxPeriod: float64(t.MaxPeriod)}
		for _, o := range t.FreqOverrides {
			d.Timestep.FreqOverrides = append(d.Timestep.FreqOverrides, semantics.FreqOverride{Index: o.Index, Value: float64(o.Value)})
		}
	case OpRopeTable:
		t := a.RopeTable
		d.RopeTable = &semantics.RopeTableAttrs{Theta: t.Theta, AxesDims: slices.Clone(t.AxesDims), Layout: t.Layout.String(), FreqFormat: t.FreqFormat.String(), AngleFormat: t.AngleFormat.String(), Rotated: slices.Clone(t.Rotated), FreqAxes: slices.Clone(t.FreqAxes), Joined: t.Joined}
	case OpPatchify, OpUnpatchify:
		d.Patch = &semantics.PatchAttrs{Patch: a.Patch.Patch, Height: a.Patch.Height, Width: a.Patch.Width}
	case OpCast:
		d.Format = a.Format.String()
	}
	d.Shape, d.Perm = slices.Clone(a.Shape), slices.Clone(a.Perm)
	d.Axis, d.Start, d.End, d.N = a.Axis, a.Start, a.End, a.N
	if a.Route.K > 0 {
		d.Route = &semantics.RouteAttrs{K: a.Route.K, Score: a.Route.Score, Normalize: a.Route.Normalize, Scale: float64(a.Route.Scale), TiesHigh: a.Route.TiesHigh, Chosen: a.Route.Chosen, Dense: a.Route.Dense, Stepwise: a.Route.Stepwise, Margin: float64(a.Route.Margin)}
	}
	d.UpFirst = a.UpFirst
	if x := a.Experts; op == OpExperts && x != (ExpertsParams{}) {
		d.Experts = &semantics.ExpertsAttrs{Beta: float64(x.Beta), Limit: float64(x.Limit), UpOffset: float64(x.UpOffset), Ungated: x.Ungated, Squared: x.Squared}
	}
	return d
}
