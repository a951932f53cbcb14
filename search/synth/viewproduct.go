package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// viewTimesPart explains t as a part of one value of the scope (the value
// itself, or a slice of one axis of it) times a rearrangement of another
// value, or of maps the scope made one after another joined along the
// channels (CoaT's convolutional position encoding: the queries without
// their class row times the convolved values laid out as heads). The
// rearrangement is read off t / part on the host, every entry within a
// rounding of the quotient where the part is not near zero; the product
// is then scored.
func (s *synth) viewTimesPart(t *val, sc *scope, vals []*val) *val {
	if t.integral() || t.numel() < 4 || len(t.shape) < 2 {
		return nil
	}
	sources := slices.Concat(vals, s.mapJoins(sc, t.shape[0], false))
	rel := 1e-5
	if t.format != precision.F32 {
		rel = 2e-2
	}
	var cands []*expr
	for _, a := range vals {
		if a.opaque || a.integral() || a == t || len(a.shape) != len(t.shape) {
			continue
		}
		for _, part := range s.partsShaped(a, t) {
			q, known := quotient(t.data, part.data)

			if !known[0] {
				continue
			}
			same := func(x float32, i int) bool {
				return !known[i] || math.Abs(float64(x)-float64(q[i])) <= rel*max(math.Abs(float64(q[i])), math.Abs(float64(x)))+1e-30
			}
			for _, v := range sources {
				if v == a || v.opaque || v.integral() || v.numel() != t.numel() {
					continue
				}
				starts := 0
				for at := 0; at < len(v.data) && starts < viewStarts(len(v.data)); at++ {
					if !same(v.data[at], 0) {
						continue
					}
					starts++
					digits := rearrangeMapAt(v.data, q, same, at)

					if digits == nil {
						continue
					}
					w := s.viewOf(v, t, at, digits)
					if w == nil && len(v.shape) == 4 {
						// a map's cells read as one axis (x.reshape(B, h, C, H·W))
						w = s.viewOf(s.reshape(v, []int{v.shape[0], v.shape[1], v.shape[2] * v.shape[3]}), t, at, digits)
					}
					if w != nil {
						cands = append(cands, &expr{op: program.OpMul, args: []*val{part, w}, out: t.format,
							label: fmt.Sprintf("a part of %s times a rearrangement of %s", a.origin, v.origin)})
						break
					}
				}
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// partsShaped are a itself where it has t's shape, else each slice of one
// of its axes that has it.
func (s *synth) partsShaped(a, t *val) []*val {
	if slices.Equal(a.shape, t.shape) {
		return []*val{a}
	}
	var out []*val
	for c := range axisCuts(t, a) {
		shape := slices.Clone(a.shape)
		shape[c[0]] = c[2]
		if !slices.Equal(shape, t.shape) {
			continue
		}
		if p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: c[0], Start: c[1], End: c[1] + c[2]}, args: []*val{a}, out: a.format, label: "part of an axis"}); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// quotient is t / p entry by entry, and where it is known: p's entry not
// near zero (a thousandth of p's RMS or more).
func quotient(t, p []float32) ([]float32, []bool) {
	var ss float64
	for _, x := range p {
		ss += float64(x) * float64(x)
	}
	floor := 1e-3 * math.Sqrt(ss/float64(max(len(p), 1)))
	q, known := make([]float32, len(t)), make([]bool, len(t))
	for i := range t {
		if math.Abs(float64(p[i])) > floor {
			q[i], known[i] = t[i]/p[i], true
		}
	}
	return q, known
}
