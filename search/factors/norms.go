package factors

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
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
		n := &normObjective{cp: cp, role: r, memo: map[string]search.Score{}}
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
	cp   *capture
	role semantics.Role
	memo map[string]search.Score
}

func (n *normObjective) score(_ context.Context, _ string, a search.Assignment) (search.Score, error) {
	offset, _ := a["norm_offset"].(float64)
	eps, _ := a["norm_eps"].(float64)
	key := fmt.Sprintf("%v|%v|%v", a["norm_kind"], eps, offset)
	if s, ok := n.memo[key]; ok {
		return s, nil
	}
	x, err := n.cp.arg(n.role.Module)
	if err != nil {
		return search.Score{}, err
	}
	y, err := n.cp.roleOut(n.role)
	if err != nil {
		return search.Score{}, err
	}
	boundary := n.role.Module + "/" + n.role.OutPort()
	inf := search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}
	w := x.width()
	if len(x.v) != len(y.v) || w == 0 {
		return inf, nil
	}
	var gamma, beta []float32
	if n.role.Weight != "" {
		if gamma, err = n.cp.param(n.role.Weight); err != nil {
			return search.Score{}, err
		}
	}
	if n.role.Bias != "" {
		if beta, err = n.cp.param(n.role.Bias); err != nil {
			return search.Score{}, err
		}
	}
	if gamma != nil && len(gamma) != w || beta != nil && len(beta) != w {
		return inf, nil // the parameters do not span the argument's last axis
	}
	var s sums
	layer := a["norm_kind"] == "layer"
	row := make([]float64, w)
	for _, r := range attn.Spread(x.rows(), 512) {
		xs := x.v[r*w : (r+1)*w]
		var mu, ss float64
		if layer {
			for _, v := range xs {
				mu += float64(v)
			}
			mu /= float64(w)
		}
		for _, v := range xs {
			ss += (float64(v) - mu) * (float64(v) - mu)
		}
		inv := 1 / math.Sqrt(ss/float64(w)+eps)
		for c, v := range xs {
			z := (float64(v) - mu) * inv
			if gamma != nil {
				z *= float64(gamma[c]) + offset
			}
			if beta != nil {
				z += float64(beta[c])
			}
			row[c] = z
		}
		s.add(row, y.v[r*w:(r+1)*w], y.f)
	}
	sc := s.score(boundary)
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
