package exec

import "fmt"

// MemoryDims are the sizes of a gated matrix-memory scan: batch B, length
// L, heads H, key width K, value width V.
type MemoryDims struct {
	B, L, H, K, V int
}

// CheckMemoryScan validates the shapes of a gated matrix-memory scan's
// operands: q and k [B, L, H, K], v [B, L, H, V], the log gates i and f
// [B, L, H].
func CheckMemoryScan(q, k, v, i, f []int) (MemoryDims, error) {
	bad := func(what string) (MemoryDims, error) {
		return MemoryDims{}, fmt.Errorf("exec: memory_scan: %s (q %v, k %v, v %v, i %v, f %v)", what, q, k, v, i, f)
	}
	if len(q) != 4 {
		return bad("q is not [B, L, H, K]")
	}
	n := MemoryDims{B: q[0], L: q[1], H: q[2], K: q[3]}
	if n.B < 1 || n.L < 1 || n.H < 1 || n.K < 1 {
		return bad("an empty axis")
	}
	if len(k) != 4 || k[0] != n.B || k[1] != n.L || k[2] != n.H || k[3] != n.K {
		return bad("k is not q's shape")
	}
	if len(v) != 4 || v[0] != n.B || v[1] != n.L || v[2] != n.H || v[3] < 1 {
		return bad("v is not [B, L, H, V]")
	}
	n.V = v[3]
	for _, s := range [][]int{i, f} {
		if len(s) != 3 || s[0] != n.B || s[1] != n.L || s[2] != n.H {
			return bad("i or f is not [B, L, H]")
		}
	}
	return n, nil
}

// CheckFFT2Real validates the shape of a 2-D Fourier transform's operand:
// rank 2 or more, the last two axes not empty.
func CheckFFT2Real(x []int) error {
	if len(x) < 2 || x[len(x)-1] < 1 || x[len(x)-2] < 1 {
		return fmt.Errorf("exec: fft2_real: x %v has no two last axes to transform", x)
	}
	return nil
}
