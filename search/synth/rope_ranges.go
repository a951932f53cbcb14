package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitRopeOnRanges explains cos and sin tables over a grid of positions
// one axis of which is an integer argument (explicit frame indices, which
// need not run consecutively) and the others 0, 1, … of sizes the request's
// shape sets (the rows of a latent frame): for each place of the argument's
// axis among two or three and each way of writing the remaining rows as
// the other axes' sizes, the grid row-major is built and rope_table fitted
// on it as on given ids. Tried where the ids are neither an argument nor a
// grid of arguments.
func (s *synth) fitRopeOnRanges(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	var x *val
	for _, v := range xs {
		if v.integral() && len(v.shape) == 1 && v.numel() > 1 && rows%v.numel() == 0 && v.numel() < rows {
			if x != nil {
				return nil, nil // several: gridOfAxes's case
			}
			x = v
		}
	}
	if x == nil {
		return nil, nil
	}
	n := x.numel()
	for _, rest := range factorizations(rows/n, 2) {
		k := len(rest) + 1
		for at := range k {
			grid := make([]int, 0, k)
			grid = append(grid, rest[:min(at, len(rest))]...)
			grid = append(grid, n)
			grid = append(grid, rest[min(at, len(rest)):]...)
			var ranges []*val
			var cols []*val
			for a := range k {
				shape := make([]int, k+1)
				for i := range shape {
					shape[i] = 1
				}
				shape[a] = grid[a]
				var v *val
				if a == at {
					v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{s.reshape(x, shape)}, out: precision.F32})
				} else {
					r := &val{shape: shape, data: make([]float32, grid[a]), format: precision.F32, origin: cosT.origin + fmt.Sprintf("/range%d", a)}
					for i := range r.data {
						r.data[i] = float32(i)
					}
					ranges = append(ranges, r)
					v = r
				}
				for b := range k {
					if b != a && v != nil {
						v = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: grid[b], Axis: b}, args: []*val{v}, out: precision.F32, label: "grid"})
					}
				}
				if v == nil {
					break
				}
				cols = append(cols, v)
			}
			if len(cols) != k {
				continue
			}
			g := s.reshape(s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: k}, args: cols, out: precision.F32, label: "position grid"}), []int{rows, k})
			if g == nil {
				continue
			}
			c, sn := s.fitRopeTableAxes([]*val{g}, cosT, sinT, 3, false, 0)
			if c == nil {
				c, sn = s.fitRopeTableAxes([]*val{g}, cosT, sinT, k, true, 0)
			}
			if c != nil {
				for _, r := range ranges {
					s.em.constant(r, "0, 1, … along a grid axis beside the positions given as an argument (its size from the request's shape)")
				}
				return c, sn
			}
		}
	}
	return nil, nil
}
