package synth

import (
	"github.com/zflow/zflow/search/internal/simple"

	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitSwish explains t as Swish-β of x, x·σ(β·x), spelled out as torch
// spells it (β·x, its sigmoid, times x: each op rounding in the
// activations' format): CLIP's quick GELU is β = 1.702, silu β = 1 (an
// activation of its own, found before this). β is read off the values,
// logit(t/x)/x at the entries where both are clear of the limits, as
// their median, then snapped; tried only where the activations and
// glue's forms fail.
func (s *synth) fitSwish(x, t *val) *val {
	if !equalShape(x, t) || x.integral() || x.numel() < 8 {
		return nil
	}
	var est []float64
	for i, xv := range x.data {
		a := float64(xv)
		if math.Abs(a) < 1e-2 {
			continue
		}
		r := float64(t.data[i]) / a
		if !(r > 1e-3 && r < 1-1e-3) {
			continue
		}
		est = append(est, math.Log(r/(1-r))/a)
	}
	if len(est) < 4 {
		return nil
	}
	slices.Sort(est)
	beta := est[len(est)/2]
	if !(beta > 0 && beta < 100) {
		return nil
	}
	// the snapped numbers near the reading (the reading itself only where
	// none is), and silu's β = 1 as the contrast the margin is read against
	var betas []float64
	for _, b := range simple.Candidates(beta) {
		if math.Abs(b-beta) <= 1e-2*beta && !slices.Contains(betas, b) {
			betas = append(betas, b)
		}
	}
	if len(betas) == 0 {
		betas = append(betas, beta)
	}
	if !slices.Contains(betas, 1) {
		betas = append(betas, 1)
	}
	var cands []*expr
	var kept []float64
	for _, b := range betas {
		bx := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(b)}, out: t.format, label: fmt.Sprintf("%g·x", b)})
		if bx == nil {
			continue
		}
		sg := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{bx}, out: t.format, label: "sigmoid"})
		if sg == nil {
			continue
		}
		cands = append(cands, &expr{op: program.OpMul, args: []*val{x, sg}, out: t.format, label: fmt.Sprintf("x·σ(%g·x) (Swish-β)", b)})
		kept = append(kept, b)
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	won := 0.0
	for i := range ev {
		if ev[i].Value == v.from.label {
			won = kept[i]
		}
		ev[i].Value = kept[i]
	}
	v.fit = &leafFit{kind: "swish", label: v.from.label, candidates: ev, beta: float32(won)}
	return v
}
