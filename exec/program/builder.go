package program

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// Shapes are what Build needs to know of a request besides the document:
// every weight's shape by parameter path and every input's by role.
type Shapes struct {
	Weights map[string][]int
	Inputs  map[string][]int
}

// builder holds the state of one Build.
type builder struct {
	doc    *semantics.Document
	st     *semantics.Structure
	shapes Shapes
	p      *Program
	acts   precision.Format // activations
	// streams: each stream's current value and its rows.
	stream map[string]string
	tokens map[string]int
	joint  []string // stream names in joint order
	cond   string   // the conditioning vector, "" when there is none
	cos    string   // RoPE tables, "" when there are none
	sin    string
	rotary int // Σ rope axes
	// patch: the latents' patchify (patch_layout c_ph_pw), undone after the
	// head; nil when the latents arrive as tokens.
	patch *exec.PatchParams
	// pass: the addresses of blocks a partial program passes (partial.go).
	pass map[string]bool
	// alone: a part built by itself (build_alone.go): its result is not
	// the model's, and its timestep is given whatever the run.
	alone bool
}

// Build makes the program of doc for a request of the given shapes. Every
// refusal (a part the document leaves out, a role without a weight of the
// right shape, a factor the document lacks, a value this builder does not
// support) is an error that names the part of the structure and the
// reason.
func Build(doc *semantics.Document, shapes Shapes) (*Program, error) {
	if doc.Program != nil {
		p, err := buildProgram(doc, shapes)
		if err != nil {
			return nil, fmt.Errorf("program: %w", err)
		}
		return p, nil
	}
	if hs := doc.Holes(); len(hs) > 0 {
		return nil, fmt.Errorf("program: the document is incomplete: %s is not expressed (%s); no program is built from it", hs[0].Address, hs[0].Problem)
	}
	return build(doc, shapes, nil)
}

func build(doc *semantics.Document, shapes Shapes, pass map[string]bool) (*Program, error) {
	act, err := precision.ParseFormat(doc.Precision.Activations)
	if err != nil {
		return nil, fmt.Errorf("program: precision.activations: %w", err)
	}
	b := &builder{
		doc: doc, st: &doc.Structure, shapes: shapes, acts: act,
		p:      &Program{Values: map[string]*Value{}},
		stream: map[string]string{}, tokens: map[string]int{}, pass: pass,
	}
	if err := b.build(); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	if err := b.p.finalize(); err != nil {
		return nil, err
	}
	return b.p, nil
}

func (b *builder) build() error {
	if err := b.declareInputs(); err != nil {
		return err
	}
	if err := b.jointOrder(); err != nil && !b.passesUnjoined() {
		return err
	}
	model := b.begin("model", b.st.Model.Module)
	for i := range b.st.Embedders {
		if err := b.embedder(&b.st.Embedders[i]); err != nil {
			return err
		}
	}
	if err := b.conditioning(); err != nil {
		return err
	}
	if !b.skipPositions() {
		if err := b.positions(); err != nil {
			return err
		}
	}
	for i := range b.st.Blocks {
		if err := b.block(i, &b.st.Blocks[i]); err != nil {
			return err
		}
	}
	out, err := b.final()
	if err != nil {
		return err
	}
	b.p.Outputs = []string{out}
	for _, role := range sortedNames(b.st.Model.Outputs) {
		port := b.st.Model.Outputs[role]
		if role != "velocity" && role != "hidden" {
			return fmt.Errorf("structure.model.outputs: unknown role %q", role)
		}
		b.tap(out, b.st.Model.Module, port, false)
	}
	b.end(model)
	return nil
}

// begin opens a segment; end closes it at the current node.
func (b *builder) begin(address, module string) int {
	b.p.Segments = append(b.p.Segments, Segment{Address: address, Module: module, Start: len(b.p.Nodes), End: -1})
	return len(b.p.Segments) - 1
}

func (b *builder) end(i int) { b.p.Segments[i].End = len(b.p.Nodes) }

// addValue registers a value under a unique name.
func (b *builder) addValue(v *Value) string {
	name := v.Name
	for i := 2; b.p.Values[name] != nil; i++ {
		name = v.Name + "#" + strconv.Itoa(i)
	}
	v.Name = name
	b.p.Values[name] = v
	b.p.Order = append(b.p.Order, name)
	return name
}

// weight declares the weight at path (once) and returns its value name.
func (b *builder) weight(path string) (string, error) {
	name := "param:" + path
	if _, ok := b.p.Values[name]; ok {
		return name, nil
	}
	shape, ok := b.shapes.Weights[path]
	if !ok {
		return "", fmt.Errorf("weight %q is not in the weights", path)
	}
	return b.addValue(&Value{Name: name, Kind: Weight, Source: path, Shape: slices.Clone(shape)}), nil
}

// optWeight is weight for an optional path ("" stays "").
func (b *builder) optWeight(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	return b.weight(path)
}

// constant declares host data.
func (b *builder) constant(name string, data []float32, shape []int, f precision.Format) string {
	return b.addValue(&Value{Name: "const:" + name, Kind: Const, Data: data, Shape: shape, Format: f})
}

// tap records that value name is the reference's tensor at module/port.
func (b *builder) tap(name, module, port string, in bool) {
	if module == "" || port == "" || name == "" {
		return
	}
	v := b.p.Values[name]
	v.Taps = append(v.Taps, Tap{Module: module, Port: port, In: in})
}

// tapRoleInput taps the value a linear or norm role reads at its
// module's first positional argument (arg0): the module is called on it.
// The tap is an output tap (In false): it is observed when the value is
// made, wherever that is (a modulated norm feeding q/k/v, an attention
// output entering the out projection, a residual entering a norm), which
// puts elementwise results between roles on the boundary list.
func (b *builder) tapRoleInput(x string, r semantics.Role) {
	if r.Module != "" {
		b.tap(x, r.Module, "arg0", false)
	}
}

// tapRole taps a role's output port on its module.
func (b *builder) tapRole(name string, r semantics.Role) {
	if r.Module != "" {
		b.tap(name, r.Module, r.OutPort(), false)
	}
}

// spec is the precision of a node of op with the given role: the first
// precision rule that matches, else the activations format alone.
func (b *builder) spec(op Op, role string) (exec.Spec, error) {
	return SpecFor(&b.doc.Precision, op.String(), role)
}

// SpecFor resolves the precision spec of an op with the given role from a
// document's precision plan.
func SpecFor(pr *semantics.Precision, op, role string) (exec.Spec, error) {
	act, err := precision.ParseFormat(pr.Activations)
	if err != nil {
		return exec.Spec{}, fmt.Errorf("precision.activations: %w", err)
	}
	s := exec.Spec{Out: act}
	r, ok := pr.Rule(op, role)
	if !ok {
		return s, nil
	}
	if r.Out != "" {
		if s.Out, err = precision.ParseFormat(r.Out); err != nil {
			return exec.Spec{}, fmt.Errorf("precision rule for %s %s: %w", op, role, err)
		}
	}
	if s.Round, err = exec.ParseRound(r.Round); err != nil {
		return exec.Spec{}, fmt.Errorf("precision rule for %s %s: %w", op, role, err)
	}
	if s.Math, err = exec.ParseMath(r.Math); err != nil {
		return exec.Spec{}, fmt.Errorf("precision rule for %s %s: %w", op, role, err)
	}
	return s, nil
}

// emit appends a node, inferring and checking its output shapes, and
// returns its outputs' value names (named after role).
func (b *builder) emit(op Op, role string, in []string, attrs Attrs) ([]string, error) {
	n := Node{Op: op, Role: role, In: in, Attrs: attrs}
	shapes := make([][]int, len(in))
	for i, name := range in {
		if name == "" {
			continue
		}
		v, ok := b.p.Values[name]
		if !ok {
			return nil, fmt.Errorf("%s: input %q does not exist", role, name)
		}
		shapes[i] = v.Shape
	}
	outs, err := inferShapes(&n, shapes)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", role, op, err)
	}
	if !op.exact() {
		if n.Spec, err = b.spec(op, role); err != nil {
			return nil, err
		}
	}
	for i, s := range outs {
		name := role
		if len(outs) > 1 {
			name += "." + strconv.Itoa(i)
		}
		n.Out = append(n.Out, b.addValue(&Value{Name: name, Kind: Temp, Shape: s}))
	}
	b.p.Nodes = append(b.p.Nodes, n)
	return n.Out, nil
}

// emit1 is emit for a single-output op.
func (b *builder) emit1(op Op, role string, in []string, attrs Attrs) (string, error) {
	outs, err := b.emit(op, role, in, attrs)
	if err != nil {
		return "", err
	}
	return outs[0], nil
}

func (b *builder) shape(name string) []int { return b.p.Values[name].Shape }

// shapeFormat is the storage format of node i's result.
func (b *builder) shapeFormat(i int) precision.Format { return b.p.Nodes[i].Spec.Out }
