package synth

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// minGatheredWidth is the narrowest row rowsGathered matches: rows of
// fewer entries may repeat by chance.
const minGatheredWidth = 8

// maxNearRows bounds the row pairs rowsGathered compares where rows
// match only to a rounding.
const maxNearRows = 1 << 16

// nearestRowOf is the row of d (rows of c) nearest row, where it is
// within tol of it (rel-RMS) and every other row is four times farther.
func nearestRowOf(d []float32, c int, row []float32, tol float64) (int, bool) {
	var norm float64
	for _, x := range row {
		norm += float64(x) * float64(x)
	}
	best, second, at := math.Inf(1), math.Inf(1), -1
	for j := 0; j+c <= len(d); j += c {
		var e float64
		for k, x := range row {
			diff := float64(d[j+k]) - float64(x)
			e += diff * diff
		}
		switch {
		case e < best:
			best, second, at = e, best, j/c
		case e < second:
			second = e
		}
	}
	return at, at >= 0 && best <= tol*tol*norm && second > 16*best
}

// rowsGathered explains t as the rows (along its last axis) of a value of
// the scope in another order, or some of them: windows cut out of an
// image's rows and back (x.view(B, H/w, w, W/w, w, C).permute(0, 1, 3, 2,
// 4, 5)), frames and patches exchanged, a class row dropped. The order is
// read off the values, each row of t one row of the value (the first of
// equal rows), and kept as a constant pattern of indices the model
// makes from the request's shape. Tried once every other form failed;
// nil where some row of t is no row of any value, or the rows are the
// value's own in order.
func (s *synth) rowsGathered(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.integral() {
		return nil
	}
	c := t.shape[len(t.shape)-1]
	if c < minGatheredWidth {
		return nil
	}
	seed := maphash.MakeSeed()
	key := func(row []float32) uint64 {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, x := range row {
			b := math.Float32bits(x)
			h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
		}
		return h.Sum64()
	}
	m := t.numel() / c
	for _, v := range vals {
		if v.opaque || v.integral() || v.format != t.format || len(v.shape) < 2 || v.shape[len(v.shape)-1] != c {
			continue
		}
		n := v.numel() / c
		at := make(map[uint64]int, n)
		for r := range n {
			k := key(v.data[r*c : (r+1)*c])
			if _, dup := at[k]; !dup {
				at[k] = r // equal rows (a class row per frame): the first serves
			}
		}
		ids := &val{shape: []int{m}, data: make([]float32, m), format: precision.F32, origin: t.origin + "/rows", intType: true}
		inOrder := m == n
		ok := true
		exact := true
		for r := range m {
			row := t.data[r*c : (r+1)*c]
			j, found := at[key(row)]
			if !found || !slices.Equal(v.data[j*c:(j+1)*c], row) {
				// t − b of a peel holds the rows to a rounding only:
				// the nearest row, where it is near and alone
				if j, found = nearestRowOf(v.data, c, row, tolerance(t.format)); !found || m*n > maxNearRows {
					ok = false
					break
				}
				exact = false
			}
			ids.data[r] = float32(j)
			inOrder = inOrder && j == r
		}
		if !ok || inOrder || !shapeMade(ids.data, n) {
			continue
		}
		g := s.derive(&expr{op: program.OpGather, args: []*val{s.reshape(v, []int{n, c}), ids}, out: v.format, label: fmt.Sprintf("rows of %s in a fixed order", v)})
		w := s.reshape(g, t.shape)
		if w == nil || exact && relRMS(t.format, w.data, t.data) != 0 || relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStepKnown(w, t) {
			continue
		}
		s.em.constant(ids, "row indices read off the values: each row of the result is one row of the value (an order the model makes from the request's shape: windows, frames, a class row dropped)")
		return w
	}
	return nil
}

// everyStepKnown is everyStep where every other step of t must be read
// and reproduced: a fixed pattern of rows is not taken where t's rows
// change in number between steps (tokens routed to an expert).
func (s *synth) everyStepKnown(w, t *val) bool {
	for _, st := range s.tr.Steps()[min(1, len(s.tr.Steps())):] {
		if d, ok := s.at(t, st); !ok || len(d) != t.numel() {
			if s.hasSteps(t) {
				return false
			}
		}
	}
	return s.everyStep(w, t, tolerance(t.format))
}

// maxShapeMadeRows bounds the rows shapeMade reads a pattern from.
const maxShapeMadeRows = 1 << 12

// shapeMade reports whether ids, rows of a value of n rows in t's order,
// are an order a model makes from its shapes alone: the value's rows, all
// of them or all but those at one stride (a class row per frame), with
// their positions' axes moved (a mixed-radix index whose digits are
// permuted: windows cut out of an image, frames and patches exchanged).
// Tokens routed to experts (rows chosen by their values) make no such
// pattern.
func shapeMade(ids []float32, n int) bool {
	m := len(ids)
	if m > maxShapeMadeRows {
		return false
	}
	used := make([]bool, n)
	for _, x := range ids {
		j := int(x)
		if used[j] {
			return false // a row twice: a repeat, not a reorder
		}
		used[j] = true
	}
	rank := make([]int, n)
	kept := 0
	for j, u := range used {
		if u {
			rank[j] = kept
			kept++
		}
	}
	if kept != n && !leftAtStride(used) {
		return false
	}
	r := make([]int, m)
	for i, x := range ids {
		r[i] = rank[int(x)]
	}
	if transposed(r) {
		return true
	}
	// the order undone (windows put back, then the grid rolled back):
	// its inverse is one
	inv := make([]int, m)
	for i, j := range r {
		inv[j] = i
	}
	return transposed(inv)
}

// leftAtStride reports whether the rows not used are those at one stride
// p (every j ≡ r mod p, r < p, p dividing the count).
func leftAtStride(used []bool) bool {
	n := len(used)
	first := slices.Index(used, false)
	if first < 0 {
		return true
	}
	p := n
	if next := slices.Index(used[first+1:], false); next >= 0 {
		p = next + 1
	}
	if n%p != 0 || first >= p {
		return false
	}
	for j, u := range used {
		if u == (j%p == first) {
			return false
		}
	}
	return true
}

// maxTransposeTries bounds the (shape, grouping, permutation) readings
// transposed tries.
const maxTransposeTries = 1 << 18

// transposed reports whether r, a permutation of 0…m−1, is a row-major
// iota over some shape of up to 6 axes, whose consecutive axes grouped
// are the value's own axes each rolled by a shift (torch.roll: a shifted
// window's grid), with the axes then permuted (windows cut out).
func transposed(r []int) bool {
	m := len(r)
	if m < 2 {
		return true
	}
	tries := 0
	for _, dims := range factorizations(m, 6) {
		k := len(dims)
		for groups := 0; groups < 1<<(k-1); groups++ {
			// bit a set: axis a+1 starts a new rolled axis
			for _, perm := range permutations(k) {
				if tries++; tries > maxTransposeTries {
					return false
				}
				if matchesPermutedIota(r, dims, perm, groups) {
					return true
				}
			}
		}
	}
	return false
}

// matchesPermutedIota reports whether r is iota over dims with the
// rolled axes (consecutive dims joined where groups has no bit) each
// rolled by a shift read off r[0], then the dims permuted by perm (output
// axis a is input axis perm[a]), read row-major.
func matchesPermutedIota(r []int, dims, perm []int, groups int) bool {
	k := len(dims)
	out := make([]int, k) // the permuted shape
	for a, p := range perm {
		out[a] = dims[p]
	}
	stride := make([]int, k) // the input's row-major strides
	acc := 1
	for a := k - 1; a >= 0; a-- {
		stride[a] = acc
		acc *= dims[a]
	}
	// the rolled axes: [lo, hi) of dims each, its size and its shift
	type axis struct{ lo, hi, size, stride, shift int }
	var axes []axis
	for a := 0; a < k; {
		b := a + 1
		for b < k && groups&(1<<(b-1)) == 0 {
			b++
		}
		size := 1
		for _, d := range dims[a:b] {
			size *= d
		}
		ax := axis{lo: a, hi: b, size: size, stride: stride[b-1]}
		ax.shift = r[0] / ax.stride % size
		axes = append(axes, ax)
		a = b
	}
	idx := make([]int, k)
	digit := make([]int, k) // per input dim
	for i := range r {
		for a := range k {
			digit[perm[a]] = idx[a]
		}
		src := 0
		for _, ax := range axes {
			c := 0
			for d := ax.lo; d < ax.hi; d++ {
				c = c*dims[d] + digit[d]
			}
			src += (c + ax.shift) % ax.size * ax.stride
		}
		if src != r[i] {
			return false
		}
		for a := k - 1; a >= 0; a-- {
			if idx[a]++; idx[a] < out[a] {
				break
			}
			idx[a] = 0
		}
	}
	return true
}
