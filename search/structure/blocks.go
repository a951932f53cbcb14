package structure

import (
	"fmt"
	"slices"
	"strings"
)

// attnGroups groups the linears of the model by their argument's bytes:
// three or more projections of the same rows are an attention's q, k and
// v (plus, in a parallel block, the MLP's input projections).
func (d *discoverer) attnGroups(within *node) [][]linearInfo {
	byHash := map[uint64][]linearInfo{}
	var order []uint64
	for _, n := range d.g.nodes {
		li, ok := d.linears[n]
		if !ok || (within != nil && !n.within(within)) || tokensOf(li.in) < 2 {
			continue
		}
		h := d.v.bytesHash(li.in.key)
		if _, seen := byHash[h]; !seen {
			order = append(order, h)
		}
		byHash[h] = append(byHash[h], li)
	}
	var out [][]linearInfo
	for _, h := range order {
		if len(byHash[h]) >= 3 {
			out = append(out, byHash[h])
		}
	}
	return out
}

// findBlocks: the children of one call (the model's, or a descendant's)
// that each hold an attention, in execution order; the call chosen is the
// one with the most such children.
func (d *discoverer) findBlocks() error {
	groups := d.attnGroups(nil)
	holds := func(n *node) bool {
		for _, g := range groups {
			if g[0].n.within(n) && g[len(g)-1].n.within(n) {
				return true
			}
		}
		return false
	}
	var best []*node
	for _, n := range d.g.nodes {
		var bs []*node
		for _, c := range n.children {
			if holds(c) {
				bs = append(bs, c)
			}
		}
		if len(bs) > len(best) {
			best = bs
		}
	}
	if len(best) == 0 {
		return fmt.Errorf("%w: no call under the model call %s holds an attention (three projections of the same rows)", errNoBlocks, d.g.root.c.Module)
	}
	d.blocks = best
	d.sigs = make([]string, len(best))
	for i, b := range best {
		d.sigs[i] = signature(b)
	}
	return nil
}

// signature is a block's parameter-shape signature: for each call of its
// sub-tree in entry order, the depth below the block and its parameter
// shapes. Names do not enter it.
func signature(b *node) string {
	var sb strings.Builder
	base := depth(b)
	for _, n := range b.subtree() {
		fmt.Fprintf(&sb, "%d:", depth(n)-base)
		for _, p := range n.params {
			fmt.Fprintf(&sb, "%v", p.shape)
		}
		sb.WriteByte(';')
	}
	return sb.String()
}

func depth(n *node) int {
	k := 0
	for m := n.parent; m != nil; m = m.parent {
		k++
	}
	return k
}

// lca is the lowest common ancestor of the nodes.
func lca(ns ...*node) *node {
	if len(ns) == 0 {
		return nil
	}
	var chain []*node
	for m := ns[0]; m != nil; m = m.parent {
		chain = append(chain, m)
	}
	slices.Reverse(chain)
	best := 0
	for i, c := range chain {
		ok := true
		for _, n := range ns[1:] {
			if !n.within(c) {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		best = i
	}
	return chain[best]
}
