package synth

import (
	"math"
	"slices"
	"sort"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
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
		digits := rearrangeMap(v.data, t.data, exactly(t.data))
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
// i; "=" as same says: exactly, or within a rounding of t's i-th entry): each digit's stride is an offset at which the block of t the inner
// digits cover recurs in src, its radix how often it recurs so. Candidates
// that do not hold for every element of the block are dropped at once, so
// a wrong one costs a comparison or two; ties (repeated values) are
// followed depth-first, longest run first. nil when no map holds.
func rearrangeMap(src, t []float32, same func(x float32, i int) bool) []digit {
	return rearrangeMapAt(src, t, same, 0)
}

// rearrangeMapAt is rearrangeMap with t's first element at src[start]
// (t a part of src's elements: strides counted from there).
func rearrangeMapAt(src, t []float32, same func(x float32, i int) bool, start int) []digit {
	n := len(t)
	if start >= len(src) || !same(src[start], 0) {
		return nil // every digit 0 is element start of src, 0 of t
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
		for p := offs[0] + 1; p < len(src); p++ {
			if !same(src[p], block) {
				continue
			}
			st := p - offs[0]
			r := 1
			for block*(r+1) <= n && recurs(src, n, offs, block*r, st*r, same) {
				r++
			}
			for r > 1 && (n/block)%r != 0 {
				r--
			}
			if r > 1 {
				cands = append(cands, digit{radix: r, stride: st})
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
	return walk([]int{start}, nil)
}

// exactly is rearrangeMap's test of a source value against t's i-th.
func exactly(t []float32) func(x float32, i int) bool {
	return func(x float32, i int) bool { return x == t[i] }
}

// recurs reports whether the block [at, at+len(offs)) of t (n values) is
// src at shift + offs (every offset inside src), entry by entry as same
// says.
func recurs(src []float32, n int, offs []int, at, shift int, same func(x float32, i int) bool) bool {
	if at+len(offs) > n {
		return false
	}
	for i, o := range offs {
		q := shift + o
		if q < 0 || q >= len(src) || !same(src[q], at+i) {
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

// rearrangedPlus explains t as a value's elements moved (as rearranged
// reads them) plus a parameter broadcast over t's leading axes: a position
// table added after the move (NesT's blocks, TNT's pixel patches). The map
// is read off t − p against the value, each entry within a unit in the
// last place of t's format (the sum rounded once); the sum is then scored
// as any candidate.
func (s *synth) rearrangedPlus(t *val, vals []*val) *val {
	n := t.numel()
	if n < 4 {
		return nil
	}
	bits := map[precision.Format]int{precision.F32: 23, precision.BF16: 7, precision.F16: 10}[t.format]
	if bits == 0 {
		return nil
	}
	for _, p := range vals {
		bshape := trailingBroadcast(p, t)
		if !p.param || p.opaque || bshape == nil || p.numel() < 4 {
			continue
		}
		pn := p.numel()
		d, tol := make([]float32, n), make([]float64, n)
		for i, x := range t.data {
			d[i] = float32(float64(x) - float64(p.data[i%pn]))
			tol[i] = math.Abs(float64(x))*math.Ldexp(1, -bits) + 1e-30
		}
		// no move: a parameter added as it is is paramAdded's
		for _, m := range s.nearMoves(t, d, tol, vals, false) {
			pb := s.reshape(p, bshape)
			if pb == nil {
				continue
			}
			if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{m, pb}, out: t.format, label: "rearranged plus a parameter"}}); w != nil {
				return w
			}
		}
	}
	return s.plusRearranged(t, vals)
}

// nearMoves are the values of vals (not parameters) whose elements, moved
// as rearranged reads them, are d's, each within tol[i] of it: each move
// laid out in t's shape; a value that needs no move is one only where
// still is set.
func (s *synth) nearMoves(t *val, d []float32, tol []float64, vals []*val, still bool) []*val {
	return s.nearMovesBy(t, func(x float32, i int) bool { return math.Abs(float64(x)-float64(d[i])) <= tol[i] }, vals, still)
}

// nearMovesBy is nearMoves with the test of a source value against t's
// i-th entry given.
func (s *synth) nearMovesBy(t *val, near func(x float32, i int) bool, vals []*val, still bool) []*val {
	n := t.numel()
	var out []*val
	for _, v := range vals {
		if v.opaque || v.param || v.numel() != n || v.format != t.format {
			continue
		}
		digits := rearrangeMap(v.data, t.data, near)
		if digits == nil {
			continue
		}
		split, perm := splitOf(digits)
		switch {
		case split == nil:
		case isIdentity(perm):
			if still {
				out = append(out, s.reshape(v, t.shape))
			}
		default:
			r := s.reshape(v, split)
			if m := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{r}, out: v.format, label: "elements rearranged"}), t.shape); m != nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// plusRearranged explains t as the elements of v + p moved, p a value
// broadcast over v's leading axes (a position table added before the
// move: TNT's pixel embedding, x + pos, then its cells laid out as rows):
// the sum is made in t's format and its map to t read exactly.
func (s *synth) plusRearranged(t *val, vals []*val) *val {
	n := t.numel()
	for _, v := range vals {
		if v.opaque || v.param || v.numel() != n || v.format != t.format {
			continue
		}
		for _, p := range vals {
			bshape := trailingBroadcast(p, v)
			if p == v || p.opaque || bshape == nil || p.numel() < 4 || p.numel() == n {
				continue
			}
			pn := p.numel()
			src := make([]float32, n)
			for i, x := range v.data {
				src[i] = t.format.Round(x + p.data[i%pn])
			}
			digits := rearrangeMap(src, t.data, exactly(t.data))
			if digits == nil {
				continue
			}
			split, perm := splitOf(digits)
			if split == nil || isIdentity(perm) {
				continue
			}
			sum := s.derive(&expr{op: program.OpAdd, args: []*val{v, s.reshape(p, bshape)}, out: t.format, label: "a table added"})
			m := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(sum, split)}, out: t.format, label: "elements rearranged"})
			if w := s.reshape(m, t.shape); w != nil && relRMS(t.format, w.data, t.data) <= looseFloor(t.format) {
				return w
			}
		}
	}
	return nil
}

// trailingBroadcast is p's shape padded with leading ones to t's rank
// where p's axes, leading ones dropped, are t's trailing axes (p
// broadcast over t's leading axes), or nil.
func trailingBroadcast(p, t *val) []int {
	ps := slices.Clone(p.shape)
	for len(ps) > 0 && ps[0] == 1 {
		ps = ps[1:]
	}
	if len(ps) == 0 || len(ps) > len(t.shape) {
		return nil
	}
	if !slices.Equal(ps, t.shape[len(t.shape)-len(ps):]) {
		return nil
	}
	return append(slices.Repeat([]int{1}, len(t.shape)-len(ps)), ps...)
}
