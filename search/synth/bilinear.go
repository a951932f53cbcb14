package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// bilinearGrid is a learned G×G position table resampled bilinearly to an
// h×w grid of patches the way a model does it with gathers (Qwen3-VL's
// vision tower): the sample points linspace(0, G − 1, n) per axis in f32
// (the table's corners on the grid's corners), each cell reading the four
// table rows around its point, weighted (1 − dh)(1 − dw), (1 − dh)·dw,
// dh·(1 − dw), dh·dw; the cells visited in an order tiles names
// (gridTiles: row-major, or merge tiles).
type bilinearGrid struct {
	g, h, w int
	tiles   []int
}

// cells are the grid's cells in the order.
func (b bilinearGrid) cells() [][]int {
	out := make([][]int, 0, b.h*b.w)
	for i := range b.h {
		for j := range b.w {
			out = append(out, []int{i, j})
		}
	}
	slices.SortStableFunc(out, func(x, y []int) int { return slices.Compare(tileKey(x, b.tiles), tileKey(y, b.tiles)) })
	return out
}

// points are linspace(0, G − 1, n)'s floors, the next row (capped at G −
// 1) and the fractions, in f32.
func (b bilinearGrid) points(n int) (lo, hi []int, frac []float32) {
	p := linspaceF32(0, float32(b.g-1), n)
	lo, hi, frac = make([]int, n), make([]int, n), make([]float32, n)
	for i, x := range p {
		lo[i] = int(x) // torch's .int(): toward zero, x ≥ 0
		hi[i] = min(lo[i]+1, b.g-1)
		frac[i] = x - float32(lo[i])
	}
	return lo, hi, frac
}

// corners are the four table rows each cell reads, [N, 4].
func (b bilinearGrid) corners() []float32 {
	fh, ch, _ := b.points(b.h)
	fw, cw, _ := b.points(b.w)
	var out []float32
	for _, c := range b.cells() {
		i, j := c[0], c[1]
		out = append(out, float32(fh[i]*b.g+fw[j]), float32(fh[i]*b.g+cw[j]), float32(ch[i]*b.g+fw[j]), float32(ch[i]*b.g+cw[j]))
	}
	return out
}

// weights are each cell's four weights, [N, 4], each product in f32 and
// rounded to f (the table's format: the model makes them in it).
func (b bilinearGrid) weights(f precision.Format) []float32 {
	_, _, dh := b.points(b.h)
	_, _, dw := b.points(b.w)
	var out []float32
	for _, c := range b.cells() {
		y, x := f.Round(dh[c[0]]), f.Round(dw[c[1]])
		oy, ox := f.Round(1-y), f.Round(1-x)
		out = append(out, f.Round(oy*ox), f.Round(oy*x), f.Round(y*ox), f.Round(y*x))
	}
	return out
}

// bilinearCornersOf reads ids [N, 4] as the corner rows of a G×G table
// resampled to some h×w grid (h·w = N) in some tiled order: G from the
// largest id (the last cell reads the table's last row), the grid and
// the order tried until the corners are the ids; nil where none is.
func bilinearCornersOf(v *val) *bilinearGrid {
	if len(v.shape) != 2 || v.shape[1] != 4 || !v.integral() || v.shape[0] < 4 {
		return nil
	}
	top := slices.Max(v.data)
	g := int(math.Round(math.Sqrt(float64(top) + 1)))
	if g < 2 || float32(g*g-1) != top {
		return nil
	}
	n := v.shape[0]
	for h := 2; h <= n/2; h++ {
		if n%h != 0 {
			continue
		}
		for _, tiles := range gridTiles(h, n/h) {
			b := bilinearGrid{g: g, h: h, w: n / h, tiles: tiles}
			if slices.Equal(b.corners(), v.data) {
				return &b
			}
		}
	}
	return nil
}

// bilinearRecord is a corner-ids value read as a bilinear resampling.
type bilinearRecord struct {
	ids  *val
	grid bilinearGrid
}

// bilinearSum explains t [N, D] as the four gathered corner rows e [N, 4,
// D] of a bilinear resampling (rows the scope read at corner ids
// bilinearCornersOf recognised) times their weights, summed over the
// corners, plus a value of the scope of t's shape (the patches the
// positions are added to) or alone. The sum is tried in the format, left
// to right, and accumulated in f32 then rounded (torch's sum of a narrow
// format).
func (s *synth) bilinearSum(t *val, vals []*val) *val {
	if len(t.shape) != 2 || len(s.bilinear) == 0 {
		return nil
	}
	n, d := t.shape[0], t.shape[1]
	var cands []*expr
	for _, rec := range s.bilinear {
		for _, e := range vals {
			if e.opaque || !slices.Equal(e.shape, []int{n, 4, d}) || !gatheredAt(e, rec.ids) {
				continue
			}
			w := s.relConst(fmt.Sprintf("bilinear%dto%dx%d%v", rec.grid.g, rec.grid.h, rec.grid.w, rec.grid.tiles), []int{n, 4, 1}, rec.grid.weights(e.format),
				fmt.Sprintf("bilinear weights of a %d×%d table at a %d×%d grid's points linspace(0, %d, n), cells in tiles %v (made from the grid's shape)", rec.grid.g, rec.grid.g, rec.grid.h, rec.grid.w, rec.grid.g-1, rec.grid.tiles))
			if e.format != precision.F32 {
				w = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: e.format}, args: []*val{w}, out: e.format})
			}
			p := s.derive(&expr{op: program.OpMul, args: []*val{e, w}, out: e.format, label: "corner rows times their weights"})
			if p == nil {
				continue
			}
			for _, wide := range []bool{false, true} {
				f := e.format
				if wide {
					f = precision.F32
				}
				var sum *val
				for c := range 4 {
					part := s.reshape(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: c, End: c + 1}, args: []*val{p}, out: p.format}), []int{n, d})
					if part != nil && wide {
						part = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{part}, out: precision.F32})
					}
					if sum == nil {
						sum = part
					} else if part != nil {
						sum = s.derive(&expr{op: program.OpAdd, args: []*val{sum, part}, out: f, label: "corners summed"})
					}
				}
				if sum != nil && wide && t.format != precision.F32 {
					sum = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{sum}, out: t.format})
				}
				if sum == nil {
					continue
				}
				label := "bilinearly resampled positions"
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{sum}, out: t.format, label: label})
				for _, x := range vals {
					if x != e && !x.opaque && slices.Equal(x.shape, t.shape) && !x.integral() {
						cands = append(cands, &expr{op: program.OpAdd, args: []*val{x, sum}, out: t.format, label: label + " added to a value"})
					}
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// gatheredAt reports whether e was made by gathering rows at ids
// (through moves and casts).
func gatheredAt(e, ids *val) bool {
	for v, hops := e, 0; v != nil && v.from != nil && hops < 6; hops++ {
		if v.from.op == program.OpGather {
			return len(v.from.args) > 1 && v.from.args[1] == ids
		}
		if len(v.from.args) == 0 {
			return false
		}
		v = v.from.args[0]
	}
	return false
}
