package exec

import "github.com/zflow/zflow/precision"

// Borrower is implemented by a backend that can read host values where
// they lie (the CPU's): Borrow is Upload without the copy where data
// already holds values of f, the tensor then reading data itself, which
// the caller leaves unchanged while the tensor lives. A search that runs
// thousands of small ops on the same operands (search/synth's evaluator)
// spends much of its time copying them otherwise.
type Borrower interface {
	Borrow(data []float32, shape []int, f precision.Format) (Tensor, error)
}

// Borrow is b's Borrow where it has one, else its Upload (a copy).
func Borrow(b Basic, data []float32, shape []int, f precision.Format) (Tensor, error) {
	if br, ok := b.(Borrower); ok {
		return br.Borrow(data, shape, f)
	}
	return b.Upload(data, shape, f)
}
