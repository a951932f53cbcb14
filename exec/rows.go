package exec

// RowIndependent is implemented by a backend whose result of an op, row by
// row, does not depend on how many rows the op is given: the same row of
// the same inputs gives the same bits in a call on every row and in a call
// on a few (no kernel or reduction order chosen by the row count). op is
// the program op's name ("linear", "attention"). The precision search
// (search/plan) scores such an op's candidates on sampled rows; an op of a
// backend that does not say so is scored on whole tensors.
type RowIndependent interface {
	RowIndependent(op string) bool
}

// RowsIndependent reports whether b says that op's rows are independent
// (RowIndependent); false for a backend that says nothing.
func RowsIndependent(b Basic, op string) bool {
	r, ok := b.(RowIndependent)
	return ok && r.RowIndependent(op)
}
