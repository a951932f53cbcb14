package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// composedInner and composedOuter are the functions fitComposedAct
// chains: an activation, then a root or none (a router's √softplus
// scores).
var (
	composedInner = []exec.ActKind{exec.ActSoftplus, exec.ActSiLU, exec.ActGELUErf, exec.ActGELUTanh, exec.ActTanh, exec.ActSigmoid, exec.ActReLU, exec.ActExp}
	composedOuter = []exec.ActKind{exec.ActIdentity, exec.ActSqrt}
	// a self-gated activation x·f(g(x)): Mish's tanh of softplus,
	// TanhExp's tanh of exp
	gatedInner = []exec.ActKind{exec.ActSoftplus, exec.ActExp}
	gatedOuter = []exec.ActKind{exec.ActTanh, exec.ActSigmoid}
)

// fitComposedAct explains t as f(g(x)), each pointwise, g an activation
// and f a square root or nothing (softplus alone, √softplus), or as
// x·f(g(x)) (a self-gated activation: Mish): a
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
	// self-gated: x·f(g(x)) (Mish: x·tanh(softplus(x))), in f32 and
	// rounded once, as torch's kernels compute it
	for _, g := range gatedInner {
		inner := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: g}, args: []*val{x}, out: precision.F32, label: g.String()})
		if inner == nil {
			continue
		}
		for _, f := range gatedOuter {
			gate := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{inner}, out: precision.F32, label: fmt.Sprintf("%s(%s)", f, g)})
			if gate == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpMul, args: []*val{x, gate}, out: t.format, label: fmt.Sprintf("x·%s(%s(x))", f, g)})
		}
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "composed_act", candidates: ev}
	}
	return v
}
