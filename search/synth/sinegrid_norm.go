package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// sineGridTable explains t as a table of sines and cosines of the
// coordinates of a two-axis grid, made from the request's shape alone and
// handed to a call (DETR's and XCiT's sine position encoding, the input
// of a projection): laid channels first [B, C, G₁, G₂] (the B samples
// equal), C channels in two parts of m, one per axis (the first axis's
// first, or the second's), each part's m/2 frequencies T^(−2p/m) laid out
// as pairs (sin, cos) or as halves [sin… | cos…], each axis's coordinates
// one of sineCoordKinds. T is read off the values (pair 1 at the axis's
// first coordinate past 0) and snapped; every reading is recomputed (coordinates
// a constant of the grid's shape, the sinusoid the timestep op) and must
// reproduce t. One of glue's late forms.
func (s *synth) sineGridTable(t *val) *val {
	if len(t.shape) != 4 || t.numel() == 0 || t.shape[1]%4 != 0 || t.shape[2] < 2 || t.shape[3] < 2 || !samplesEqual(t) {
		return nil
	}
	c, grid := t.shape[1], t.shape[2:]
	m := c / 2
	rows := grid[0] * grid[1]
	// the first sample laid out [rows, C]
	at := func(r, ch int) float64 { return float64(t.data[ch*rows+r]) }
	for _, firstAxis := range []int{0, 1} {
		for _, pairs := range []bool{true, false} {
			for ki, kind := range sineCoordKinds {
				coords := [2][]float32{kind.at(grid[0]), kind.at(grid[1])}
				// the channels of pair p of an axis's part: its sine and cosine
				chans := func(axis, p int) (int, int) {
					base := 0
					if axis != firstAxis {
						base = m
					}
					if pairs {
						return base + 2*p, base + 2*p + 1
					}
					return base + p, base + m/2 + p
				}
				period := 10000.0
				if m >= 4 {
					// pair 1 at the first cell of axis 0 past 0 turns by
					// c·T^(−2/m), less than c (so within (0, π] for c ≤ π)
					i := slices.IndexFunc(coords[0], func(x float32) bool { return x > 0 })
					if i < 0 {
						continue
					}
					sn, cs := chans(0, 1)
					ang := math.Atan2(at(i*grid[1], sn), at(i*grid[1], cs))
					c0 := float64(coords[0][i])
					if ang <= 0 || ang >= c0 {
						continue
					}
					// the simplest period whose angle is as near as the
					// table's format lets the angle be read
					period = fewestDigits(math.Pow(c0/ang, float64(m)/2), func(x float64) bool {
						return math.Abs(c0*math.Pow(x, -2/float64(m))-ang) < tolerance(t.format)*ang
					})
				}
				if v := s.sineGridOf(t, grid, coords, firstAxis, pairs, period, ki); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// sineGridOf makes the table sineGridTable reads and returns it where it
// reproduces t.
func (s *synth) sineGridOf(t *val, grid []int, coords [2][]float32, firstAxis int, pairs bool, period float64, kind int) *val {
	b, c := t.shape[0], t.shape[1]
	m, rows := c/2, grid[0]*grid[1]
	var parts [2]*val
	for a := range 2 {
		// each row's coordinate on axis a, row-major
		pos := make([]float32, rows)
		for r := range rows {
			i := r / grid[1]
			if a == 1 {
				i = r % grid[1]
			}
			pos[r] = coords[a][i]
		}
		cv := s.relConst(fmt.Sprintf("sinegrid%dx%d axis%d kind%d", grid[0], grid[1], a, kind), []int{rows}, pos,
			fmt.Sprintf("each cell's coordinate on axis %d of the %v grid, %s (a constant of the request's shape)", a, grid, sineCoordKinds[kind].note))
		p := exec.TimestepParams{Dim: m, Scale: 1, MaxPeriod: float32(period)}
		e := s.derive(&expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{cv}, out: precision.F32, label: fmt.Sprintf("sin-cos of axis %d", a)})
		if pairs {
			r := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{s.reshape(e, []int{rows, 2, m / 2})}, out: precision.F32, label: "sine and cosine paired"})
			e = s.reshape(r, []int{rows, m})
		}
		if e == nil {
			return nil
		}
		parts[a] = e
	}
	if firstAxis == 1 {
		parts[0], parts[1] = parts[1], parts[0]
	}
	tab := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: parts[:], out: precision.F32, label: "the axes' parts joined"})
	cf := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{tab}, out: precision.F32, label: "channels first"})
	if t.format != precision.F32 {
		// made in f32, handed on in the call's format (.to(dtype))
		cf = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{cf}, out: t.format, label: "cast"})
	}
	out := s.reshape(cf, []int{1, c, grid[0], grid[1]})
	if b > 1 && out != nil {
		out = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: b, Axis: 0}, args: []*val{out}, out: t.format, label: "one table per sample"})
	}
	if out == nil || !slices.Equal(out.shape, t.shape) || relRMS(t.format, out.data, t.data) > tolerance(t.format) {
		return nil
	}
	return out
}

// samplesEqual reports whether every sample of t (its leading axis) holds
// the first sample's values.
func samplesEqual(t *val) bool {
	n := t.numel() / t.shape[0]
	for i := n; i < len(t.data); i++ {
		if t.data[i] != t.data[i%n] {
			return false
		}
	}
	return true
}

// sineCoordKind is how a sine table's axis of n cells is turned into
// coordinates, in f32 as the model computes them.
type sineCoordKind struct {
	note string
	at   func(n int) []float32
}

// sineCoordKinds are the coordinates sineGridTable tries: the cells'
// positions from one normalised by the last, times 2π (each step rounded
// to f32, ε 10⁻⁶ beside the last: DETR's normalize=True, XCiT); the
// positions from one; from zero.
var sineCoordKinds = []sineCoordKind{
	{"(i + 1)/(n + 10⁻⁶)·2π in f32", func(n int) []float32 {
		out := make([]float32, n)
		last := float32(n) + 1e-6
		for i := range out {
			out[i] = (float32(i+1) / last) * float32(2*math.Pi)
		}
		return out
	}},
	{"the positions from one, 1…n", func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(i + 1)
		}
		return out
	}},
	integerCoordsKind,
}

// integerCoordsKind are an axis's integer positions 0…n−1.
var integerCoordsKind = sineCoordKind{integerCoords.note, integerCoords.at}

// fewestDigits is c rounded to the fewest significant digits (1 to 7)
// that keep accepts; c itself where none does. Unlike snap it may move
// far from c: for a number read off values stored in a narrow format.
func fewestDigits(c float64, keep func(float64) bool) float64 {
	if c <= 0 || math.IsInf(c, 0) || math.IsNaN(c) {
		return c
	}
	for digits := 1; digits <= 7; digits++ {
		p := math.Pow(10, math.Floor(math.Log10(c))-float64(digits-1))
		if x := math.Round(c/p) * p; keep(x) {
			return x
		}
	}
	return c
}
