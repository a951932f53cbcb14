package factors

import (
	"context"
	"fmt"
	"math"
	"strings"

	"zflow/search"
	"zflow/semantics"
	"zflow/trace"
)

// Model returns the factors outside the blocks that the trace shows: the
// final adaptive norm's chunk order and plus-one (at the final stage's
// output), the conditioning MLP's activation (at time_out's argument), and
// the joint order where the streams are joined before the first block (at
// its joined argument).
func Model(tr *trace.Trace, st *semantics.Structure) ([]search.Factor, search.Objective, error) {
	cp, err := newCapture(tr, st)
	if err != nil {
		return nil, nil, err
	}
	m := &model{st: st, cp: cp}
	var fs []search.Factor
	if r, ok := st.Final.Roles["modulation"]; ok && r.Module != "" {
		fs = append(fs,
			search.Factor{Name: "final_norm_order", Scope: "final", Values: []any{"scale,shift", "shift,scale"}, Stage: 1},
			search.Factor{Name: "modulation_plus_one", Scope: "final", Values: []any{true, false}, Stage: 1})
	}
	if c := st.Conditioning; c != nil && c.Roles["time_in"].Module != "" && c.Roles["time_out"].Module != "" {
		fs = append(fs, search.Factor{Name: "embed_act", Scope: "conditioning", Values: actValues()[1:], Stage: 1})
	}
	if len(st.Blocks) > 0 && st.Blocks[0].Boundary != nil && st.Blocks[0].Boundary.Inputs["joint"] != "" && len(st.Embedders) == 2 {
		fs = append(fs, search.Factor{Name: "joint_order", Scope: "model", Values: []any{"text_first", "image_first"}, Stage: 1})
	}
	return fs, search.ObjectiveFunc(m.score), nil
}

type model struct {
	st *semantics.Structure
	cp *capture
}

func (m *model) score(_ context.Context, factor string, a search.Assignment) (search.Score, error) {
	switch factor {
	case "final_norm_order", "modulation_plus_one":
		return m.scoreFinal(a)
	case "embed_act":
		return m.scoreEmbedAct(a)
	case "joint_order":
		return m.scoreJoin(a)
	}
	return search.Score{}, fmt.Errorf("factors: no model factor %q", factor)
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
	s.add(modulate(n, shift, scale, a["modulation_plus_one"] == true), target.v, target.f)
	return s.score(boundary), nil
}

// scoreEmbedAct: act(time_in) against time_out's argument.
func (m *model) scoreEmbedAct(a search.Assignment) (search.Score, error) {
	c := m.st.Conditioning
	in, err := m.cp.roleOut(c.Roles["time_in"])
	if err != nil {
		return search.Score{}, err
	}
	target, err := m.cp.arg(c.Roles["time_out"].Module)
	if err != nil {
		return search.Score{}, err
	}
	ours := make([]float64, len(in.v))
	for i, x := range in.v {
		ours[i] = float64(act(a["embed_act"], x))
	}
	var s sums
	s.add(ours, target.v, target.f)
	return s.score(c.Roles["time_out"].Module + "/arg"), nil
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
