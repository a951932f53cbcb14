//go:build linux

package cuda

// RowIndependent: both attention kernels compute each query row on its own
// (the flash kernel's tiles of 16 rows per warp run the same mma sequence
// over the keys whatever the other rows; the exact kernel is a thread per
// row), so a query row's bits do not depend on the number of rows. A
// linear is not: cuBLASLt's heuristic picks the algorithm, split-K
// included, by the shape, so fewer rows may sum in another order.
func (b *Backend) RowIndependent(op string) bool { return op == "attention" }
