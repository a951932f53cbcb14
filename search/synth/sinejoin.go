package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// sinusoidsJoined explains t [N, D] as k ≤ 4 sinusoid embeddings of
// width D/k joined along the channels, all made in the forward: the first
// of a 1-D value of the scope, each later one the same embedding of
// another 1-D value or of zeros shaped like the first (StableCascade's
// timestep ratio beside the conditionings a pipeline did not pass, each
// zeros_like(r) through the same function). A later piece no value's
// embedding makes may be fitted afresh.
func (s *synth) sinusoidsJoined(t *val, vals []*val) *val {
	if len(t.shape) != 2 || t.shape[1] < 4 {
		return nil
	}
	n, d := t.shape[0], t.shape[1]
	var sources []*val
	for _, v := range vals {
		if !v.opaque && len(v.shape) == 1 && v.shape[0] == n && !v.intType {
			sources = append(sources, v)
		}
	}
	if len(sources) == 0 {
		return nil
	}
	tol := tolerance(t.format)
	for k := 2; k <= 4; k++ {
		w := d / k
		if d%k != 0 || w%2 != 0 {
			continue
		}
		for _, src := range sources {
			first := s.fitSinusoid(src, s.part(t, 1, 0, w))
			if first == nil {
				continue
			}
			pieces := []*val{first}
			zero := s.derive(&expr{op: program.OpMul, args: []*val{src, s.constant(0)}, out: src.format, label: "zeros shaped like " + src.origin})
			for i := 1; i < k; i++ {
				piece := s.part(t, 1, i*w, (i+1)*w)
				var found *val
				for _, u := range append([]*val{zero}, sources...) {
					if e := s.sameSinusoid(first, src, u); e != nil && relRMS(t.format, e.data, piece.data) <= tol && s.everyStep(e, piece, tol) {
						found = e
						break
					}
				}
				if found == nil {
					for _, u := range sources {
						if found = s.fitSinusoid(u, piece); found != nil {
							break
						}
					}
				}
				if found == nil {
					break
				}
				pieces = append(pieces, found)
			}
			if len(pieces) < k {
				continue
			}
			if v, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: pieces, out: t.format,
				label: fmt.Sprintf("%d sinusoids joined", k)}}); v != nil {
				// the first piece's fit is the factors' evidence
				scale := 1.0
				if pre := first.from.args[0].from; first.from.args[0] != src && pre != nil && pre.op == program.OpMul && pre.args[1] != nil && pre.args[1].scalar {
					scale = float64(pre.args[1].data[0])
				}
				s.sinusoids = append(s.sinusoids, sinusoidRecord{scope: s.scopeOf, boundary: t.origin, fit: first.fit, inputScale: scale, out: v})
				return v
			}
		}
	}
	return nil
}

// sameSinusoid is the embedding that made fitted of src (a timestep_embed
// of src, or of src scaled first) applied to u instead.
func (s *synth) sameSinusoid(fitted, src, u *val) *val {
	if u == nil || fitted.from == nil || fitted.from.op != program.OpTimestepEmbed {
		return nil
	}
	e := *fitted.from
	arg := u
	if pre := e.args[0].from; e.args[0] != src && pre != nil && pre.op == program.OpMul && len(pre.args) == 2 && pre.args[0] == src && pre.args[1] != nil && pre.args[1].scalar {
		// the angles' scale applied to the source first (r·10⁴)
		arg = s.derive(&expr{op: program.OpMul, args: []*val{u, pre.args[1]}, out: u.format, label: pre.label})
	}
	if arg == nil {
		return nil
	}
	e.args = []*val{arg}
	e.label = "the same sinusoid of " + u.origin
	return s.derive(&e)
}

// flatSinusoidPiece explains t's entries from off on along its last axis
// as the sinusoidal embeddings (fitSinusoid) of each entry of a value
// v [B, k], flattened to B·k timesteps and laid back as [B, k·d]
// (get_timestep_embedding(v.flatten(), d).reshape(B, −1): a model's
// micro-conditions joined to a pooled text vector); d is every even
// width that fits.
func (s *synth) flatSinusoidPiece(t *val, ax, off int, vals []*val) *val {
	if len(t.shape) != 2 {
		return nil
	}
	b := t.shape[0]
	for _, v := range vals {
		if v.opaque || len(v.shape) != 2 || v.shape[0] != b || v.shape[1] < 2 {
			continue
		}
		k := v.shape[1]
		flat := s.reshape(v, []int{b * k})
		if flat == nil {
			continue
		}
		for d := 2; off+k*d <= t.shape[ax]; d += 2 {
			sub := s.part(t, ax, off, off+k*d)
			if slices.ContainsFunc(sub.data, func(x float32) bool { return x > 1.001 || x < -1.001 }) {
				break // sines and cosines only: a wider piece holds this entry too
			}
			if !sinCosPairs(sub.data, d) {
				continue
			}
			rows := s.readAs(sub, []int{b * k, d}, func(x []float32) []float32 { return x })
			rows.reshapedFrom = true
			if w := s.fitSinusoid(flat, rows); w != nil {
				if r := s.reshape(w, sub.shape); r != nil && s.everyStep(r, sub, tolerance(t.format)) {
					return r
				}
			}
		}
	}
	return nil
}

// sinCosPairs reports whether data, read as rows of d, pairs entry j of
// each row with entry j + d/2 as a sine and a cosine of one angle (their
// squares sum to 1, within a narrow format's rounding): a cheap test
// before any sinusoid is fitted.
func sinCosPairs(data []float32, d int) bool {
	h := d / 2
	for r := 0; r+d <= len(data); r += d {
		for j := range h {
			a, b := float64(data[r+j]), float64(data[r+j+h])
			if math.Abs(a*a+b*b-1) > 2e-2 {
				return false
			}
		}
	}
	return true
}
