package exec

import "fmt"

// DeltaDims are the sizes of a gated delta-rule scan: batch B, length L,
// heads H of value width V, key groups G of key width K (head h reads
// group h/(H/G)).
type DeltaDims struct {
	B, L, H, V, G, K int
}

// CheckDeltaScan validates the shapes of a gated delta-rule scan's
// operands: q and k [B, L, G, K] with G dividing H, v [B, L, H, V], g and
// beta [B, L, H].
func CheckDeltaScan(q, k, v, g, beta []int) (DeltaDims, error) {
	bad := func(what string) (DeltaDims, error) {
		return DeltaDims{}, fmt.Errorf("exec: delta_scan: %s (q %v, k %v, v %v, g %v, beta %v)", what, q, k, v, g, beta)
	}
	if len(v) != 4 {
		return bad("v is not [B, L, H, V]")
	}
	n := DeltaDims{B: v[0], L: v[1], H: v[2], V: v[3]}
	if n.B < 1 || n.L < 1 || n.H < 1 || n.V < 1 {
		return bad("an empty axis")
	}
	if len(q) != 4 || q[0] != n.B || q[1] != n.L || q[2] < 1 || q[3] < 1 {
		return bad("q is not [B, L, G, K]")
	}
	n.G, n.K = q[2], q[3]
	if n.H%n.G != 0 {
		return bad("the groups do not divide the heads")
	}
	if len(k) != 4 || k[0] != n.B || k[1] != n.L || k[2] != n.G || k[3] != n.K {
		return bad("k is not q's shape")
	}
	for _, s := range [][]int{g, beta} {
		if len(s) != 3 || s[0] != n.B || s[1] != n.L || s[2] != n.H {
			return bad("g or beta is not [B, L, H]")
		}
	}
	return n, nil
}
