package synth

import (
	"slices"
	"sort"

	"github.com/zflow/zflow/exec/program"
)

// viewed explains t as a part of a larger value's elements, moved: slices
// of some of v's axes, each axis split, the pieces permuted, reshaped to
// t (a class row dropped, then the rest laid out as a map and cut along
// its channels: CoaT's convolutional position encoding; a head's rows
// cut from a window). The map from t's positions to v's is read off the
// values as rearranged's is, from t's first element wherever it lies in
// v; each digit's stride must be a step along one of v's axes, and each
// axis's digits a contiguous split of one slice of it. Every element is
// compared on the way: what it returns reproduces t exactly.
func (s *synth) viewed(t *val, vals []*val) *val {
	n := t.numel()
	if n < 4 {
		return nil
	}
	for _, v := range vals {
		if v.opaque || v.format != t.format || v.numel() <= n || v.numel() > 8*n || !valuesOf(v.data, t.data) {
			continue
		}
		starts := 0
		for at := 0; at < len(v.data) && starts < viewStarts(len(v.data)); at++ {
			if v.data[at] != t.data[0] {
				continue
			}
			starts++
			digits := rearrangeMapAt(v.data, t.data, exactly(t.data), at)
			if digits == nil {
				continue
			}
			if w := s.viewOf(v, t, at, digits); w != nil && slices.Equal(w.data, t.data) {
				return w
			}
		}
	}
	return nil
}

// viewStarts is how many places holding t's first value viewed tries in
// a value of n entries: a narrow format repeats values often, and the
// right place may follow many others, so a small value's are tried
// further (each wrong one fails in a comparison or two).
func viewStarts(n int) int {
	if n <= 1<<16 {
		return 64
	}
	return 4
}

// viewOf builds the slices, split, permutation and reshape that read
// t's digits (innermost first, strides in v's flat layout) from v at
// offset start, or nil where a digit steps across v's axes or an axis's
// digits are no contiguous split of one slice.
func (s *synth) viewOf(v, t *val, start int, digits []digit) *val {
	rank := len(v.shape)
	stride := make([]int, rank)
	st := 1
	for a := rank - 1; a >= 0; a-- {
		stride[a] = st
		st *= v.shape[a]
	}
	type place struct{ digit, step int }
	perAxis := make([][]place, rank)
	for i, d := range digits {
		a := -1
		for b := range rank { // the outermost axis whose stride divides the digit's
			if d.stride%stride[b] == 0 && d.stride/stride[b] < v.shape[b] {
				a = b
				break
			}
		}
		if a < 0 || (d.radix-1)*(d.stride/stride[a]) >= v.shape[a] {
			return nil
		}
		perAxis[a] = append(perAxis[a], place{i, d.stride / stride[a]})
	}
	x := v
	var split []int
	var order []int // split axes' digit indices (−1: an axis of one)
	for a := range rank {
		off := start / stride[a] % v.shape[a]
		ps := perAxis[a]
		sort.Slice(ps, func(i, j int) bool { return ps[i].step < ps[j].step })
		span, want := 1, 1
		for _, p := range ps {
			if p.step != want {
				return nil
			}
			want *= digits[p.digit].radix
		}
		span = want
		if off+span > v.shape[a] {
			return nil
		}
		if off != 0 || span != v.shape[a] {
			if x = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: a, Start: off, End: off + span}, args: []*val{x}, out: x.format, label: "part of an axis"}); x == nil {
				return nil
			}
		}
		if len(ps) == 0 {
			split, order = append(split, 1), append(order, -1)
			continue
		}
		for i := len(ps) - 1; i >= 0; i-- { // outermost first
			split, order = append(split, digits[ps[i].digit].radix), append(order, ps[i].digit)
		}
	}
	// t's axes outermost digit first, then the axes of one
	var perm []int
	for d := len(digits) - 1; d >= 0; d-- {
		perm = append(perm, slices.Index(order, d))
	}
	for i, o := range order {
		if o < 0 {
			perm = append(perm, i)
		}
	}
	r := s.reshape(x, split)
	if !isIdentity(perm) {
		r = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{r}, out: v.format, label: "a part's elements rearranged"})
	}
	return s.reshape(r, t.shape)
}
