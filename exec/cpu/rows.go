package cpu

// RowIndependent: a linear's rows are sequential f32 sums over k whatever
// the blocking (gemm.go), and attention computes each query row (and
// head) on its own, so a row's bits do not depend on how many rows came
// with it.
func (b *Backend) RowIndependent(op string) bool {
	return op == "linear" || op == "attention"
}
