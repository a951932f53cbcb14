package exec

import "fmt"

// SSMDims are the sizes of a selective scan: batch B, length L, heads H of
// width P, groups G of state width N (head h reads group h/(H/G)); PerState
// where A is [H, N] (one decay rate per head and state, Mamba-1's) rather
// than [H] (one per head, Mamba-2's).
type SSMDims struct {
	B, L, H, P, G, N int
	PerState         bool
}

// CheckSSMScan validates the shapes of a selective scan's operands: x
// [B, L, H, P], dt [B, L, H], a [H] or [H, N], bm and cm [B, L, G, N] with
// G dividing H, d [H] or nil (absent).
func CheckSSMScan(x, dt, a, bm, cm, d []int) (SSMDims, error) {
	bad := func(what string) (SSMDims, error) {
		return SSMDims{}, fmt.Errorf("exec: ssm_scan: %s (x %v, dt %v, A %v, B %v, C %v, D %v)", what, x, dt, a, bm, cm, d)
	}
	if len(x) != 4 {
		return bad("x is not [B, L, H, P]")
	}
	n := SSMDims{B: x[0], L: x[1], H: x[2], P: x[3]}
	if n.B < 1 || n.L < 1 || n.H < 1 || n.P < 1 {
		return bad("an empty axis")
	}
	if len(dt) != 3 || dt[0] != n.B || dt[1] != n.L || dt[2] != n.H {
		return bad("dt is not [B, L, H]")
	}
	if len(bm) != 4 || bm[0] != n.B || bm[1] != n.L || bm[2] < 1 || bm[3] < 1 {
		return bad("B is not [B, L, G, N]")
	}
	n.G, n.N = bm[2], bm[3]
	switch {
	case len(a) == 1 && a[0] == n.H:
	case len(a) == 2 && a[0] == n.H && a[1] == n.N:
		n.PerState = true
	default:
		return bad("A is not [H] or [H, N]")
	}
	if n.H%n.G != 0 {
		return bad("the groups do not divide the heads")
	}
	if len(cm) != 4 || cm[0] != n.B || cm[1] != n.L || cm[2] != n.G || cm[3] != n.N {
		return bad("C is not B's shape")
	}
	if d != nil && (len(d) != 1 || d[0] != n.H) {
		return bad("D is not [H]")
	}
	return n, nil
}
