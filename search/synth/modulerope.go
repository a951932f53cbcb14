package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitModuleRope explains a parameterless call that rotates its one
// argument by RoPE tables it holds itself (buffers made at init, never
// passed and so never captured: a rotary module called on q and on k):
// x [B, L, D], [B, L, H, D] or [B, H, L, D] in, the same shape out. The
// tables are solved from the argument and the result, per row and rotation
// pair by least squares over the batch and the heads, in each layout, and
// must lie on the unit circle. They are then explained, in order: by ids
// read off their angles (fitReadRopeNoisy, the solve's distance from the
// circle as the angles' noise), or as a grid's RoPE after rows that never
// turn (explainTables). Tables nothing explains are not taken (they would
// be one step's reading), and the rotation made with the explained tables
// must reproduce the result.
func (s *synth) fitModuleRope(xs []*val, t *val, sc *scope) *val {
	if len(xs) == 0 {
		return nil
	}
	x := xs[0]
	n := len(t.shape)
	if n < 3 || n > 4 || !slices.Equal(x.shape, t.shape) || x.integral() || x.shape[n-1]%2 != 0 || x.shape[n-1] < 2 {
		return nil
	}
	x4, t4 := x, t
	axes := []int{1, 2}
	if n == 3 {
		// one head: [B, L, D] is [B, L, 1, D]
		x4 = &val{shape: []int{x.shape[0], x.shape[1], 1, x.shape[2]}, data: x.data, format: x.format, origin: x.origin}
		t4 = &val{shape: []int{t.shape[0], t.shape[1], 1, t.shape[2]}, data: t.data, format: t.format, origin: t.origin}
		axes = []int{1}
	}
	type solved struct {
		rowsAxis int
		layout   exec.RopeLayout
		cos, sin *val
		noise    float64
	}
	var sols []solved
	for _, rowsAxis := range axes {
		if x4.shape[rowsAxis] < 2 {
			continue
		}
		for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
			if c, sn, noise := solveRotation(x4, t4, rowsAxis, layout); c != nil && unitCircle(c, sn) {
				c.origin, sn.origin = t.origin+"/cos", t.origin+"/sin"
				sols = append(sols, solved{rowsAxis, layout, c, sn, noise})
			}
		}
	}
	reproduces := func(sol solved, c, sn *val) *val {
		y := s.rotateBuffered(x4, c, sn, sol.rowsAxis, sol.layout)
		if y == nil {
			return nil
		}
		if n == 3 {
			y = s.reshape(y, t.shape)
		}
		if y != nil && relRMS(t.format, y.data, t.data) <= tolerance(t.format) {
			return y
		}
		return nil
	}
	// ids read off the angles
	for _, sol := range sols {
		f := s.fitReadRopeNoisy([]*val{sol.cos, sol.sin}, nil, sol.noise)
		if len(f) != 2 || f[0] == nil || f[1] == nil {
			continue
		}
		if y := reproduces(sol, f[0], f[1]); y != nil {
			if f[0].fit != nil && f[0].fit.kind == "rope_table" {
				s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: t.origin, fit: f[0].fit})
			}
			return y
		}
	}
	// a grid's RoPE, after rows that do not turn
	for _, sol := range sols {
		if c, sn := s.explainTables(sol.cos, sol.sin); c != nil {
			if y := reproduces(sol, c, sn); y != nil {
				return y
			}
		}
	}
	return nil
}

// solveRotation solves the tables cos, sin [L, D] (each pair's value at
// both of its places) for which y = rope(x) in the layout, the rows along
// rowsAxis and the heads along the other of axes 1 and 2: per row and
// pair (a, b), c = Σ(x_a·y_a + x_b·y_b) / Σ(x_a² + x_b²) and s = Σ(x_a·y_b
// − x_b·y_a) / Σ(x_a² + x_b²) over the batch and the heads.
//
// The noise is the largest distance of a pair's (c, s) from the unit
// circle: where the rounding of x and the result shows. A pair whose x is
// zero everywhere cannot show its rotation; it is taken as (1, 0), and the
// rotation made from the explained tables must still reproduce the result.
func solveRotation(x, y *val, rowsAxis int, layout exec.RopeLayout) (cosT, sinT *val, noise float64) {
	b, l, h, d := x.shape[0], x.shape[rowsAxis], x.shape[3-rowsAxis], x.shape[3]
	half := d / 2
	pair := func(i int) (int, int) {
		if layout == exec.RopeInterleaved {
			return 2 * i, 2*i + 1
		}
		return i, i + half
	}
	at := func(bi, li, hi int) int {
		if rowsAxis == 1 {
			return ((bi*l+li)*h + hi) * d
		}
		return ((bi*h+hi)*l + li) * d
	}
	cosT = &val{shape: []int{l, d}, data: make([]float32, l*d), format: y.format}
	sinT = &val{shape: []int{l, d}, data: make([]float32, l*d), format: y.format}
	for li := range l {
		for i := range half {
			ia, ib := pair(i)
			var nc, ns, den float64
			for bi := range b {
				for hi := range h {
					o := at(bi, li, hi)
					xa, xb := float64(x.data[o+ia]), float64(x.data[o+ib])
					ya, yb := float64(y.data[o+ia]), float64(y.data[o+ib])
					nc += xa*ya + xb*yb
					ns += xa*yb - xb*ya
					den += xa*xa + xb*xb
				}
			}
			c, sn := 1.0, 0.0
			if den > 0 {
				c, sn = nc/den, ns/den
			}
			noise = math.Max(noise, math.Abs(math.Hypot(c, sn)-1))
			cosT.data[li*d+ia], cosT.data[li*d+ib] = float32(c), float32(c)
			sinT.data[li*d+ia], sinT.data[li*d+ib] = float32(sn), float32(sn)
		}
	}
	return cosT, sinT, noise
}

// explainTables explains solved tables [L, D] as a grid's RoPE, or as
// leading rows that never turn followed by a grid's RoPE; nil, nil where
// neither fits.
func (s *synth) explainTables(cosT, sinT *val) (*val, *val) {
	if c, sn := s.fitGridRope(cosT, sinT); c != nil {
		return c, sn
	}
	l, d := cosT.shape[0], cosT.shape[1]
	still := 0
	for still < l && stillRow(cosT.data[still*d:(still+1)*d], sinT.data[still*d:(still+1)*d]) {
		still++
	}
	// the grid's first row may not turn either (its position 0): every
	// count of still rows up to the run's length is tried, longest first
	var c, sn *val
	for ; still > 0 && c == nil; still-- {
		if still >= l-1 {
			continue
		}
		rest := func(t *val) *val {
			return &val{shape: []int{l - still, d}, data: t.data[still*d:], format: t.format}
		}
		if c, sn = s.fitGridRope(rest(cosT), rest(sinT)); c != nil {
			break
		}
	}
	if c == nil {
		return nil, nil
	}
	ones := &val{shape: []int{still, d}, data: make([]float32, still*d), format: cosT.format, origin: "rope rows that do not turn (cos)"}
	zeros := &val{shape: []int{still, d}, data: make([]float32, still*d), format: sinT.format, origin: "rope rows that do not turn (sin)"}
	for i := range ones.data {
		ones.data[i] = 1
	}
	s.em.constant(ones, "cos 1 on the rows before the grid's (tokens joined before them, not rotated)")
	s.em.constant(zeros, "sin 0 on the rows before the grid's (tokens joined before them, not rotated)")
	cj := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: []*val{ones, s.reshape(c, []int{l - still, d})}, out: cosT.format, label: "still rows, then the grid's cos"})
	sj := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: []*val{zeros, s.reshape(sn, []int{l - still, d})}, out: sinT.format, label: "still rows, then the grid's sin"})
	if cj == nil || sj == nil {
		return nil, nil
	}
	cj.fit, sj.fit = c.fit, sn.fit
	return cj, sj
}

// stillRow reports whether a row of solved tables does not turn: cos 1
// and sin 0 at every place, to the solve's rounding.
func stillRow(c, s []float32) bool {
	for i := range c {
		if math.Abs(float64(c[i])-1) > 1e-3 || math.Abs(float64(s[i])) > 1e-3 {
			return false
		}
	}
	return true
}

// rotateBuffered applies RoPE with tables [L, D] to x [B, L, H, D] (rowsAxis
// 1) or [B, H, L, D] (rowsAxis 2) and returns the result in x's shape.
func (s *synth) rotateBuffered(x, cosV, sinV *val, rowsAxis int, layout exec.RopeLayout) *val {
	b, h, d := x.shape[0], x.shape[3-rowsAxis], x.shape[3]
	in := x
	if rowsAxis == 2 {
		in = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{x}, out: x.format, label: "rows before heads"})
	}
	if in == nil {
		return nil
	}
	l := in.shape[1]
	y := s.rotate(s.reshape(in, []int{b, l, h * d}), [2]*val{cosV, sinV}, layout, h, d)
	if y = s.reshape(y, []int{b, l, h, d}); y == nil {
		return nil
	}
	if rowsAxis == 2 {
		y = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{y}, out: x.format, label: "heads before rows"})
	}
	return y
}
