package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitOwnRope explains a parameterless call that rotates its one argument
// x [B, S, H, D] (or [B, S, D]) by RoPE tables it keeps as buffers (no
// parameter, no table in the trace: a rotary module called on q and on
// k). For the interleaved and the half layout, each row's and pair's
// (cos, sin) is read back from x and the result by least squares over the
// batch and the heads (out_a = x_a·c − x_b·s, out_b = x_b·c + x_a·s); the
// tables are then made from ids read off their angles (fitReadRope), and
// x rotated by them. Tables no ids explain are not taken (they would be
// one step's reading).
func (s *synth) fitOwnRope(x, t *val, sc *scope) *val {
	n := len(t.shape)
	if !slices.Equal(x.shape, t.shape) || n < 3 || n > 4 || x.integral() {
		return nil
	}
	B, S, D := t.shape[0], t.shape[1], t.shape[n-1]
	H := 1
	if n == 4 {
		H = t.shape[2]
	}
	if D%2 != 0 || D < 4 || S < 2 {
		return nil
	}
	tol := tolerance(t.format)
	for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
		pair := func(j int) (int, int) {
			if layout == exec.RopeInterleaved {
				return 2 * j, 2*j + 1
			}
			return j, j + D/2
		}
		cos, sin := make([]float32, S*D), make([]float32, S*D)
		onCircle, noise := true, 0.0
		for r := range S {
			for j := range D / 2 {
				a, b := pair(j)
				var nn, cs, sn float64
				for bi := range B {
					for h := range H {
						base := ((bi*S+r)*H + h) * D
						xa, xb := float64(x.data[base+a]), float64(x.data[base+b])
						oa, ob := float64(t.data[base+a]), float64(t.data[base+b])
						nn += xa*xa + xb*xb
						cs += xa*oa + xb*ob
						sn += xa*ob - xb*oa
					}
				}
				c, si := 1.0, 0.0
				if nn > 0 {
					c, si = cs/nn, sn/nn
				}
				if math.Abs(c*c+si*si-1) > 0.05 {
					onCircle = false
				}
				noise = math.Max(noise, math.Abs(math.Sqrt(c*c+si*si)-1))
				cos[r*D+a], cos[r*D+b] = float32(c), float32(c)
				sin[r*D+a], sin[r*D+b] = float32(si), float32(si)
			}
		}
		if !onCircle {
			continue
		}
		// the readings carry the precision of the values they were read
		// from: scored against the tables in that format's tolerance
		cv := &val{shape: []int{S, D}, data: cos, format: t.format, origin: t.origin + "/cos"}
		sv := &val{shape: []int{S, D}, data: sin, format: t.format, origin: t.origin + "/sin"}
		// the angles' noise: the readings' distance from the unit
		// circle, where the rounding of x and the result shows
		f := s.fitReadRopeNoisy([]*val{cv, sv}, nil, noise)
		if len(f) != 2 || f[0] == nil || f[1] == nil {
			continue // tables no ids explain: not taken from one step's values
		}
		xr := s.reshape(x, []int{B, S, H * D})
		if xr == nil {
			continue
		}
		y := s.derive(&expr{op: program.OpRope, attrs: program.Attrs{Rope: exec.RopeParams{Heads: H, Layout: layout}}, args: []*val{xr, f[0], f[1]}, out: t.format, label: "rotated by the module's own tables"})
		y = s.reshape(y, t.shape)
		if y != nil && relRMS(t.format, y.data, t.data) <= tol {
			if f[0].fit != nil && f[0].fit.kind == "rope_table" {
				s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: t.origin, fit: f[0].fit})
			}
			return y
		}
	}
	return nil
}
