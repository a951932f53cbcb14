package synth

import (
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitGroupedLinear explains t [.., G, O] from x [.., G, I] as a
// block-diagonal linear: the weight [G·O, I] holds one [O, I] block per
// group, each group's inputs projected by its own block (a grouped output
// projection: torch.bmm over the groups). Laid out as the vocabulary's
// batched matmul, the groups leading: x [G, N, I] @ wᵀ [G, I, O], a bias
// [G·O] added per group. Tried where the plain linear fails (its weight
// is not [O, I]).
func (s *synth) fitGroupedLinear(x *val, params []*val, t *val) *val {
	w := params[0]
	n := len(x.shape)
	if n < 3 || len(t.shape) != n || x.opaque {
		return nil
	}
	g, in, out := x.shape[n-2], x.shape[n-1], t.shape[n-1]
	if g < 2 || t.shape[n-2] != g || !slices.Equal(x.shape[:n-2], t.shape[:n-2]) || w.shape[0] != g*out || w.shape[1] != in {
		return nil
	}
	var bias *val
	if len(params) > 1 {
		if len(params[1].shape) != 1 || params[1].shape[0] != g*out {
			return nil
		}
		bias = params[1]
	}
	rows := x.numel() / (g * in)
	xs := s.reshape(x, []int{rows, g, in})
	if xs == nil {
		return nil
	}
	xg := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{xs}, out: x.format, label: "groups first"})
	wg := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{s.reshape(w, []int{g, out, in})}, out: w.format, label: "a block per group, [I, O]"})
	if xg == nil || wg == nil {
		return nil
	}
	y := s.derive(&expr{op: program.OpMatMul, args: []*val{xg, wg}, out: t.format, label: "grouped linear"})
	if y == nil {
		return nil
	}
	y = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{y}, out: y.format, label: "rows first"})
	if y == nil {
		return nil
	}
	var e *expr
	if bias == nil {
		e = &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: "grouped linear"}
	} else {
		e = &expr{op: program.OpAdd, args: []*val{y, s.reshape(bias, []int{g, out})}, out: t.format, label: "grouped linear + bias"}
		if exec.Numel(t.shape) != y.numel() {
			return nil
		}
	}
	v, ev := s.best(t, []*expr{e})
	if v == nil {
		return nil
	}
	if bias != nil {
		v = s.reshape(v, t.shape)
	}
	if v != nil {
		v.fit = &leafFit{kind: "grouped_linear", candidates: ev, in: x}
	}
	return v
}
