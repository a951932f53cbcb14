package synth

import (
	"math"
	"slices"
	"sort"

	"github.com/zflow/zflow/exec/program"
)

// rearranged explains t as a value's elements moved, every axis of both
// perhaps split: reshape → permute → reshape, the einops rearrange that
// cuts an image into windows or patches and lays them out as rows
// (MobileViT's unfolding, Swin's window partition, pixel shuffles) or
// back. Where t holds v's elements (their sums agree), the map from t's
// positions to v's is read off the values as a mixed-radix one, digit by
// digit from t's innermost (rearrangeMap), and kept where its strides are
// one split of v's layout; every element is compared on the way, so what
// it returns reproduces t exactly.
func (s *synth) rearranged(t *val, vals []*val) *val {
	if t.numel() < 4 {
		return nil
	}
	ts, tq := sums(t.data)
	for _, v := range vals {
		if v.opaque || v.numel() != t.numel() || v.format != t.format || slices.Equal(v.data, t.data) {
			continue
		}
		if vs, vq := sums(v.data); math.Abs(vs-ts) > 1e-9*(tq+1) || math.Abs(vq-tq) > 1e-9*(tq+1) {
			continue
		}
		digits := rearrangeMap(v.data, t.data)
		if digits == nil {
			continue
		}
		split, perm := splitOf(digits)
		if split == nil || isIdentity(perm) {
			continue
		}
		r := s.reshape(v, split)
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{r}, out: v.format, label: "elements rearranged"})
		if w := s.reshape(p, t.shape); w != nil && slices.Equal(w.data, t.data) {
			return w
		}
	}
	return nil
}

// sums are Σx and Σx² in float64: equal (to rounding) for any order of
// the same elements.
func sums(d []float32) (sum, sq float64) {
	for _, x := range d {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	return sum, sq
}

// digit is one place of a mixed-radix map: radix r (t's positions in
// steps of the digits inside it) and stride (the step in the source).
type digit struct{ radix, stride int }

// rearrangeBudget bounds the steps rearrangeMap takes, each one scan of
// the source (a map of repeated values, a ReLU's zeros, can offer many
// candidate strides; each step follows at most three).
const rearrangeBudget = 64

// rearrangeMap finds digits, innermost first, such that t[i] =
// src[Σ digit_k(i)·stride_k] for every i (digit_k(i) the mixed-radix digits of
// i): each digit's stride is an offset at which the block of t the inner
// digits cover recurs in src, its radix how often it recurs so. Candidates
// that do not hold for every element of the block are dropped at once, so
// a wrong one costs a comparison or two; ties (repeated values) are
// followed depth-first, longest run first. nil when no map holds.
func rearrangeMap(src, t []float32) []digit {
	n := len(t)
	if src[0] != t[0] {
		return nil // every digit 0 is element 0 on both sides
	}
	budget := rearrangeBudget
	var walk func(offs []int, digits []digit) []digit
	walk = func(offs []int, digits []digit) []digit {
		block := len(offs)
		if block == n {
			return digits
		}
		if budget--; budget < 0 {
			return nil // each step scans src once: at most rearrangeBudget scans
		}
		var cands []digit
		for p := 1; p < len(src); p++ {
			if src[p] != t[block] {
				continue
			}
			r := 1
			for block*(r+1) <= n && recurs(src, t, offs, block*r, p*r) {
				r++
			}
			for r > 1 && (n/block)%r != 0 {
				r--
			}
			if r > 1 {
				cands = append(cands, digit{radix: r, stride: p})
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].radix > cands[j].radix })
		for _, c := range cands[:min(len(cands), 3)] {
			next := make([]int, 0, block*c.radix)
			for j := range c.radix {
				for _, o := range offs {
					next = append(next, o+j*c.stride)
				}
			}
			if d := walk(next, append(slices.Clone(digits), c)); d != nil {
				return d
			}
		}
		return nil
	}
	return walk([]int{0}, nil)
}

// recurs reports whether t's block [at, at+len(offs)) is src at shift +
// offs (every offset inside src).
func recurs(src, t []float32, offs []int, at, shift int) bool {
	if at+len(offs) > len(t) {
		return false
	}
	for i, o := range offs {
		q := shift + o
		if q < 0 || q >= len(src) || src[q] != t[at+i] {
			return false
		}
	}
	return true
}

// splitOf reads digits (t's innermost first) as a split of the source's
// layout: sorted by stride they must be its mixed-radix places (the
// smallest stride 1, each next the product of those inside it). It
// returns the source's split shape (outermost first) and the permutation
// that lays it out in t's digit order; nil where the strides are no such
// split (a gather).
func splitOf(digits []digit) (split, perm []int) {
	order := make([]int, len(digits)) // digit indices by stride, largest first
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return digits[order[a]].stride > digits[order[b]].stride })
	want := 1
	for i := len(order) - 1; i >= 0; i-- {
		d := digits[order[i]]
		if d.stride != want {
			return nil, nil
		}
		want *= d.radix
	}
	pos := make([]int, len(digits)) // digit index → source axis
	for axis, di := range order {
		split = append(split, digits[di].radix)
		pos[di] = axis
	}
	for k := len(digits) - 1; k >= 0; k-- { // t's axes: outermost digit first
		perm = append(perm, pos[k])
	}
	return split, perm
}
