package factors

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// NormRole is one norm of a structure: its address, whether it is a
// per-head q/k norm (whose kind is the block's qk_norm, not norm_kind),
// and the factors its output shows with the objective scoring them.
type NormRole struct {
	Address   string // "blocks.0.image.norm1", "final.norm", "embed.text.norm"
	PerHead   bool
	Affine    bool // it has a γ (norm_offset applies)
	Factors   []search.Factor
	Objective search.Objective
}

// Norm candidate values.
var (
	normKinds = []any{"layer", "rms"}
	normEps   = []any{1e-6, 1e-5, 1e-8}
)

// Norms lists every norm role of st (embedders, blocks, final) with its
// factors: norm_kind (layer, rms), norm_eps (1e-6, 1e-5, 1e-8) and, with a
// γ, norm_offset (0, 1), one stage searched jointly. Each is scored where
// it is first observable: the norm's own result, computed in float64 from
// its captured argument and parameters over the argument's last axis, at
// up to 512 rows spread over it, rounded once to the captured format.
func Norms(tr *trace.Trace, st *semantics.Structure) ([]NormRole, error) {
	cp, err := newCapture(tr, st)
	if err != nil {
		return nil, err
	}
	var out []NormRole
	add := func(addr string, r semantics.Role, perHead bool) {
		if r.Module == "" {
			return
		}
		n := newNormObjective(cp, addr, r)
		fs := []search.Factor{
			{Name: "norm_kind", Scope: addr, Values: normKinds, Stage: 1},
			{Name: "norm_eps", Scope: addr, Values: normEps, Stage: 1},
		}
		if r.Weight != "" {
			fs = append(fs, search.Factor{Name: "norm_offset", Scope: addr, Values: []any{0.0, 1.0}, Stage: 1})
		}
		out = append(out, NormRole{Address: addr, PerHead: perHead, Affine: r.Weight != "", Factors: fs, Objective: search.ObjectiveFunc(n.score)})
	}
	for _, e := range st.Embedders {
		if r, ok := e.Roles["norm"]; ok {
			add("embed."+e.Stream+".norm", r, false)
		}
	}
	for i, blk := range st.Blocks {
		for _, name := range sortedRoles(blk.Roles) {
			kind := semantics.BlockRoles(blk.Kind, blk.Streams)[name]
			if kind != semantics.RoleNorm {
				continue
			}
			add(semantics.BlockAddress(i)+"."+name, blk.Roles[name], strings.HasSuffix(name, "q_norm") || strings.HasSuffix(name, "k_norm"))
		}
	}
	if r, ok := st.Final.Roles["norm"]; ok {
		add("final.norm", r, false)
	}
	return out, nil
}

type normObjective struct {
	cp     *capture
	addr   string
	role   semantics.Role
	shapes program.Shapes
	frag   *plan.Fragment
	x      []int // the argument as [rows, width]
	ok     bool  // argument and result hold as many values
	rows   []int
	memo   map[string]search.Score
}

// newNormObjective reads the norm's argument (the fragment's given) and
// the shapes of its parameters.
func newNormObjective(cp *capture, addr string, r semantics.Role) *normObjective {
	n := &normObjective{cp: cp, addr: addr, role: r, memo: map[string]search.Score{},
		shapes: program.Shapes{Weights: map[string][]int{}},
		frag:   &plan.Fragment{B: cpu.New(0), Ref: cp.tr, Key: cp.tapKey, Given: map[string]plan.Given{}, Spec: searchSpec}}
	src := program.TraceParams(cp.tr)
	for _, path := range []string{r.Weight, r.Bias} {
		if s, err := src.Shape(path); path != "" && err == nil {
			n.shapes.Weights[path] = s
		}
	}
	x, err1 := cp.arg(r.Module)
	y, err2 := cp.roleOut(r)
	if err1 != nil || err2 != nil || len(x.v) != len(y.v) || x.width() == 0 {
		return n
	}
	n.ok = true
	n.x = []int{x.rows(), x.width()}
	n.rows = attn.Spread(x.rows(), 512)
	n.frag.Given[program.NormInput] = plan.Given{Data: x.v, Shape: n.x}
	return n
}

// score builds the norm under the candidate (program.BuildNorm) and runs
// it from the captured argument at up to 512 rows against the captured
// result.
func (n *normObjective) score(_ context.Context, _ string, a search.Assignment) (search.Score, error) {
	offset, _ := a["norm_offset"].(float64)
	eps, _ := a["norm_eps"].(float64)
	key := fmt.Sprintf("%v|%v|%v", a["norm_kind"], eps, offset)
	if s, ok := n.memo[key]; ok {
		return s, nil
	}
	boundary := n.role.Module + "/" + n.role.OutPort()
	inf := search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}
	if !n.ok {
		return inf, nil
	}
	tk := n.cp.tapKey(program.Tap{Module: n.role.Module, Port: n.role.OutPort()})
	if tk == "" {
		return inf, nil
	}
	ref, f, err := n.frag.Reference(tk, n.x, n.rows)
	if err != nil {
		return search.Score{}, err
	}
	// In the search's f32; against a narrow capture also in its format, x̂ rounded
	// before ·γ (HF's, diffusers') and, for RMS, written out in its
	// primitives: ε shows only through the rounding that reproduces the
	// output, so each ε is scored by the closest of these.
	specs := []exec.Spec{n.frag.Spec}
	if f == precision.BF16 || f == precision.F16 {
		specs = append(specs, exec.Out(f), exec.Spec{Out: f, Round: exec.RoundNormalized})
		if a["norm_kind"] == "rms" {
			specs = append(specs, exec.Spec{Out: f, Round: exec.RoundStats})
		}
	}
	defer func(s exec.Spec) { n.frag.Spec = s }(n.frag.Spec)
	doc := &semantics.Document{Format: semantics.FormatName, Version: semantics.Version, Structure: *n.cp.st,
		Precision: semantics.Precision{Activations: "f32"},
		Factors: []semantics.Factor{
			{Name: "norm_kind", Scope: n.addr, Value: a["norm_kind"]},
			{Name: "norm_eps", Scope: n.addr, Value: eps},
			{Name: "norm_offset", Scope: n.addr, Value: offset},
		}}
	p, err := program.BuildNorm(doc, n.shapes, n.addr, n.role, n.x)
	if err != nil {
		n.memo[key] = inf // the parameters do not span the argument's last axis
		return inf, nil
	}
	sc := inf
	for _, spec := range specs {
		n.frag.Spec = spec
		ours, _, err := n.frag.Eval(p, p.Outputs[0], n.rows)
		if err != nil {
			return search.Score{}, err
		}
		var s fsums
		if !s.add(ours, n.x[1], ref, n.x[1], 0, f) {
			continue
		}
		if v := s.score(boundary); v.Err < sc.Err {
			sc = v
		}
	}
	n.memo[key] = sc
	return sc, nil
}

func sortedRoles(m map[string]semantics.Role) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
