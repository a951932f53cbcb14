package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitBufferRope explains a parameterless call that rotates its one
// argument by RoPE tables it holds itself (buffers made at init, never
// passed and so never captured): x [B, L, H, D] or [B, H, L, D] in, the
// same shape out. The tables are solved from the argument and the result,
// per row and rotation pair by least squares over the batch and the heads,
// in each layout; they must lie on the unit circle, and are then explained
// as a grid's RoPE (fitGridRope), rows that never turn (cos 1, sin 0: a
// prefix of tokens joined before the grid's) kept before them as the
// constants they are. The rotation made with the explained tables must
// reproduce the result. Tried where every other form of such a call fails.
func (s *synth) fitBufferRope(xs []*val, t *val) *val {
	if len(xs) == 0 {
		return nil
	}
	x := xs[0]
	if len(x.shape) != 4 || !slices.Equal(x.shape, t.shape) || x.intType || x.shape[3]%2 != 0 || x.shape[3] < 2 {
		return nil
	}
	for _, rowsAxis := range []int{1, 2} {
		for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
			cosT, sinT := solveRotation(x, t, rowsAxis, layout)
			if cosT == nil || !unitCircle(cosT, sinT) {
				continue
			}
			cosV, sinV := s.explainTables(cosT, sinT)
			if cosV == nil {
				continue
			}
			if y := s.rotateBuffered(x, cosV, sinV, rowsAxis, layout); y != nil && relRMS(t.format, y.data, t.data) <= tolerance(t.format) {
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
// − x_b·y_a) / Σ(x_a² + x_b²) over the batch and the heads. Nil where a
// pair's x is zero everywhere.
func solveRotation(x, y *val, rowsAxis int, layout exec.RopeLayout) (*val, *val) {
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
	cosT := &val{shape: []int{l, d}, data: make([]float32, l*d), format: y.format}
	sinT := &val{shape: []int{l, d}, data: make([]float32, l*d), format: y.format}
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
			if den == 0 {
				return nil, nil
			}
			c, sn := float32(nc/den), float32(ns/den)
			cosT.data[li*d+ia], cosT.data[li*d+ib] = c, c
			sinT.data[li*d+ia], sinT.data[li*d+ib] = sn, sn
		}
	}
	return cosT, sinT
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
