package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxBodySums bounds the sums of two body parts classRowsApart offers.
const maxBodySums = 4

// classRowsApart explains t [.., 1 + N, C] as its first row and the rest
// explained apart, then joined along the rows: a block that handles a
// class row on its own (TimeSformer's divided attention: the class row
// repeated for each frame's spatial attention, then averaged back over
// the frames, the patches' rows reordered between frames and grid). For
// the two searches the scope also holds each value of C columns and more
// than one row cut the same way, its first row and its rest; the first
// rows of a batch of several laid as the rows of a batch of one (a class
// row per frame, to average); and the sums of two rests of one shape (a
// residual over the patches' rows only, before they are reordered). Tried
// once every other form failed, never inside itself.
func (s *synth) classRowsApart(t *val, sc *scope) *val {
	n := len(t.shape)
	if s.splitting || s.peeling || t.reshapedFrom || n < 3 || t.integral() || t.shape[n-2] < 3 {
		return nil
	}
	ax, c := n-2, t.shape[n-1]
	var heads, rests []*val
	for _, v := range sc.vals {
		if v.opaque || v.integral() || len(v.shape) != n || v.shape[n-1] != c || v.shape[ax] < 3 {
			continue
		}
		h := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: 1}, args: []*val{v}, out: v.format, label: "the first row"})
		r := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 1, End: v.shape[ax]}, args: []*val{v}, out: v.format, label: "the rows after the first"})
		if h == nil || r == nil {
			continue
		}
		heads = append(heads, h)
		if b := v.shape[0]; n == 3 && b > 1 {
			heads = append(heads, s.reshape(h, []int{1, b, c}))
		}
		rests = append(rests, r)
	}
	if len(rests) == 0 {
		return nil
	}
	var sums []*val
	for i, a := range rests {
		for _, b := range rests[i+1:] {
			if len(sums) < maxBodySums && slices.Equal(a.shape, b.shape) {
				if v := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "two rests added"}); v != nil {
					sums = append(sums, v)
				}
			}
		}
	}
	// the scope's own values and arguments too, which a rest may be added to
	for _, v := range sc.vals {
		if (sc.own[v] || sc.arg[v]) && !v.opaque && len(v.shape) == n && v.shape[n-1] == c {
			for _, r := range rests {
				if len(sums) < 2*maxBodySums && r != v && slices.Equal(r.shape, v.shape) && !slices.Contains(rests, v) {
					if w := s.derive(&expr{op: program.OpAdd, args: []*val{v, r}, out: t.format, label: "a rest added to a value"}); w != nil {
						sums = append(sums, w)
					}
				}
			}
		}
	}
	sub := &scope{module: sc.module, call: sc.call, own: sc.own, arg: sc.arg, vecs: map[string][]vec{}}
	sub.vals = slices.Concat(sc.vals, heads, rests, sums)
	s.splitting, s.rowsApart = true, true
	defer func() { s.splitting, s.rowsApart = false, false }()
	head := s.glueIn(s.part(t, ax, 0, 1), sub)
	if head == nil || head.opaque {
		return nil
	}
	body := s.glueIn(s.part(t, ax, 1, t.shape[ax]), sub)
	if body == nil || body.opaque {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: []*val{head, body}, out: t.format, label: "the first row and the rest, explained apart"}})
	if w == nil || relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStep(w, t, tolerance(t.format)) {
		return nil
	}
	return w
}
