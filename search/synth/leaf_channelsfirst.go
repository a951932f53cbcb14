package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// perPositionNorm explains a norm over the channels of x [B, C, ...] laid
// channels first, each position normalised on its own (a layer norm of a
// convolution's output, ConvNeXt's and SAM's neck's "channels_first"):
// the channels moved last, a layer or RMS norm with γ (and β) there, then
// moved back. Tried once the norm over the last axis and the group norms
// failed.
func (s *synth) perPositionNorm(x *val, params []*val, t *val) *val {
	n := len(x.shape)
	if n < 3 || !slices.Equal(x.shape, t.shape) || len(params) == 0 || len(params) > 2 {
		return nil
	}
	c := x.shape[1]
	last, back := []int{0}, []int{0, n - 1} // channels last, and back
	for a := 2; a < n; a++ {
		last = append(last, a)
		back = append(back, a-1)
	}
	last = append(last, 1)
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: last}, args: []*val{x}, out: x.format, label: "channels last"})
	if moved == nil {
		return nil
	}
	assign := [][2]*val{{params[0], nil}}
	if len(params) == 2 {
		assign = [][2]*val{{params[0], params[1]}, {params[1], params[0]}}
	}
	var cands []*expr
	var inner []exec.NormParams
	for _, gb := range assign {
		g, b := gb[0], gb[1]
		if !slices.Equal(g.shape, []int{c}) || b != nil && !slices.Equal(b.shape, []int{c}) {
			continue
		}
		for _, kind := range []exec.NormKind{exec.NormLayer, exec.NormRMS} {
			if kind == exec.NormRMS && b != nil {
				continue
			}
			for _, eps := range commonEps {
				p := exec.NormParams{Kind: kind, Eps: eps}
				nv := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{moved, g, b}, out: t.format, label: fmt.Sprintf("%s eps=%g over the channels", kind, eps)})
				if nv == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpPermute, attrs: program.Attrs{Perm: back}, args: []*val{nv}, out: t.format, label: fmt.Sprintf("%s norm eps=%g, channels first", kind, eps)})
				inner = append(inner, p)
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "norm", norm: inner[slices.Index(cands, v.from)], candidates: ev}
	return v
}
