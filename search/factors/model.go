package factors

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Model returns the factors outside the blocks that the trace shows, each
// in its own stage: the final adaptive norm's chunk order and plus-one (at
// the final stage's output) and its modulation_act (at the final
// modulation linear's argument); the conditioning MLP's activation
// (embed_act, at time_out's argument) and the pooled path's (pooled_act,
// at pooled_out's argument: the schema has one embed_act for both, the
// caller merges them); the joint order where the streams are joined
// before the first block (at its joined argument); and patch_layout (at
// the image embedder's argument, from the latents).
func Model(tr *trace.Trace, st *semantics.Structure) ([]search.Factor, search.Objective, error) {
	cp, err := newCapture(tr, st)
	if err != nil {
		return nil, nil, err
	}
	m := &model{tr: tr, st: st, cp: cp, memo: map[string]search.Score{}, shapes: program.Shapes{Weights: map[string][]int{}},
		frag: &plan.Fragment{B: cpu.New(0), Ref: tr, Key: cp.tapKey, Given: map[string]plan.Given{}, Spec: searchSpec}}
	src := program.TraceParams(tr)
	for _, path := range st.ParamPaths() {
		if s, err := src.Shape(path); err == nil {
			m.shapes.Weights[path] = s
		}
	}
	var fs []search.Factor
	if r, ok := st.Final.Roles["modulation"]; ok && r.Module != "" {
		fs = append(fs,
			search.Factor{Name: "final_norm_order", Scope: "final", Values: []any{"scale,shift", "shift,scale"}, Stage: 1},
			search.Factor{Name: "modulation_plus_one", Scope: "final", Values: []any{true, false}, Stage: 1})
		if _, err := m.finalCond(); err == nil {
			fs = append(fs, search.Factor{Name: "modulation_act", Scope: "final", Values: actValues(), Stage: 2})
		}
	}
	if c := st.Conditioning; c != nil && c.Roles["time_in"].Module != "" && c.Roles["time_out"].Module != "" {
		fs = append(fs, search.Factor{Name: "embed_act", Scope: "conditioning", Values: actValues()[1:], Stage: 3})
		if c.Roles["pooled_in"].Module != "" && c.Roles["pooled_out"].Module != "" {
			fs = append(fs, search.Factor{Name: PooledAct, Scope: "conditioning", Values: actValues()[1:], Stage: 4})
		}
	}
	if len(st.Blocks) > 0 && st.Blocks[0].Boundary != nil && st.Blocks[0].Boundary.Inputs["joint"] != "" && len(st.Embedders) == 2 {
		fs = append(fs, search.Factor{Name: "joint_order", Scope: "model", Values: []any{"text_first", "image_first"}, Stage: 5})
	}
	if m.patchable() {
		fs = append(fs, search.Factor{Name: "patch_layout", Scope: "embed.image", Values: []any{"none", "c_ph_pw"}, Stage: 6})
	}
	return fs, search.ObjectiveFunc(m.score), nil
}

// PooledAct is the pooled conditioning path's activation, a factor of
// Model's search that the document writes as embed_act when it agrees
// with the timestep path's.
const PooledAct = "pooled_act"

type model struct {
	tr     *trace.Trace
	st     *semantics.Structure
	cp     *capture
	memo   map[string]search.Score
	shapes program.Shapes
	frag   *plan.Fragment
}

func (m *model) score(_ context.Context, factor string, a search.Assignment) (search.Score, error) {
	var keys []string
	var fn func(search.Assignment) (search.Score, error)
	switch factor {
	case "final_norm_order":
		keys, fn = []string{"final_norm_order", "modulation_plus_one"}, m.scoreFinal
	case "modulation_plus_one":
		keys, fn = []string{"final_norm_order", "modulation_plus_one"}, m.scoreFinal
	case "modulation_act":
		keys, fn = []string{"modulation_act"}, m.scoreFinalAct
	case "embed_act":
		keys, fn = []string{"embed_act"}, func(a search.Assignment) (search.Score, error) { return m.scoreEmbedAct(a["embed_act"], "time") }
	case PooledAct:
		keys, fn = []string{PooledAct}, func(a search.Assignment) (search.Score, error) { return m.scoreEmbedAct(a[PooledAct], "pooled") }
	case "joint_order":
		keys, fn = []string{"joint_order"}, m.scoreJoin
	case "patch_layout":
		keys, fn = []string{"patch_layout"}, m.scorePatch
	default:
		return search.Score{}, fmt.Errorf("factors: no model factor %q", factor)
	}
	memo := fmt.Sprint(keys)
	for _, k := range keys {
		memo += fmt.Sprintf("|%v", a[k])
	}
	if s, ok := m.memo[memo]; ok {
		return s, nil
	}
	s, err := fn(a)
	if err == nil {
		m.memo[memo] = s
	}
	return s, err
}

// modelPlaceholders are the values the parts built alone read that the
// model's search does not decide (the norms', the timestep's), none of
// them in a score's cone: the trace holds every norm's result and the
// timestep's sinusoid.
var modelPlaceholders = map[string]any{
	"norm_kind": "layer", "norm_eps": 1e-6, "norm_offset": 0.0, "modulation_act": "identity",
	"timestep_scale": 1000.0, "timestep_scale_at": "sinusoid", "timestep_flip_sin_to_cos": false,
	"timestep_freq_shift": 0.0, "timestep_max_period": 10000.0,
}

// document is a candidate's document: the structure, the values given
// (over placeholders), every node in f32.
func (m *model) document(vals map[string]any) *semantics.Document {
	doc := &semantics.Document{Format: semantics.FormatName, Version: semantics.Version, Structure: *m.st,
		Precision: semantics.Precision{Activations: "f32"}}
	for _, name := range sortedNames(modelPlaceholders, vals) {
		v, ok := vals[name]
		if !ok {
			v = modelPlaceholders[name]
		}
		doc.Factors = append(doc.Factors, semantics.Factor{Name: name, Scope: "*", Value: v})
	}
	return doc
}

func sortedNames(ms ...map[string]any) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// finalInputs are the final stage's rows (its norm's argument) and
// conditioning vector, given to its fragment.
func (m *model) finalInputs() (x, cond []int, err error) {
	t, err := m.cp.arg(m.st.Final.Roles["norm"].Module)
	if err != nil {
		return nil, nil, err
	}
	m.frag.Given[program.FinalX] = plan.Given{Data: t.v, Shape: t.shape}
	if c, err := m.finalCond(); err == nil {
		m.frag.Given[program.FinalCond] = plan.Given{Data: c.v, Shape: c.shape}
		cond = c.shape
	} else if r, ok := m.st.Final.Roles["modulation"]; ok && r.Module != "" {
		// No conditioning vector the trace holds: the modulation's
		// argument has its shape, and its result is the trace's, so the
		// vector is never read.
		c, err := m.cp.arg(r.Module)
		if err != nil {
			return nil, nil, err
		}
		cond = c.shape
	}
	return t.shape, cond, nil
}

// scoreFinal: the final stage built alone (program.BuildFinal) under the
// candidate's chunk order and plus-one, run from its norm's result and
// its modulation's, against the head's argument (or the final boundary's
// output), at up to 1024 rows.
func (m *model) scoreFinal(a search.Assignment) (search.Score, error) {
	f := m.st.Final
	tp, boundary := program.Tap{}, ""
	if h, ok := f.Roles["head"]; ok && h.Module != "" {
		tp, boundary = program.Tap{Module: h.Module, Port: "arg0"}, h.Module+"/arg"
	} else if f.Boundary != nil {
		tp = program.Tap{Module: f.Boundary.Module, Port: f.Boundary.Outputs["out"]}
		boundary = tp.Module + "/" + tp.Port
	}
	x, cond, err := m.finalInputs()
	if err != nil || tp.Module == "" {
		return search.Score{Err: math.Inf(1)}, err
	}
	p, err := program.BuildFinal(m.document(map[string]any{"final_norm_order": a["final_norm_order"],
		"modulation_plus_one": a["modulation_plus_one"]}), m.shapes, x, cond)
	return scoreTap(m.frag, m.cp.tapKey, p, err == nil, tp, true, boundary)
}

// scoreEmbedAct: the conditioning built alone (program.BuildConditioning)
// with the candidate as embed_act, run from <path>_in's result, against
// <path>_out's argument.
func (m *model) scoreEmbedAct(f any, path string) (search.Score, error) {
	c := m.st.Conditioning
	out := c.Roles[path+"_out"].Module
	var pooled []int
	if r, ok := c.Roles["pooled_in"]; ok && r.Module != "" {
		t, err := m.cp.arg(r.Module)
		if err != nil {
			return search.Score{}, err
		}
		pooled = t.shape
	}
	p, err := program.BuildConditioning(m.document(map[string]any{"embed_act": f}), m.shapes, pooled)
	return scoreTap(m.frag, m.cp.tapKey, p, err == nil, program.Tap{Module: out, Port: "arg0"}, false, out+"/arg")
}

// finalCond is the conditioning vector the final stage reads: its
// boundary's cond port, else the conditioning's output.
func (m *model) finalCond() (tensor, error) {
	if bd := m.st.Final.Boundary; bd != nil && bd.Inputs["cond"] != "" {
		return m.cp.port(bd.Module, bd.Inputs["cond"])
	}
	if c := m.st.Conditioning; c != nil && c.Boundary != nil && c.Boundary.Outputs["cond"] != "" {
		return m.cp.port(c.Boundary.Module, c.Boundary.Outputs["cond"])
	}
	return tensor{}, fmt.Errorf("no conditioning vector reaches the final stage")
}

// scoreFinalAct: the final stage built alone with the candidate as its
// modulation_act, run from the conditioning vector, against the final
// modulation linear's argument.
func (m *model) scoreFinalAct(a search.Assignment) (search.Score, error) {
	mod := m.st.Final.Roles["modulation"]
	x, cond, err := m.finalInputs()
	if err != nil {
		return search.Score{}, err
	}
	p, err := program.BuildFinal(m.document(map[string]any{"modulation_act": a["modulation_act"],
		"final_norm_order": "shift,scale", "modulation_plus_one": true}), m.shapes, x, cond)
	return scoreTap(m.frag, m.cp.tapKey, p, err == nil, program.Tap{Module: mod.Module, Port: "arg0"}, false, mod.Module+"/arg")
}

// latentsEmbedder is the linear embedder that reads the latents, and the
// tap of its argument (its norm's, when it has one).
func (m *model) latentsEmbedder() (int, program.Tap, bool) {
	for i, e := range m.st.Embedders {
		if e.Input != "latents" || e.Kind != "linear" {
			continue
		}
		r := e.Roles["proj"]
		if n, ok := e.Roles["norm"]; ok && n.Module != "" {
			r = n
		}
		return i, program.Tap{Module: r.Module, Port: "arg0"}, true
	}
	return 0, program.Tap{}, false
}

// patchable: a latents embedder whose argument the trace holds, and
// latents the model call receives.
func (m *model) patchable() bool {
	_, tp, ok := m.latentsEmbedder()
	return ok && m.cp.tapKey(tp) != "" && m.st.Model.Inputs["latents"] != ""
}

// scorePatch: the image embedder built alone (program.BuildEmbedder)
// under the candidate patch_layout, from the latents as the model
// receives them, against its argument. A layout the latents' shape does
// not admit scores +Inf.
func (m *model) scorePatch(a search.Assignment) (search.Score, error) {
	i, tp, _ := m.latentsEmbedder()
	x, err := m.cp.port(m.st.Model.Module, m.st.Model.Inputs["latents"])
	if err != nil {
		return search.Score{}, err
	}
	m.frag.Given[program.InputValue("latents")] = plan.Given{Data: x.v, Shape: x.shape}
	p, err := program.BuildEmbedder(m.document(map[string]any{"patch_layout": a["patch_layout"]}), m.shapes, i, x.shape)
	return scoreTap(m.frag, m.cp.tapKey, p, err == nil, tp, false, m.st.Model.Module+"/"+m.st.Model.Inputs["latents"])
}

// scoreJoin: the first block built alone (program.BuildBlock) under the
// candidate joint order, from the embedders' rows, against its joined
// argument.
func (m *model) scoreJoin(a search.Assignment) (search.Score, error) {
	bd := m.st.Blocks[0].Boundary
	tp := program.Tap{Module: bd.Module, Port: bd.Inputs["joint"]}
	boundary := bd.Module + "/" + bd.Inputs["joint"]
	inf := search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}
	b, fs, err := newBlock(m.tr, m.st, 0)
	if err != nil {
		return inf, nil
	}
	for _, e := range m.st.Embedders {
		r := e.Roles["proj"]
		if e.Kind == "table" {
			r = e.Roles["table"]
		}
		t, err := m.cp.roleOut(r)
		if err != nil {
			return search.Score{}, err
		}
		b.frag.Given[program.BlockStream(e.Stream)] = plan.Given{Data: t.v, Shape: t.shape}
		b.inputs.Streams[e.Stream] = t.shape
	}
	first := search.Assignment{}
	for _, f := range fs {
		first[f.Name] = f.Values[0]
	}
	first["rope_layout"], first["joint_order"] = attn.None, a["joint_order"]
	p, ok, err := b.fragment(first)
	if err != nil {
		return inf, err
	}
	return scoreTap(b.frag, m.cp.tapKey, p, ok, tp, false, boundary)
}
