package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// inlineGridRope tries RoPE whose positions the attention makes itself
// from the sequence's length, where the scope holds neither tables nor
// ids: the rows read as a row-major grid of one to three axes, each axis's
// integer positions turning a slice of each head of its own, 2·⌊d/2k⌋
// wide for k axes and heads of d (the rest of the head passes
// unrotated). The tables are laid out half or interleaved per axis and
// applied to pairs of either layout: a table laid out half turning
// interleaved pairs turns each element by its own frequency, which is
// what code that builds [f f] tables and rotates (x₂ᵢ, x₂ᵢ₊₁) pairs
// computes. For the three best choices without RoPE; try scores and
// collects each.
func (s *synth) inlineGridRope(t *val, all []attnChoice, try func(attnChoice)) {
	rows := t.shape[1]
	if rows < 2 || len(all) == 0 {
		return
	}
	base := slices.Clone(all)
	sortByScore(base)
	if len(base) > 3 {
		base = base[:3]
	}
	for _, grid := range factorizations(rows, 3) {
		ids := s.gridIDs(grid)
		for _, ch := range base {
			if ch.rope != 0 {
				continue
			}
			d := ch.headDim
			r := 2 * (d / len(grid) / 2)
			if r < 2 {
				continue
			}
			for _, tableLayout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
				p := exec.RopeTableParams{Theta: 10000, AxesDims: slices.Repeat([]int{r}, len(grid)), Layout: tableLayout, FreqFormat: precision.F32, AngleFormat: precision.F32}
				e := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{ids}, out: ch.q.format, label: "grid rope"}
				cosT, err1 := s.ev.run(e)
				sinT, err2 := s.ev.run(pickOf(e, 1))
				if err1 != nil || err2 != nil {
					continue
				}
				for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
					desc := fmt.Sprintf("%s pairs, %v grid, tables %s per axis, %d of %d rotated, theta=1e4", layout, grid, tableLayout, r*len(grid), d)
					if c, ok := s.roped(ch, [2]*val{cosT, sinT}, p, layout, desc, " ("+desc+")"); ok {
						try(c)
					}
				}
			}
		}
	}
}

// gridIDs are the integer positions of a row-major grid [rows, k], a
// constant of the request's shape declared only where a program reads it.
func (s *synth) gridIDs(grid []int) *val {
	pv := gridCoords(grid, integerCoords)
	rows := prod(grid)
	return s.relConst(fmt.Sprintf("grid%v positions", grid), []int{rows, len(grid)}, pv.data,
		fmt.Sprintf("integer positions on the %v grid of the rows, row-major (a constant of the request's shape)", grid))
}
