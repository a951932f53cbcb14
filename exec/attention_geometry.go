package exec

import "fmt"

// AttentionDims is the geometry of an attention call: batch, query and key
// rows, query heads, kv heads and head width.
type AttentionDims struct{ B, Sq, Sk, H, KV, D int }

// AttentionGeometry checks q [B, Sq, H·D], k and v [B, Sk, KV·D] against
// p's heads (KVHeads 0 means H) and returns the geometry; every backend
// validates attention with it.
func AttentionGeometry(q, k, v []int, p AttentionParams) (AttentionDims, error) {
	var g AttentionDims
	if len(q) != 3 || len(k) != 3 || len(v) != 3 {
		return g, fmt.Errorf("exec: attention: q %v, k %v, v %v are not [B, S, heads·D]", q, k, v)
	}
	g.H, g.KV = p.Heads, p.KVHeads
	if g.KV == 0 {
		g.KV = g.H
	}
	if g.H <= 0 || g.KV <= 0 || g.H%g.KV != 0 || q[2]%g.H != 0 {
		return g, fmt.Errorf("exec: attention: %d heads over %d kv heads for q %v", p.Heads, p.KVHeads, q)
	}
	g.B, g.Sq, g.Sk, g.D = q[0], q[1], k[1], q[2]/g.H
	for _, t := range [][]int{k, v} {
		if t[0] != g.B || t[1] != g.Sk || t[2] != g.KV*g.D {
			return g, fmt.Errorf("exec: attention: q %v, k %v, v %v do not agree for %d heads of %d over %d kv heads", q, k, v, g.H, g.D, g.KV)
		}
	}
	return g, nil
}

// MaskStrides returns the strides over (b, i, j) of a mask that broadcasts
// to [B, Sq, Sk].
func MaskStrides(m []int, b, sq, sk int) ([]int, error) {
	target := []int{b, sq, sk}
	if len(m) > 3 {
		// Leading 1s (e.g. [B, 1, Sq, Sk] with one head axis) are dropped.
		for len(m) > 3 && (m[0] == 1 || len(m) == 4 && m[1] == 1) {
			if m[0] == 1 {
				m = m[1:]
			} else {
				m = append([]int{m[0]}, m[2:]...)
			}
		}
		if len(m) > 3 {
			return nil, fmt.Errorf("exec: attention: mask %v does not broadcast to %v", m, target)
		}
	}
	full := Strides(m)
	st := make([]int, 3)
	for i := range 3 {
		j := len(m) - 3 + i
		switch {
		case j < 0 || m[j] == 1:
			st[i] = 0
		case m[j] == target[i]:
			st[i] = full[j]
		default:
			return nil, fmt.Errorf("exec: attention: mask %v does not broadcast to %v", m, target)
		}
	}
	return st, nil
}
