package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// expertParams: the parameters of a call that is a whole mixture of
// experts: two rank-3 weights (grouped GEMMs), maybe a rank-2 bias for
// each.
func expertParams(params []*val) bool {
	r3, r2 := 0, 0
	for _, p := range params {
		switch len(p.shape) {
		case 3:
			r3++
		case 2:
			r2++
		default:
			return false
		}
	}
	return r3 == 2 && (r2 == 0 || r2 == 2) && len(params[0].shape) == 3
}

// unitChoice is one structure of the experts' gated unit: the weights'
// layout, the gate's activation, which half is the gate.
type unitChoice struct {
	layout  expertLayout
	act     exec.ActKind
	upFirst bool
	squared bool // ungated only: f(·)·f(·)
}

// unitFit is the unit's numbers fitted for one structure, and its error.
type unitFit struct {
	u     unitChoice
	p     program.ExpertsParams
	score float64
}

// unitLimits and unitBetas are the grids the unit's clamp and Swish-β
// start from (0: none; β 0 is silu itself); the offset of up is solved
// for at each point (the output is affine in it).
var (
	unitLimits = func() []float64 {
		out := []float64{0}
		for i := range 19 {
			out = append(out, 0.5*math.Pow(2, float64(i)/2))
		}
		return out
	}()
	unitBetas = []float64{0, 0.5, 0.75, 1.25, 1.5, 1.75, 2, 2.5, 3, 4}
)

// fitUnit explains t [T, D] by the experts of one of units with the
// unit's numbers found from values: a clamp (gate ≤ L, |up| ≤ L), a
// Swish-β gate (silu only) and an offset of up, scored teacher-forced on
// the call's own inputs. The offset is solved by least squares at every
// point (the output is affine in it: two runs); L and β start on a grid,
// then golden section refines them in turn on the best structure; each
// number is then snapped to the simplest that keeps the error. A number
// that does not lower the error is dropped (the trace does not show it).
// The evidence: every structure's best score, and each number against
// its absence.
func (s *synth) fitUnit(t *val, units []unitChoice, mk func(unitChoice, program.ExpertsParams) *expr) (*val, *leafFit) {
	tol := tolerance(t.format)
	run := func(u unitChoice, p program.ExpertsParams) *val {
		v, err := s.ev.run(mk(u, p))
		if err != nil || v.numel() != t.numel() {
			return nil
		}
		return v
	}
	// solve the offset at (u, p): its score and the offset
	solve := func(u unitChoice, p program.ExpertsParams) (float64, float32) {
		p.UpOffset = 0
		v0 := run(u, p)
		p.UpOffset = 1
		v1 := run(u, p)
		if v0 == nil || v1 == nil {
			return math.Inf(1), 0
		}
		var num, den float64
		for i := range t.data {
			d := float64(v1.data[i]) - float64(v0.data[i])
			num += d * (float64(t.data[i]) - float64(v0.data[i]))
			den += d * d
		}
		c := 0.0
		if den > 0 {
			c = num / den
		}
		fit := make([]float32, len(t.data))
		for i := range fit {
			fit[i] = float32(float64(v0.data[i]) + c*(float64(v1.data[i])-float64(v0.data[i])))
		}
		return relRMS(t.format, fit, t.data), float32(c)
	}
	var fits []unitFit
	bestOf := map[exec.ActKind]float64{}
	for _, u := range units {
		betas := []float64{0}
		if u.act == exec.ActSiLU {
			betas = unitBetas
		}
		best := unitFit{u: u, score: math.Inf(1)}
		for _, l := range unitLimits {
			for _, b := range betas {
				p := program.ExpertsParams{Limit: float32(l), Beta: float32(b)}
				if sc, c := solve(u, p); sc < best.score {
					p.UpOffset = c
					best.p, best.score = p, sc
				}
			}
		}
		fits = append(fits, best)
		if old, ok := bestOf[u.act]; !ok || best.score < old {
			bestOf[u.act] = best.score
		}
	}
	slices.SortStableFunc(fits, func(a, b unitFit) int { return cmpFloat(a.score, b.score) })
	if len(fits) == 0 || math.IsInf(fits[0].score, 1) {
		return nil, nil
	}
	// refine L and β in turn around the grid's best, the offset solved,
	// on the few best structures (on a grid, near forms such as the quick
	// GELU and gelu_tanh are close)
	refine := func(w unitFit) unitFit {
		at := func(p program.ExpertsParams) float64 { sc, _ := solve(w.u, p); return sc }
		for range 3 {
			if w.p.Limit > 0 {
				p := w.p
				l := s.searchParam(func(x float64) float64 { q := p; q.Limit = float32(x); return at(q) }, float64(p.Limit)/2, float64(p.Limit)*2)
				p.Limit = float32(l)
				if sc := at(p); sc <= w.score {
					w.p, w.score = p, sc
				}
			}
			if w.p.Beta > 0 {
				p := w.p
				// the whole grid's range: a wrong limit misleads the grid's β
				b := s.searchParam(func(x float64) float64 { q := p; q.Beta = float32(x); return at(q) }, unitBetas[1], unitBetas[len(unitBetas)-1])
				p.Beta = float32(b)
				if sc := at(p); sc <= w.score {
					w.p, w.score = p, sc
				}
			}
		}
		return w
	}
	w := unitFit{score: math.Inf(1)}
	for _, f := range fits[:min(4, len(fits))] {
		if r := refine(f); r.score < w.score {
			w = r
		}
		if r := bestOf[f.u.act]; w.u.act == f.u.act && w.score < r {
			bestOf[f.u.act] = w.score
		}
	}
	if math.IsInf(w.score, 1) {
		return nil, nil
	}
	_, c := solve(w.u, w.p)
	w.p.UpOffset = c
	score := func(p program.ExpertsParams) float64 {
		v := run(w.u, p)
		if v == nil {
			return math.Inf(1)
		}
		return relRMS(t.format, v.data, t.data)
	}
	cur := score(w.p)
	w.p.UpOffset = float32(snap(float64(c), func(x float64) bool {
		q := w.p
		q.UpOffset = float32(x)
		return score(q) <= 1.01*cur+1e-12
	}))
	// each number against its absence: one that does not matter is dropped
	cur = score(w.p)
	var ev [3][]semantics.Candidate
	for i, name := range []string{"limit", "beta", "up_offset"} {
		q := w.p
		var val *float32
		switch name {
		case "limit":
			val = &q.Limit
		case "beta":
			val = &q.Beta
		default:
			val = &q.UpOffset
		}
		if *val == 0 {
			continue
		}
		f := *val
		had := snap(float64(f), func(y float64) bool { return float32(y) == f })
		*val = 0
		without := score(q)
		ev[i] = []semantics.Candidate{{Value: had, Score: finite(cur)}, {Value: 0.0, Score: finite(without)}}
		if without <= 1.01*cur {
			w.p, cur = q, without
		}
	}
	final := mk(w.u, w.p)
	v, got := s.ev.score(final, t)
	if v == nil || got > tol || !s.everyStep(v, t, tol) {
		return nil, nil
	}
	var acts []semantics.Candidate
	for _, a := range glueActs {
		if sc, ok := bestOf[a]; ok {
			acts = append(acts, semantics.Candidate{Value: a.String(), Score: finite(sc)})
		}
	}
	fit := &leafFit{kind: "experts", act: w.u.act, candidates: acts, unit: &unitEvidence{params: w.p, limit: ev[0], beta: ev[1], offset: ev[2],
		label: final.label + fmt.Sprintf(" limit=%g beta=%g up_offset=%g", w.p.Limit, w.p.Beta, w.p.UpOffset)}}
	return v, fit
}

// unitEvidence is what fitUnit found: the numbers, and each number's
// score against its absence (nil: absent, or dropped as not mattering).
type unitEvidence struct {
	params              program.ExpertsParams
	limit, beta, offset []semantics.Candidate
	label               string
}
