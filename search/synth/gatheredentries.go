package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitGatheredEntries explains the result t of a call given only a table
// (no tensor argument) as entries of the table gathered by a fixed
// pattern of indices, each entry of t one entry of the table: a relative
// position bias, table[relative_position_index] with the index a buffer
// the model made from its grid at init (never passed, so never
// captured). The pattern is read off the values, which must name one
// table entry each (the table's entries distinct), and is kept as a
// constant of the model beside the table, gathered as rows of width one
// and reshaped to t. nil where some entry of t is no entry of the table,
// or every entry is the same one.
func (s *synth) fitGatheredEntries(table, t *val) *val {
	if t.integral() || table.numel() < 2 || t.numel() <= table.numel() || t.numel() > 1<<20 {
		return nil
	}
	at := make(map[float32]int, table.numel())
	for i, x := range table.data {
		x = t.format.Round(x)
		if _, dup := at[x]; dup {
			return nil // an entry of t would name two
		}
		at[x] = i
	}
	ids := &val{shape: []int{t.numel()}, data: make([]float32, t.numel()), format: precision.F32, origin: t.origin + "/indices", intType: true}
	distinct := map[int]bool{}
	for i, x := range t.data {
		j, ok := at[x]
		if !ok {
			return nil
		}
		ids.data[i] = float32(j)
		distinct[j] = true
	}
	if len(distinct) < 2 {
		return nil
	}
	col := s.reshape(table, []int{table.numel(), 1})
	g := s.derive(&expr{op: program.OpGather, args: []*val{col, ids}, out: table.format, label: fmt.Sprintf("table entries at %d fixed indices", t.numel())})
	w := s.reshape(g, t.shape)
	if w == nil || relRMS(t.format, w.data, t.data) != 0 {
		return nil
	}
	s.em.constant(ids, "indices read off the values: each entry of the result is one entry of the table (a fixed pattern the model makes from its grid's shape, a buffer never captured)")
	return w
}
