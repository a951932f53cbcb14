package structure

import (
	"errors"
	"fmt"
	"github.com/zflow/zflow/search/sampler"
	"slices"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Run kinds, stream names, value roles: the schema's vocabulary
// (semantics/SCHEMA.md), never a model's.
const (
	runFlow    = "flow_euler"
	runForward = "forward"
	image      = "image"
	text       = "text"
	joint      = "joint"
	condRole   = "cond"
)

// Tolerances of the value tests (rel-RMS). Captured tensors are rounded
// to their stored format (bf16: 2⁻⁹ relative), and what is recomputed
// here is computed in another order, so a true relation shows a few 0.1%
// and a false one tens of percent.
const (
	tolSame   = 5e-3 // the same values after a cast
	tolFunc   = 3e-2 // y = f(x) for a pointwise f, or an affine map per channel
	tolAttn   = 0.1  // a teacher-forced attention against its captured output
	tolMargin = 2.0  // the winner of a value test beats the runner-up by this
)

// discoverer holds one discovery's state.
type discoverer struct {
	tr   *trace.Trace
	v    *values
	g    *graph
	st   semantics.Structure
	und  []semantics.Undetermined
	loop *sampler.Loop

	step    int
	linears map[*node]linearInfo
	blocks  []*node
	sigs    []string       // each block's parameter-shape signature
	tokens  map[string]int // stream → rows
	cond    *port
	hasCond bool
	tables  []table // RoPE tables the blocks read
	used    map[string]bool
	facts   []*blockFacts
}

// Discover reads the structure of the model in tr from its call tree,
// tensor shapes, parameter shapes and captured values (never from a
// module, class or parameter name). What it cannot decide is returned as
// undetermined, with the reason (a part it cannot read at all, such as
// the blocks or an embedder, is left out and named there); the error is
// for traces with nothing to discover (no model call with parameters, no
// block and no embedder).
func Discover(tr *trace.Trace) (semantics.Structure, []semantics.Undetermined, error) {
	d := &discoverer{tr: tr, v: newValues(tr), linears: map[*node]linearInfo{}, tokens: map[string]int{}, used: map[string]bool{}}
	if err := d.discover(); err != nil {
		return semantics.Structure{}, d.und, err
	}
	return d.st, d.und, nil
}

func (d *discoverer) undetermined(name, scope, format string, args ...any) {
	d.und = append(d.und, semantics.Undetermined{Name: name, Scope: scope, Reason: fmt.Sprintf(format, args...)})
}

func (d *discoverer) discover() error {
	if err := d.findModel(); err != nil {
		return err
	}
	for _, n := range d.g.nodes {
		if li, ok := n.linear(); ok {
			d.linears[n] = li
		}
	}
	if err := d.findBlocks(); err != nil {
		if !errors.Is(err, errNoBlocks) {
			return err
		}
		// A partial structure: what comes before and after blocks is
		// still read; the document says none were found.
		d.undetermined("structure.blocks", "blocks", "%v", err)
	}
	if err := d.findEmbedders(); err != nil {
		return err
	}
	if d.st.Hidden == 0 {
		if len(d.blocks) == 0 {
			return fmt.Errorf("%s: nothing to discover: no call holds an attention and no linear or table reads a request input", d.tr.Path)
		}
		d.hiddenFromBlocks()
	}
	d.findCond()
	d.findConditioning()
	d.findPositions()
	for i, b := range d.blocks {
		d.analyseBlock(i, b)
	}
	d.checkSignatures()
	d.findFinal()
	d.orderInputs()
	d.unassigned()
	return nil
}

// findModel: the per-step call of a flow-matching loop (sampler.FindLoop)
// or, without one, the root call of the first step holding the most
// parameters.
func (d *discoverer) findModel() error {
	var model trace.Call
	if l, err := sampler.FindLoop(d.tr); err == nil {
		d.loop = l
		d.step = l.Steps[0]
		c, ok := l.Call(d.tr, d.step)
		if !ok {
			return fmt.Errorf("%s: the sampler's model call at step %d is missing", d.tr.Path, d.step)
		}
		model = c
		d.st.Run = runFlow
	} else {
		steps := d.tr.Steps()
		best := -1
		for _, c := range d.tr.Tree().Calls() {
			if c.Parent != nil || (len(steps) > 0 && (c.Step == nil || *c.Step != steps[0])) {
				continue
			}
			g, err := newGraph(d.tr, c.ID)
			if err != nil {
				return err
			}
			if k := g.root.subParams(); k > best {
				best, model = k, c
			}
		}
		if best <= 0 {
			return fmt.Errorf("%s: no root call with parameters: nothing to discover (%v)", d.tr.Path, err)
		}
		if len(steps) > 0 {
			d.step = steps[0]
		}
		d.st.Run = runForward
	}
	g, err := newGraph(d.tr, model.ID)
	if err != nil {
		return err
	}
	d.g = g
	d.st.Model = semantics.Boundary{Module: model.Module, Inputs: map[string]string{}, Outputs: map[string]string{}}
	if d.loop != nil {
		d.st.Model.Inputs["latents"] = d.loop.Latents
		if d.loop.Timestep != "" {
			d.st.Model.Inputs["timestep"] = d.loop.Timestep
		}
		d.st.Model.Outputs["velocity"] = d.loop.Velocity
		d.addInput("latents", d.loop.Noise)
		d.addInput("sigmas", d.loop.Sigmas)
		if d.loop.Final != "" {
			d.st.Outputs = []semantics.Output{{Role: "latents", Name: d.loop.Final}}
		} else {
			d.undetermined("structure.outputs", "model", "no request output has the latents' shape: the final x was not captured")
		}
		return nil
	}
	// forward: the model's result that is a request output.
	for _, o := range g.root.outs {
		if name, ok := d.requestOutput(o); ok {
			d.st.Model.Outputs["hidden"] = o.name
			d.st.Outputs = []semantics.Output{{Role: "hidden", Name: name}}
			return nil
		}
	}
	if o, ok := g.root.out(); ok {
		d.st.Model.Outputs["hidden"] = o.name
	}
	d.undetermined("structure.outputs", "model", "no request output holds the model call's result")
	return nil
}

// addInput records a request input by role, with its shape.
func (d *discoverer) addInput(role, name string) {
	for _, in := range d.st.Inputs {
		if in.Role == role {
			return
		}
	}
	info, err := d.tr.Info(d.tr.Manifest.Inputs[name])
	if err != nil {
		return
	}
	d.st.Inputs = append(d.st.Inputs, semantics.Input{Role: role, Name: name, Shape: slices.Clone(info.Shape)})
}

// requestInput names the request input holding exactly p's values.
func (d *discoverer) requestInput(p port) (string, bool) {
	return d.requestTensor(p, d.tr.Manifest.Inputs)
}

func (d *discoverer) requestOutput(p port) (string, bool) {
	return d.requestTensor(p, d.tr.Manifest.Outputs)
}

func (d *discoverer) requestTensor(p port, m map[string]string) (string, bool) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		info, err := d.tr.Info(m[n])
		if err != nil {
			continue
		}
		q := port{name: n, key: m[n], dt: info.DType, shape: info.Shape}
		if d.v.same(p, q) {
			return n, true
		}
	}
	return "", false
}

// orderInputs sorts the inputs by role in the schema's order.
func (d *discoverer) orderInputs() {
	rank := map[string]int{}
	for i, r := range []string{"latents", "sigmas", "context", "pooled", "token_ids", "positions.image", "positions.text"} {
		rank[r] = i
	}
	slices.SortStableFunc(d.st.Inputs, func(a, b semantics.Input) int { return rank[a.Role] - rank[b.Role] })
}

// unassigned reports every parameter of the model that no role names.
func (d *discoverer) unassigned() {
	for _, n := range d.g.nodes {
		for _, p := range n.params {
			if !d.used[p.name] {
				d.undetermined("structure.roles", "model", "parameter %q %v (of call %s) plays no role this discovery found", p.name, p.shape, n.c.Module)
			}
		}
	}
}

// use marks a role's parameters as assigned.
func (d *discoverer) use(r semantics.Role) semantics.Role {
	for _, p := range []string{r.Weight, r.Bias} {
		if p != "" {
			d.used[p] = true
		}
	}
	return r
}

// linearRole is the role of a linear call.
func (d *discoverer) linearRole(li linearInfo) semantics.Role {
	return d.use(semantics.Role{Module: li.n.c.Module, Weight: li.w, Bias: li.b})
}

var errNoBlocks = errors.New("no blocks")

// outside reports whether n is outside every block.
func (d *discoverer) outside(n *node) bool {
	for _, b := range d.blocks {
		if n.within(b) {
			return false
		}
	}
	return true
}

// tokensOf is the sequence length of rows: the second-to-last axis.
func tokensOf(p port) int {
	if len(p.shape) >= 2 {
		return p.shape[len(p.shape)-2]
	}
	return 1
}

// streamOf names the stream whose rows p holds ("joint" for all streams
// joined), "" for none.
func (d *discoverer) streamOf(p port) string {
	t := tokensOf(p)
	var names []string
	total := 0
	for _, s := range []string{image, text} {
		if n, ok := d.tokens[s]; ok {
			total += n
			if n == t {
				names = append(names, s)
			}
		}
	}
	switch {
	case len(names) == 1:
		return names[0]
	case len(names) == 0 && len(d.tokens) == 2 && t == total:
		return joint
	}
	return ""
}
