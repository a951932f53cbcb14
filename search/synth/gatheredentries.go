package synth

import (
	"fmt"
	"math"
	"slices"

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
	if w := s.fitGatheredTableRows(table, t); w != nil {
		return w
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

// fitGatheredTableRows is fitGatheredEntries by whole rows of the table
// [R, H]: t with an axis of H entries (the heads) holds, at each place of
// its other axes, one row of the table along that axis (table[index]
// permuted so the heads lead). A row names its entry where a single
// entry would not: a narrow format's table repeats values.
func (s *synth) fitGatheredTableRows(table, t *val) *val {
	if len(table.shape) != 2 || len(t.shape) < 2 || len(t.shape) > 5 {
		return nil
	}
	h := table.shape[1]
	for ax := range t.shape {
		if t.shape[ax] != h || h < 2 {
			continue
		}
		perm := make([]int, 0, len(t.shape))
		for a := range t.shape {
			if a != ax {
				perm = append(perm, a)
			}
		}
		perm = append(perm, ax)
		moved := &val{shape: make([]int, len(perm)), data: permuteData(t, perm), format: t.format}
		for i, a := range perm {
			moved.shape[i] = t.shape[a]
		}
		rows := moved.numel() / h
		at := map[string]int{}
		for r := range table.shape[0] {
			k := rowKey(t.format, table.data[r*h:(r+1)*h])
			if _, dup := at[k]; dup {
				return nil // two rows alike: the pattern is not read off them
			}
			at[k] = r
		}
		ids := &val{shape: []int{rows}, data: make([]float32, rows), format: precision.F32, origin: t.origin + "/indices", intType: true}
		ok := true
		for r := range rows {
			j, found := at[rowKey(t.format, moved.data[r*h:(r+1)*h])]
			if !found {
				ok = false
				break
			}
			ids.data[r] = float32(j)
		}
		if !ok {
			continue
		}
		g := s.derive(&expr{op: program.OpGather, args: []*val{table, ids}, out: table.format, label: fmt.Sprintf("table rows at %d fixed indices", rows)})
		back := make([]int, len(perm)) // the inverse of perm
		for i, a := range perm {
			back[a] = i
		}
		w := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: back}, args: []*val{s.reshape(g, moved.shape)}, out: table.format, label: "rows laid out"})
		if w == nil || !slices.Equal(w.shape, t.shape) || relRMS(t.format, w.data, t.data) != 0 {
			continue
		}
		s.em.constant(ids, "row indices read off the values: each place of the result holds one row of the table (a fixed pattern the model makes from its grid's shape, a buffer never captured)")
		return w
	}
	return nil
}

// rowKey is a row's entries, rounded to f, as a map key.
func rowKey(f precision.Format, row []float32) string {
	b := make([]byte, 0, 4*len(row))
	for _, x := range row {
		u := math.Float32bits(f.Round(x))
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return string(b)
}

// gatheredEntries explains t as entries, or rows, of a value the scope
// computed, gathered by a fixed pattern (fitGatheredEntries over the
// value laid out [rows, last axis]): a relative position bias made by an
// MLP over a window's coordinates, then read at the relative position
// index, a buffer never captured.
func (s *synth) gatheredEntries(t *val, vals []*val) *val {
	if t.integral() || t.numel() < 4 {
		return nil
	}
	for _, v := range vals {
		if v.opaque || v.param || v.integral() || len(v.shape) < 2 || v.numel() < 2 || v.numel() >= t.numel() {
			continue
		}
		last := v.shape[len(v.shape)-1]
		table := s.reshape(v, []int{v.numel() / last, last})
		if table == nil {
			continue // the run failed (the budget spent)
		}
		if w := s.fitGatheredEntries(table, t); w != nil {
			return w
		}
	}
	return nil
}
