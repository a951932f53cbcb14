package exec

import "fmt"

// Cell is a recurrent cell's update: how a step's gates, read from the
// input's projection and the state's, make the next state.
type Cell uint8

const (
	CellLSTM Cell = iota + 1 // gates i, f, g, o: c ← σ(f)·c + σ(i)·tanh(g), h ← σ(o)·tanh(c)
	CellGRU                  // gates r, z, n: n = tanh(x_n + σ(r)·h_n), h ← (h − n)·σ(z) + n
	CellTanh                 // one gate: h ← tanh(x + h_x) (torch's RNN)
	CellReLU                 // one gate: h ← relu(x + h_x) (torch's RNN, nonlinearity relu)
	cellEnd
)

var cellNames = [...]string{"", "lstm", "gru", "tanh", "relu"}

// String is the cell's name in documents.
func (c Cell) String() string {
	if c > 0 && c < cellEnd {
		return cellNames[c]
	}
	return fmt.Sprintf("Cell(%d)", uint8(c))
}

// Gates is how many blocks of H the cell's projections hold.
func (c Cell) Gates() int {
	switch c {
	case CellLSTM:
		return 4
	case CellGRU:
		return 3
	case CellTanh, CellReLU:
		return 1
	}
	return 0
}

// ParseCell reads a cell's name.
func ParseCell(s string) (Cell, error) {
	for c := CellLSTM; c < cellEnd; c++ {
		if cellNames[c] == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("exec: unknown recurrent cell %q (want lstm, gru, tanh or relu)", s)
}

// RecurrenceParams configure a recurrent scan: the cell, and Reverse to
// run from the last position to the first (a bidirectional layer's
// second direction).
type RecurrenceParams struct {
	Cell    Cell
	Reverse bool
}

// RecurrenceDims are a recurrent scan's sizes: batch B, length L, state
// width H, gates G.
type RecurrenceDims struct {
	B, L, H, G int
}

// CheckRecurrence validates a recurrent scan's operands: the input's
// projection xg [B, L, G·H], the state's weight whh [G·H, H] and its bias
// bh [G·H] (nil: none), G the cell's gate count.
func CheckRecurrence(xg, whh, bh []int, p RecurrenceParams) (RecurrenceDims, error) {
	bad := func(what string) (RecurrenceDims, error) {
		return RecurrenceDims{}, fmt.Errorf("exec: recurrence: %s (xg %v, whh %v, bias %v)", what, xg, whh, bh)
	}
	g := p.Cell.Gates()
	if g == 0 {
		return bad(fmt.Sprintf("cell %v is none of lstm, gru, tanh and relu", p.Cell))
	}
	if len(whh) != 2 || whh[1] < 1 || whh[0] != g*whh[1] {
		return bad(fmt.Sprintf("whh is not [%d·H, H]", g))
	}
	n := RecurrenceDims{H: whh[1], G: g}
	if len(xg) != 3 || xg[0] < 1 || xg[1] < 1 || xg[2] != g*n.H {
		return bad("xg is not [B, L, G·H]")
	}
	n.B, n.L = xg[0], xg[1]
	if bh != nil && (len(bh) != 1 || bh[0] != g*n.H) {
		return bad("the bias is not [G·H]")
	}
	return n, nil
}
