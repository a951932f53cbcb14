package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// qrProjected explains t [.., m] as x [.., n] times Qᵀ, Q the orthogonal
// basis [m, n] of a matrix parameter of the call (torch.linalg.qr(W)[0]:
// a linear motion decomposition, Σ_j x_j·Q[:, j]), in f32 whatever the
// values' format (the forward upcasts both), then stored in t's.
func (s *synth) qrProjected(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	m := t.shape[len(t.shape)-1]
	for _, w := range vals {
		if !w.param || len(w.shape) != 2 || w.shape[0] != m || w.shape[1] > m {
			continue
		}
		n := w.shape[1]
		wf := s.inF32(w)
		q := s.derive(&expr{op: program.OpQR, args: []*val{wf}, out: precision.F32, label: "Q of the weight's QR"})
		if q == nil {
			continue
		}
		for _, x := range vals {
			if x.param || x.opaque || x.integral() || len(x.shape) != len(t.shape) || x.shape[len(x.shape)-1] != n ||
				!slices.Equal(x.shape[:len(x.shape)-1], t.shape[:len(t.shape)-1]) {
				continue
			}
			y := s.derive(&expr{op: program.OpLinear, args: []*val{s.inF32(x), q, nil}, out: precision.F32, label: "x·Qᵀ"})
			if y == nil {
				continue
			}
			var cands []*expr
			if t.format == precision.F32 {
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: t.shape}, args: []*val{y}, out: precision.F32, label: "x·Qᵀ"})
			} else {
				cands = append(cands, &expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{y}, out: t.format, label: "x·Qᵀ, stored"})
			}
			if v, _ := s.best(t, cands); v != nil {
				return v
			}
		}
	}
	return nil
}

// inF32 is v, cast to f32 where it is stored narrower.
func (s *synth) inF32(v *val) *val {
	if v.format == precision.F32 {
		return v
	}
	return s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{v}, out: precision.F32, label: "f32"})
}
