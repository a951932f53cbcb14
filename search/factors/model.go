package factors

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
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
	m := &model{st: st, cp: cp, memo: map[string]search.Score{}}
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
	if _, _, err := m.patchTarget(); err == nil {
		fs = append(fs, search.Factor{Name: "patch_layout", Scope: "embed.image", Values: []any{"none", "c_ph_pw"}, Stage: 6})
	}
	return fs, search.ObjectiveFunc(m.score), nil
}

// PooledAct is the pooled conditioning path's activation, a factor of
// Model's search that the document writes as embed_act when it agrees
// with the timestep path's.
const PooledAct = "pooled_act"

type model struct {
	st   *semantics.Structure
	cp   *capture
	memo map[string]search.Score
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

// scoreFinal: norm(x)·(1 + scale) + shift (or ·scale) from the final
// modulation's two chunks, against the head's argument (or the final
// boundary's output).
func (m *model) scoreFinal(a search.Assignment) (search.Score, error) {
	f := m.st.Final
	n, err := m.cp.roleOut(f.Roles["norm"])
	if err != nil {
		return search.Score{}, err
	}
	mod, err := m.cp.roleOut(f.Roles["modulation"])
	if err != nil {
		return search.Score{}, err
	}
	var target tensor
	boundary := ""
	if h, ok := f.Roles["head"]; ok && h.Module != "" {
		target, err = m.cp.arg(h.Module)
		boundary = h.Module + "/arg"
	} else if f.Boundary != nil {
		target, err = m.cp.port(f.Boundary.Module, f.Boundary.Outputs["out"])
		boundary = f.Boundary.Module + "/" + f.Boundary.Outputs["out"]
	}
	if err != nil || target.v == nil {
		return search.Score{Err: math.Inf(1)}, err
	}
	var shift, scale []float32
	for j, name := range strings.Split(fmt.Sprint(a["final_norm_order"]), ",") {
		c := chunk(mod, j, 2)
		if name == "shift" {
			shift = c
		} else {
			scale = c
		}
	}
	var s sums
	rows := attn.Spread(n.rows(), sampleRows)
	s.add(modulateRows(n, rows, shift, scale, a["modulation_plus_one"] == true), rowsOf(target.v, n.width(), rows), target.f)
	return s.score(boundary), nil
}

// scoreEmbedAct: act(<path>_in) against <path>_out's argument.
func (m *model) scoreEmbedAct(f any, path string) (search.Score, error) {
	c := m.st.Conditioning
	in, err := m.cp.roleOut(c.Roles[path+"_in"])
	if err != nil {
		return search.Score{}, err
	}
	target, err := m.cp.arg(c.Roles[path+"_out"].Module)
	if err != nil {
		return search.Score{}, err
	}
	ours := make([]float64, len(in.v))
	fn := actFunc(f)
	for i, x := range in.v {
		ours[i] = float64(fn(x))
	}
	var s sums
	s.add(ours, target.v, target.f)
	return s.score(c.Roles[path+"_out"].Module + "/arg"), nil
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

// scoreFinalAct: act(cond) against the final modulation linear's argument.
func (m *model) scoreFinalAct(a search.Assignment) (search.Score, error) {
	cond, err := m.finalCond()
	if err != nil {
		return search.Score{}, err
	}
	mod := m.st.Final.Roles["modulation"]
	target, err := m.cp.arg(mod.Module)
	if err != nil {
		return search.Score{}, err
	}
	ours := make([]float64, len(cond.v))
	fn := actFunc(a["modulation_act"])
	for i, x := range cond.v {
		ours[i] = float64(fn(x))
	}
	var s sums
	s.add(ours, target.v, target.f)
	return s.score(mod.Module + "/arg"), nil
}

// patchTarget is the latents as the model receives them and the image
// embedder's argument (its norm's, when it has one).
func (m *model) patchTarget() (tensor, tensor, error) {
	for _, e := range m.st.Embedders {
		if e.Input != "latents" || e.Kind != "linear" {
			continue
		}
		r := e.Roles["proj"]
		if n, ok := e.Roles["norm"]; ok && n.Module != "" {
			r = n
		}
		target, err := m.cp.arg(r.Module)
		if err != nil {
			return tensor{}, tensor{}, err
		}
		port := m.st.Model.Inputs["latents"]
		if port == "" {
			return tensor{}, tensor{}, fmt.Errorf("the model call has no latents port")
		}
		x, err := m.cp.port(m.st.Model.Module, port)
		if err != nil {
			return tensor{}, tensor{}, err
		}
		return x, target, nil
	}
	return tensor{}, tensor{}, fmt.Errorf("no linear embedder reads the latents")
}

// scorePatch: the latents as tokens (none: unchanged; c_ph_pw: a
// [B, C, H, W] tensor cut into p×p patches with features (c, ph, pw), rows
// (h, w)) against the image embedder's argument. A layout the latents'
// shape does not admit scores +Inf.
func (m *model) scorePatch(a search.Assignment) (search.Score, error) {
	x, target, err := m.patchTarget()
	if err != nil {
		return search.Score{}, err
	}
	boundary := m.st.Model.Module + "/" + m.st.Model.Inputs["latents"]
	inf := search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}
	var ours []float64
	switch a["patch_layout"] {
	case "none":
		if x.width() != target.width() || len(x.v) != len(target.v) {
			return inf, nil
		}
		ours = f64(x.v)
	case "c_ph_pw":
		if len(x.shape) != 4 {
			return inf, nil
		}
		bsz, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
		p := int(math.Round(math.Sqrt(float64(target.width()) / float64(max(c, 1)))))
		if p < 1 || c*p*p != target.width() || h%p != 0 || w%p != 0 || bsz*(h/p)*(w/p)*c*p*p != len(target.v) {
			return inf, nil
		}
		ours = make([]float64, 0, len(x.v))
		for bi := range bsz {
			for hh := range h / p {
				for ww := range w / p {
					for cc := range c {
						for ph := range p {
							for pw := range p {
								ours = append(ours, float64(x.v[((bi*c+cc)*h+hh*p+ph)*w+ww*p+pw]))
							}
						}
					}
				}
			}
		}
	default:
		return inf, nil
	}
	var s sums
	s.add(ours, target.v, target.f)
	sc := s.score(boundary)
	if s.r == 0 {
		sc.Err = math.Inf(1)
	}
	return sc, nil
}

// scoreJoin: the embedders' rows joined in order against the first
// block's joined argument.
func (m *model) scoreJoin(a search.Assignment) (search.Score, error) {
	names := make([]string, len(m.st.Embedders))
	rows := make([][]float32, len(m.st.Embedders))
	for i, e := range m.st.Embedders {
		names[i] = e.Stream
		r := e.Roles["proj"]
		if e.Kind == "table" {
			r = e.Roles["table"]
		}
		t, err := m.cp.roleOut(r)
		if err != nil {
			return search.Score{}, err
		}
		rows[i] = t.v
	}
	var ours []float64
	for _, i := range order(names, a["joint_order"]) {
		ours = append(ours, f64(rows[i])...)
	}
	bd := m.st.Blocks[0].Boundary
	target, err := m.cp.port(bd.Module, bd.Inputs["joint"])
	if err != nil {
		return search.Score{}, err
	}
	var s sums
	s.add(ours, target.v, target.f)
	return s.score(bd.Module + "/" + bd.Inputs["joint"]), nil
}
