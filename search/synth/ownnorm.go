package synth

import "slices"

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
