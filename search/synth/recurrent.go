package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// rnnGroup is one direction of one layer of a recurrent call, read from its
// parameters' shapes: the input's weight [G·H, I], the state's [G·H, H],
// and the two biases [G·H] where the layer has them.
type rnnGroup struct {
	wih, whh, bih, bhh *val
}

// rnnGroups splits a recurrent call's parameters, in their order, into
// groups of two matrices with G·H rows sharing the row count, the second
// [G·H, H] (G ∈ {1, 3, 4}), each followed by two vectors of G·H or by
// none; nil, 0, 0 where the parameters are not so (a projection's weight,
// say).
func rnnGroups(params []*val) ([]rnnGroup, int, int) {
	var gs []rnnGroup
	h, g := 0, 0
	for i := 0; i < len(params); {
		if i+1 >= len(params) || !isMatrix(params[i]) || !isMatrix(params[i+1]) {
			return nil, 0, 0
		}
		wih, whh := params[i], params[i+1]
		rows, width := whh.shape[0], whh.shape[1]
		if wih.shape[0] != rows || width < 1 || rows%width != 0 || (h != 0 && width != h) {
			return nil, 0, 0
		}
		gates := rows / width
		if (gates != 1 && gates != 3 && gates != 4) || (g != 0 && gates != g) {
			return nil, 0, 0
		}
		h, g = width, gates
		grp := rnnGroup{wih: wih, whh: whh}
		i += 2
		if i+1 < len(params) && len(params[i].shape) == 1 && params[i].shape[0] == rows && len(params[i+1].shape) == 1 && params[i+1].shape[0] == rows {
			grp.bih, grp.bhh = params[i], params[i+1]
			i += 2
		}
		gs = append(gs, grp)
	}
	return gs, h, g
}

// fitRecurrent explains a recurrent layer (torch's LSTM, GRU or RNN, of
// any depth, one or two directions, batch first or not, with or without
// biases): its parameters in groups (rnnGroups), the cell read off their
// row count (4·H an LSTM, 3·H a GRU, H an RNN of tanh or of relu: both
// scored), the directions off the output's width. Each layer: the input
// projected for every position at once (a linear), the scan of each
// direction (recurrence), the directions joined. Every reading (cell,
// axis order) is scored against the output; the best stands if within
// tolerance. Its second result is the winner's reading: each layer and
// direction's output [B, L, H] (batch first), from which the final states
// h_n are read (finalStates; LSTM's c_n is not made), and every reading's
// score for the factors.
func (s *synth) fitRecurrent(x *val, params []*val, t *val) (*val, *recurrentRecord) {
	groups, h, g := rnnGroups(params)
	if groups == nil || len(t.shape) != len(x.shape) || len(t.shape) < 2 || len(t.shape) > 3 || x.integral() {
		return nil, nil
	}
	dirs := t.shape[len(t.shape)-1] / h
	if t.shape[len(t.shape)-1] != dirs*h || (dirs != 1 && dirs != 2) || len(groups)%dirs != 0 {
		return nil, nil
	}
	if groups[0].wih.shape[1] != x.shape[len(x.shape)-1] {
		return nil, nil
	}
	for _, grp := range groups[dirs:] {
		if grp.wih.shape[1] != dirs*h {
			return nil, nil // a deeper layer reads the one before: D·H wide
		}
	}
	cells := map[int][]exec.Cell{4: {exec.CellLSTM}, 3: {exec.CellGRU}, 1: {exec.CellTanh, exec.CellReLU}}[g]
	// axis orders: [B, L, I] (batch first), [L, B, I], an unbatched [L, I]
	type order struct {
		label string
		first bool
	}
	var orders []order
	if len(x.shape) == 3 {
		orders = []order{{"batch first", true}, {"sequence first", false}}
	} else {
		orders = []order{{"unbatched", true}}
	}
	var cands []*expr
	var outs [][]*val // per candidate, each layer and direction's output
	var readings []recurrentReading
	for _, o := range orders {
		in := x
		if len(x.shape) == 2 {
			in = s.reshape(x, []int{1, x.shape[0], x.shape[1]})
		} else if !o.first {
			in = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{x}, out: x.format, label: "sequence first to batch first"})
		}
		if in == nil {
			continue
		}
		for _, cell := range cells {
			y, each := s.recurrentLayers(in, groups, dirs, cell, t)
			if y == nil {
				continue
			}
			outs = append(outs, each)
			readings = append(readings, recurrentReading{cell: cell, batchFirst: o.first})
			label := fmt.Sprintf("%s, %d layers, %d directions, %s", cell, len(groups)/dirs, dirs, o.label)
			if o.first {
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: label})
			} else {
				cands = append(cands, &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{y}, out: t.format, label: label})
			}
		}
	}
	v := s.bestFit(t, cands, "recurrent")
	if v == nil {
		return nil, nil
	}
	win := slices.Index(cands, v.from)
	r := &recurrentRecord{boundary: t.origin, each: outs[win], dirs: dirs, win: readings[win], ordered: len(x.shape) == 3}
	for i, c := range v.fit.candidates {
		r.scored = append(r.scored, scoredReading{readings[i], c.Score})
	}
	return v, r
}

// recurrentReading is one reading of a recurrent call: the cell and the
// axis order of its input.
type recurrentReading struct {
	cell       exec.Cell
	batchFirst bool
}

type scoredReading struct {
	recurrentReading
	score float64
}

// recurrentRecord is what fitRecurrent found at one call, for the factors
// recurrent_cell and recurrent_batch_first.
type recurrentRecord struct {
	scope, boundary string
	each            []*val // each layer and direction's output, [B, L, H]
	dirs            int
	win             recurrentReading
	ordered         bool // the input has a batch axis: the order was scored
	scored          []scoredReading
}

// factors are the record's factors: the cell, and (batched input) the
// axis order, each scored on every reading.
func (r *recurrentRecord) factors() []semantics.Factor {
	var cells, orders []semantics.Candidate
	for _, c := range r.scored {
		cells = append(cells, semantics.Candidate{Value: c.cell.String(), Score: c.score})
		orders = append(orders, semantics.Candidate{Value: c.batchFirst, Score: c.score})
	}
	out := []semantics.Factor{factor("recurrent_cell", r.scope, r.win.cell.String(), cells, r.boundary)}
	if r.ordered {
		out = append(out, factor("recurrent_batch_first", r.scope, r.win.batchFirst, orders, r.boundary))
	}
	return out
}

// finalStates explains t as the final states h_n [layers·D, B, H] (or
// [layers·D, H] unbatched) of a recurrent layer whose outputs per layer
// and direction are each [B, L, H]: a forward direction's last position,
// a reverse one's first, stacked in order; nil where t is not so.
func (s *synth) finalStates(each []*val, dirs int, t *val) *val {
	if len(each) == 0 || t.numel() != len(each)*each[0].shape[0]*each[0].shape[2] {
		return nil
	}
	var rows []*val
	for i, y := range each {
		at := y.shape[1] - 1
		if dirs == 2 && i%2 == 1 {
			at = 0
		}
		r := s.reshape(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: at, End: at + 1}, args: []*val{y}, out: y.format}), []int{1, y.shape[0], y.shape[2]})
		if r == nil {
			return nil
		}
		rows = append(rows, r)
	}
	st := rows[0]
	if len(rows) > 1 {
		st = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: rows, out: t.format, label: "final states stacked"})
	}
	if st == nil {
		return nil
	}
	return s.bestFit(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{st}, out: t.format, label: "each direction's last state"}}, "recurrent")
}

// recurrentLayers runs the layers on in [B, L, I]: per layer, each
// direction's input projection and scan, the directions joined on the
// last axis; nil where an op refuses. The second result is every layer and
// direction's own output.
func (s *synth) recurrentLayers(in *val, groups []rnnGroup, dirs int, cell exec.Cell, t *val) (*val, []*val) {
	x := in
	var each []*val
	for l := 0; l < len(groups); l += dirs {
		var ys []*val
		for d := range dirs {
			grp := groups[l+d]
			xg := s.derive(&expr{op: program.OpLinear, args: []*val{x, grp.wih, grp.bih}, out: t.format, label: "the input projected"})
			if xg == nil {
				return nil, nil
			}
			p := exec.RecurrenceParams{Cell: cell, Reverse: d == 1}
			y := s.derive(&expr{op: program.OpRecurrence, attrs: program.Attrs{Recurrence: p}, args: []*val{xg, grp.whh, grp.bhh}, out: t.format, label: cell.String()})
			if y == nil {
				return nil, nil
			}
			ys = append(ys, y)
			each = append(each, y)
		}
		x = ys[0]
		if dirs == 2 {
			x = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: ys, out: t.format, label: "both directions joined"})
			if x == nil {
				return nil, nil
			}
		}
	}
	return x, each
}
