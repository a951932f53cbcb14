package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// rearrangedCut explains t as a value's elements moved (rearranged's
// reshape → permute → reshape) and then cut along one axis: a video
// VAE's depth-to-space upsampler that drops the first frame it makes
// (LTX-Video's [:, :, 1:] after the rearrangement), a patchify whose
// frames are cut into chunks (Wan 2.2's), frames folded into the batch
// and cut into chunks of a norm's (Mochi's). The cut axis of the moved
// value w is k = t's length + extra; its entries are v's axis va (F
// entries) times a radix r = k/F from other digits, so the part of t on
// the window's whole multiples of r is the rearrangement of v cut along
// va, which rearranged's map reads exactly; that split, with va's digit
// whole again, moves all of v, and the cut is checked on every element.
func (s *synth) rearrangedCut(t *val, vals []*val) *val {
	if t.numel() < 8 || t.integral() {
		return nil
	}
	movable := func(v *val) bool {
		return !v.opaque && !v.integral() && v.format == t.format && v.numel() > t.numel() && v.numel() <= 4*t.numel()
	}
	for _, v := range vals {
		if !movable(v) {
			continue
		}
		if w := s.cutOfMovedAny(t, v); w != nil {
			return w
		}
	}
	// a sum moved and cut: v plus a map of the scope with v's trailing
	// axes whose channels, tiled, are v's (LTX-Video 0.9.5's upsampler
	// with its residual: the input's depth-to-space repeated over the
	// channels and cut beside the convolution's, the same elements as
	// the tiled input added before the move)
	for _, v := range vals {
		if !movable(v) || len(v.shape) < 3 {
			continue
		}
		for _, x := range vals {
			if x == v || x.opaque || x.integral() || x.format != t.format || len(x.shape) != len(v.shape) || x.shape[0] != v.shape[0] ||
				!slices.Equal(x.shape[2:], v.shape[2:]) || v.shape[1]%x.shape[1] != 0 {
				continue
			}
			tiled := x
			if r := v.shape[1] / x.shape[1]; r > 1 {
				tiled = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: r, Axis: 1}, args: []*val{x}, out: x.format, label: fmt.Sprintf("the channels tiled %d times", r)})
			}
			sum := s.derive(&expr{op: program.OpAdd, args: []*val{v, tiled}, out: t.format, label: "plus a map tiled over the channels"})
			if sum == nil {
				continue
			}
			if w := s.cutOfMovedAny(t, sum); w != nil {
				return w
			}
		}
	}
	return nil
}

// cutOfMovedAny is cutOfMoved over t's and v's axes and the windows a
// cut keeps: the last n entries, the first n, and the chunks of n (a
// norm run chunk by chunk over frames folded into the batch, Mochi's
// VAE: the leading axis too).
func (s *synth) cutOfMovedAny(t, v *val) *val {
	for ax := range t.shape {
		inner := t.numel() / t.shape[ax]
		if v.numel()%inner != 0 {
			continue
		}
		n := t.shape[ax]
		k := v.numel() / inner
		extra := k - n
		if extra <= 0 {
			continue
		}
		froms := []int{extra, 0}
		for j := n; j < extra; j += n {
			froms = append(froms, j)
		}
		for va := range v.shape {
			F := v.shape[va]
			if F < 2 || k%F != 0 {
				continue
			}
			for _, from := range froms {
				if w := s.cutOfMoved(t, v, ax, va, k, from); w != nil {
					return w
				}
			}
		}
	}
	return nil
}

// cutOfMoved is rearrangedCut for one value, axis pair and window: t =
// w[from : from + len] along ax.
func (s *synth) cutOfMoved(t, v *val, ax, va, k, from int) *val {
	F, n := v.shape[va], t.shape[ax]
	r := k / F
	// the whole digits of va inside the window: [f0, f1) of v's va, t's
	// [e0, e1)
	f0, f1 := (from+r-1)/r, (from+n)/r
	e0, e1 := f0*r-from, f1*r-from
	if f1-f0 < 2 || e0 < 0 || e1 > n {
		return nil
	}
	sub, src := cutAxis(t, ax, e0, e1), cutAxis(v, va, f0, f1)
	digits := rearrangeMap(src.data, sub.data, exactly(sub.data))
	if digits == nil {
		return nil
	}
	split, perm := splitOf(digits)
	if split == nil || isIdentity(perm) {
		return nil
	}
	// va's digit may be merged with its neighbours where they stay
	// together (frames and rows in a patchify): split at src's axes
	split, perm = refineSplit(split, perm, src.shape)
	// va's digit: the split's dims cover src's axes outermost first
	at, dim := -1, 0
	for i, size := range src.shape {
		if size == 1 {
			continue // an axis of one has no digit
		}
		prod := 1
		start := dim
		for dim < len(split) && prod < size {
			prod *= split[dim]
			dim++
		}
		if prod != size {
			return nil
		}
		if i == va {
			if dim-start != 1 {
				return nil // va split further: its whole length is not one digit
			}
			at = start
		}
	}
	if at < 0 {
		return nil
	}
	full := slices.Clone(split)
	full[at] = F
	wShape := slices.Clone(t.shape)
	wShape[ax] = k
	moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(v, full)}, out: v.format, label: "elements rearranged"})
	w := s.reshape(moved, wShape)
	if w == nil {
		return nil
	}
	cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: from, End: from + n}, args: []*val{w}, out: w.format, label: "the rearrangement cut"})
	if cut == nil || !slices.Equal(cut.data, t.data) {
		return nil
	}
	return cut
}

// refineSplit splits the digits of a source split (outermost first, perm
// laying them out in the target's order) wherever one of shape's axis
// boundaries falls inside a digit: a digit that merged consecutive axes
// (kept together by the move) becomes those axes again, its pieces kept
// together and in order in the target. Where a digit boundary and an
// axis boundary do not nest (neither place divides the other) the split
// is returned as it is.
func refineSplit(split, perm, shape []int) ([]int, []int) {
	// places (strides from the innermost) of the digits' and the axes'
	// boundaries; their union, if a chain of divisors, is the refinement
	places := map[int]bool{}
	p := 1
	for i := len(split) - 1; i >= 0; i-- {
		places[p] = true
		p *= split[i]
	}
	total := p
	p = 1
	for i := len(shape) - 1; i >= 0; i-- {
		places[p] = true
		p *= shape[i]
	}
	if p != total {
		return split, perm
	}
	chain := make([]int, 0, len(places))
	for q := range places {
		chain = append(chain, q)
	}
	slices.Sort(chain)
	for i := 1; i < len(chain); i++ {
		if chain[i]%chain[i-1] != 0 {
			return split, perm
		}
	}
	// each digit's pieces, outermost first: the chain's places inside it
	pieces := make([][]int, len(split))
	p = 1
	for i := len(split) - 1; i >= 0; i-- {
		hi := p * split[i]
		var in []int // innermost first
		for j, c := range chain {
			if c < p || c >= hi {
				continue
			}
			next := hi
			if j+1 < len(chain) && chain[j+1] < hi {
				next = chain[j+1]
			}
			in = append(in, next/c)
		}
		slices.Reverse(in)
		pieces[i] = in
		p = hi
	}
	first := make([]int, len(split)) // a digit's first piece's index in the refined split
	var out []int
	for i, ps := range pieces {
		first[i] = len(out)
		out = append(out, ps...)
	}
	var outPerm []int
	for _, d := range perm {
		for k := range pieces[d] {
			outPerm = append(outPerm, first[d]+k)
		}
	}
	return out, outPerm
}
