package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/precision"
)

// fitGridCoordRope is fitCoordRope over coordinates a model makes from the
// request's shape alone, where no argument holds them and no call is
// handed the sizes (a method of the model builds the tables and passes
// them to each block): a row-major grid over 1 to 3 axes whose sizes
// multiply to the tables' rows, each axis's coordinates one of
// gridCoordKinds (integer positions, whose map and ladder fitCoordRope
// reads off the angles; n points over [−1, 1] as torch's f32 linspace
// makes them; the centres of n cells normalised into [−1, 1]). The grid
// is a constant of the request's shape. Tried where the tables of
// integer ids read back from the angles fail.
func (s *synth) fitGridCoordRope(cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	if rows < 2 || d < 2 {
		return nil, nil
	}
	for _, grid := range factorizations(rows, 3) {
		for _, kind := range gridCoordKinds {
			for _, xy := range []bool{false, true} {
				if xy && len(grid) < 2 {
					continue
				}
				pv := gridCoords(grid, kind)
				note := "row-major"
				if xy {
					// the columns last axis first (meshgrid's 'xy' indexing:
					// x, the fastest axis, is the first coordinate)
					pv = reversedColumns(pv)
					note = "row-major, the coordinates last axis first"
				}
				pv.origin = cosT.origin + "/grid"
				if cv, sv := s.fitCoordRope([]*val{pv}, cosT, sinT); cv != nil {
					s.em.constant(pv, fmt.Sprintf("positions on the %v grid, %s, each axis %s (a constant of the request's shape)", grid, note, kind.note))
					return cv, sv
				}
			}
		}
	}
	return nil, nil
}

// reversedColumns is coordinates [rows, k] with the columns in reverse
// order.
func reversedColumns(pv *val) *val {
	k := pv.shape[1]
	out := &val{shape: slices.Clone(pv.shape), data: make([]float32, len(pv.data)), format: pv.format}
	for r := 0; r < pv.shape[0]; r++ {
		for a := range k {
			out.data[r*k+a] = pv.data[r*k+k-1-a]
		}
	}
	return out
}

// gridCoordKind is how a grid's axis of n cells is turned into
// coordinates: at returns them in f32 as the model computes them.
type gridCoordKind struct {
	note string
	at   func(n int) []float32
}

// gridCoordKinds are the coordinates fitGridCoordRope tries, in order:
// points spaced evenly over [−1, 1] (the first and last cells at the
// ends), the cells' integer positions, the cells' centres normalised
// into [−1, 1] (the unit interval cut into n cells, each at its middle:
// no cell at either end), and the positions from one.
var gridCoordKinds = []gridCoordKind{
	{"linspace(−1, 1, n) in f32", func(n int) []float32 { return linspaceF32(-1, 1, n) }},
	integerCoords,
	{"its cells' centres 2·((i + ½)/n) − 1 in f32", centresF32},
	// positions from one (a grid offset of one: the cell after a class
	// token's place), any scale absorbed by the ladder read off the angles
	{"its integer positions plus one, 1…n", func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(i + 1)
		}
		return out
	}},
}

// integerCoords are an axis's integer positions.
var integerCoords = gridCoordKind{"its integer positions 0…n−1", func(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i)
	}
	return out
}}

// centresF32 are the centres of n equal cells of [−1, 1] as a model
// computes them in f32: c_i = (i + 0.5)/n (arange(0.5, n) divided by n,
// rounded), then 2·c_i − 1, each step rounded.
func centresF32(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		c := (float32(i) + 0.5) / float32(n)
		out[i] = float32(2*c) - 1
	}
	return out
}

// gridCoords are the coordinates of a row-major grid, one column per
// axis ([rows, A]; [1, rows] for one axis, as fitCoordRope reads a single
// axis), each axis's made by kind.
func gridCoords(grid []int, kind gridCoordKind) *val {
	rows := 1
	for _, g := range grid {
		rows *= g
	}
	k := len(grid)
	axes := make([][]float32, k)
	for a, g := range grid {
		axes[a] = kind.at(g)
	}
	pos := make([]float32, rows*k)
	stride := rowMajorStrides(grid)
	for r := range rows {
		for a, g := range grid {
			pos[r*k+a] = axes[a][(r/stride[a])%g]
		}
	}
	shape := []int{rows, k}
	if k == 1 {
		shape = []int{1, rows}
	}
	return &val{shape: shape, data: pos, format: precision.F32}
}

// linspaceF32 is torch.linspace(lo, hi, n) in f32 as torch computes it:
// step = (hi − lo)/(n − 1), the first n/2 points lo + step·i and the
// others hi − step·(n − 1 − i), each product and sum rounded to f32
// (the two halves from either end, so the last point is hi exactly).
func linspaceF32(lo, hi float32, n int) []float32 {
	out := make([]float32, n)
	if n == 1 {
		out[0] = lo
		return out
	}
	step := (hi - lo) / float32(n-1)
	for i := range n {
		if i < n/2 {
			out[i] = lo + float32(step*float32(i)) // the conversion rounds: no fused multiply-add
		} else {
			out[i] = hi - float32(step*float32(n-1-i))
		}
	}
	return out
}

// fitGridCoordComplex is fitGridCoordRope of a complex table [.., P, 2]
// (cos + i·sin per pair, a pair of zeros where the model pads): read as
// the interleaved cos and sin tables it halves, fitted as those are, and
// the complex table taken from them.
func (s *synth) fitGridCoordComplex(t *val) *val {
	n := len(t.shape)
	if n < 3 || t.shape[n-1] != 2 || t.shape[n-2] < 1 {
		return nil
	}
	p := t.shape[n-2]
	if !unitOrZeroPairs(t) {
		return nil // neither turns nor pairs of zeros
	}
	rows := t.numel() / (2 * p)
	cosT := &val{shape: []int{rows, 2 * p}, data: make([]float32, t.numel()), format: t.format, origin: t.origin}
	sinT := &val{shape: []int{rows, 2 * p}, data: make([]float32, t.numel()), format: t.format, origin: t.origin}
	for i := range rows * p {
		re, im := t.data[2*i], t.data[2*i+1]
		cosT.data[2*i], cosT.data[2*i+1] = re, re
		sinT.data[2*i], sinT.data[2*i+1] = im, im
	}
	cv, sv := s.fitGridCoordRope(cosT, sinT)
	if cv == nil || sv == nil {
		return nil
	}
	z := s.complexOf(cv, sv, t.shape)
	if z == nil || relRMS(t.format, z.data, t.data) > tolerance(t.format) {
		return nil
	}
	z.fit = cv.fit
	return z
}

// unitOrDead reports whether every (cos, sin) pair of tables is on the
// unit circle or both 0 (a channel padded with zeros).
func unitOrDead(c, sn *val) bool {
	if len(c.data) != len(sn.data) {
		return false
	}
	for i := range c.data {
		x, y := float64(c.data[i]), float64(sn.data[i])
		if (x != 0 || y != 0) && math.Abs(x*x+y*y-1) > 0.05 {
			return false
		}
	}
	return true
}

// unitOrZeroPairs reports whether a complex table [.., 2] holds only
// (re, im) pairs on the unit circle or pairs of zeros, some of them
// turning.
func unitOrZeroPairs(t *val) bool {
	if len(t.data)%2 != 0 || len(t.data) == 0 {
		return false
	}
	re := &val{data: make([]float32, 0, len(t.data)/2)}
	im := &val{data: make([]float32, 0, len(t.data)/2)}
	for i := 0; i+1 < len(t.data); i += 2 {
		re.data, im.data = append(re.data, t.data[i]), append(im.data, t.data[i+1])
	}
	return unitOrDead(re, im) && slices.ContainsFunc(t.data, func(x float32) bool { return x != 0 })
}
