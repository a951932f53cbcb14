package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// composedInner and composedOuter are the functions fitComposedAct
// chains: an activation, then a root or none (a router's √softplus
// scores).
var (
	composedInner = []exec.ActKind{exec.ActSoftplus, exec.ActSiLU, exec.ActGELUErf, exec.ActGELUTanh, exec.ActTanh, exec.ActSigmoid, exec.ActReLU, exec.ActExp}
	composedOuter = []exec.ActKind{exec.ActIdentity, exec.ActSqrt}
)

// fitComposedAct explains t as f(g(x)), each pointwise, g an activation
// and f a square root or nothing (softplus alone, √softplus): a
// parameterless module of one argument that no single activation of
// glue's and no other leaf form explains. Each function rounds to t's
// format, as torch's ops in a row do.
func (s *synth) fitComposedAct(x, t *val) *val {
	if !equalShape(x, t) || x.integral() || x.opaque {
		return nil
	}
	var cands []*expr
	for _, g := range composedInner {
		inner := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: g}, args: []*val{x}, out: t.format, label: g.String()})
		if inner == nil {
			continue
		}
		for _, f := range composedOuter {
			if f == exec.ActIdentity {
				cands = append(cands, inner.from)
				continue
			}
			cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{inner}, out: t.format, label: fmt.Sprintf("%s(%s)", f, g)})
		}
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "composed_act", candidates: ev}
	}
	return v
}
