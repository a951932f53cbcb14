package exec

import "fmt"

// SinkhornParams configure a Sinkhorn normalisation: Steps alternating
// divisions of a matrix by its column or row sums plus Eps, the first by
// the column sums (each column over the rows, torch's sum(dim=−2)) unless
// RowsFirst.
type SinkhornParams struct {
	Steps     int
	Eps       float32
	RowsFirst bool
}

// CheckSinkhorn validates a Sinkhorn normalisation's operand [.., n, m]
// and its parameters.
func CheckSinkhorn(x []int, p SinkhornParams) error {
	if len(x) < 2 || x[len(x)-1] < 1 || x[len(x)-2] < 1 {
		return fmt.Errorf("exec: sinkhorn: x %v is not a stack of matrices", x)
	}
	if p.Steps < 1 || p.Steps > 1<<12 {
		return fmt.Errorf("exec: sinkhorn: %d steps (want 1…4096)", p.Steps)
	}
	return nil
}

// CheckMatMul validates a batched product's operands a [.., M, K] and
// b [.., K, N] (the leading axes equal) and returns the result's shape.
func CheckMatMul(a, b []int) ([]int, error) {
	r := len(a)
	if r < 2 || len(b) != r {
		return nil, fmt.Errorf("exec: matmul: a %v and b %v are not stacks of matrices of one rank", a, b)
	}
	for i := range r - 2 {
		if a[i] != b[i] {
			return nil, fmt.Errorf("exec: matmul: a %v and b %v differ on batch axis %d", a, b, i)
		}
	}
	if a[r-1] != b[r-2] || a[r-2] < 1 || b[r-1] < 1 || a[r-1] < 1 {
		return nil, fmt.Errorf("exec: matmul: a %v times b %v: inner widths differ or an axis is empty", a, b)
	}
	out := append([]int(nil), a[:r-1]...)
	return append(out, b[r-1]), nil
}
