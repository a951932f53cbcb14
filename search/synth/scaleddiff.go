package synth

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxScaledUpdates bounds the updates scaledUpdate scores for each
// residual and scale, the nearest on the host first.
const maxScaledUpdates = 4

// scaledUpdate explains t as x + γ·u: x a value of t's shape, γ a
// parameter vector along one of t's axes (a layer scale), and u a value
// of t's shape or the difference a − b of two (a re-parameterisable
// token mixer in its training form: x + γ·(mixer(x) − norm(x)), the
// difference made in the forward, not by a module). Each u is screened
// on the host by how near x + γ·u comes to t, then the nearest few run.
func (s *synth) scaledUpdate(t *val, vals []*val) *val {
	if len(t.shape) == 0 || t.integral() {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	if len(ops) < 2 {
		return nil
	}
	var cands []*expr
	for _, p := range vals {
		c := p.numel()
		if !p.param || p.opaque || c < 2 || c >= t.numel() || !vectorShape(p.shape) {
			continue
		}
		for ax, g := range s.vectorAxes(p, t) {
			inner := 1
			for _, m := range t.shape[ax+1:] {
				inner *= m
			}
			for _, x := range ops {
				for _, u := range nearestUpdates(t, x, p.data, c, inner, ops) {
					upd := u[0]
					label := "x + γ·u (a layer-scaled update)"
					if u[1] != nil {
						upd = s.derive(&expr{op: program.OpSub, args: []*val{u[0], u[1]}, out: t.format, label: "a − b"})
						label = "x + γ·(a − b) (a layer-scaled difference)"
					}
					if upd == nil {
						continue
					}
					scaled := s.derive(&expr{op: program.OpMul, args: []*val{g, upd}, out: t.format, label: fmt.Sprintf("times a parameter along axis %d", ax)})
					if scaled != nil {
						cands = append(cands, &expr{op: program.OpAdd, args: []*val{x, scaled}, out: t.format, label: label})
					}
				}
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// nearestUpdates are the values u (second nil) and differences a − b of
// ops other than x for which x + γ·u, summed in float64 on the host, is
// nearest t: at most maxScaledUpdates, each within the format's
// tolerance (γ's entry i/inner mod c along its axis). Read through t
// itself, not through (t − x)/γ, which a narrow format's rounding of t
// swamps where γ·u is small beside x.
func nearestUpdates(t, x *val, g []float32, c, inner int, ops []*val) [][2]*val {
	type scored struct {
		u   [2]*val
		err float64
	}
	var r float64
	for _, w := range t.data {
		r += float64(w) * float64(w)
	}
	if r == 0 {
		return nil
	}
	tol := tolerance(t.format)
	var near []scored
	consider := func(a, b *val) {
		var d float64
		for i, w := range t.data {
			u := float64(a.data[i])
			if b != nil {
				u -= float64(b.data[i])
			}
			e := float64(x.data[i]) + float64(g[(i/inner)%c])*u - float64(w)
			d += e * e
		}
		if e := math.Sqrt(d / r); e <= tol {
			near = append(near, scored{[2]*val{a, b}, e})
		}
	}
	for _, a := range ops {
		if a == x {
			continue
		}
		consider(a, nil)
		for _, b := range ops {
			if b != x && b != a {
				consider(a, b)
			}
		}
	}
	slices.SortStableFunc(near, func(a, b scored) int { return cmp.Compare(a.err, b.err) })
	out := make([][2]*val, 0, maxScaledUpdates)
	for _, n := range near[:min(len(near), maxScaledUpdates)] {
		out = append(out, n.u)
	}
	return out
}
