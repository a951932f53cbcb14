package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// ownNorm explains t as a norm of one of the scope's arguments by the
// scope's own γ (and β): a module that normalises its input itself before
// calling its children (timm's BatchNormAct2d calls F.batch_norm with its
// own weight and bias, then its drop and act sub-modules), read as a leaf
// norm is (fitNorm: over the channels last, grouped, channels first, or a
// batch norm at its initial statistics).
func (s *synth) ownNorm(t *val, sc *scope) *val {
	var vecs []*val
	for _, name := range sc.call.Params {
		p, err := s.param(name)
		if err != nil || len(p.shape) != 1 {
			continue
		}
		vecs = append(vecs, p)
	}
	if len(vecs) == 0 || len(vecs) > 2 || len(vecs) == 2 && vecs[0].shape[0] != vecs[1].shape[0] {
		return nil
	}
	if !slices.Contains(t.shape, vecs[0].shape[0]) {
		return nil
	}
	for _, x := range sc.vals {
		if !sc.arg[x] || x.opaque || x.integral() || !slices.Equal(x.shape, t.shape) {
			continue
		}
		if v := s.fitNorm(x, vecs, t); v != nil {
			return v
		}
	}
	return nil
}

// axisNorm explains t as a parameterless norm of a value of its shape
// over an axis that is not the last (a scaler that standardises a series
// over its time axis, [B, T, C] normalised along T): the axis moved last,
// normalised, moved back.
func (s *synth) axisNorm(t *val, vals []*val) *val {
	n := len(t.shape)
	if n < 2 || t.intType {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > 4 {
		ops = ops[:4]
	}
	for _, v := range ops {
		for a := range n - 1 {
			if t.shape[a] < 2 {
				continue
			}
			perm := make([]int, 0, n) // axis a last
			for i := range n {
				if i != a {
					perm = append(perm, i)
				}
			}
			perm = append(perm, a)
			inv, shape := inversePerm(perm), permuteShape(t.shape, perm)
			vp := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "the normalised axis last"})
			if vp == nil {
				continue
			}
			tp := s.readAs(t, shape, func(d []float32) []float32 { return permuteData(&val{shape: t.shape, data: d}, perm) })
			w, ev := s.best(tp, s.normCandidates(vp, tp))
			if w == nil {
				continue
			}
			back, _ := s.best(t, []*expr{{op: program.OpPermute, attrs: program.Attrs{Perm: inv}, args: []*val{w}, out: t.format, label: "axes back"}})
			if back != nil {
				s.norms = append(s.norms, normRecord{scope: s.scopeOf, boundary: t.origin, fit: &leafFit{kind: "norm", norm: w.from.attrs.Norm, candidates: ev}})
				return back
			}
		}
	}
	return nil
}
