package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// Values carried between calls. A call's argument may hold what an
// earlier call made inside itself and kept on the Python side: a video
// VAE run chunk by chunk passes each causal convolution the last frames
// of its input from the previous chunk's call (a frame cache), a list
// every block is handed whole. Such a value is in no scope the walk
// searches (the call that made it has returned), so each call's values
// are kept when it returns, and an argument nothing in its scope explains
// is looked for among them: the same tensor, a run of it along one axis,
// or two such runs joined (the frame before from an older cache, zeros
// where the first chunk had no past).

// maxCarried bounds the values kept (the newest are kept): a cache is
// read by the next calls, not by calls far later.
const maxCarried = 4096

// keepCarried records the values of a call that has returned, for the
// calls after it.
func (s *synth) keepCarried(vals ...*val) {
	if s.carriedSeen == nil {
		s.carriedSeen = map[*val]bool{}
	}
	for _, v := range vals {
		if v == nil || v.opaque || v.param || v.scalar || v.integral() || s.carriedSeen[v] || s.needsOpaque(v) {
			continue
		}
		s.carriedSeen[v] = true
		s.carried = append(s.carried, v)
	}
	if n := len(s.carried); n > maxCarried {
		for _, v := range s.carried[:n-maxCarried] {
			delete(s.carriedSeen, v)
		}
		s.carried = slices.Clone(s.carried[n-maxCarried:])
	}
}

// fromCarried explains target as values an earlier call made: one kept
// value (reshaped, or a run of it along one axis), else two pieces along
// one axis, each a kept value's run or zeros. Exact only: a cache is a
// copy. Nil when nothing kept makes it.
func (s *synth) fromCarried(target *val) *val {
	if len(s.carried) == 0 || !varied(target.data) {
		return nil
	}
	if v := s.carriedFound(target); v != nil && s.everyStep(v, target, 0) {
		return v // the same at the other captured steps too: no coincidence of step 0
	}
	return nil
}

// carriedFound is fromCarried at step 0.
func (s *synth) carriedFound(target *val) *val {
	if v := s.carriedPiece(target); v != nil {
		return v
	}
	for ax, n := range target.shape {
		if n < 2 || n > 16 {
			continue
		}
		for at := 1; at < n; at++ {
			a := s.carriedPieceOrZeros(cutAxis(target, ax, 0, at))
			if a == nil {
				continue
			}
			b := s.carriedPieceOrZeros(cutAxis(target, ax, at, n))
			if b == nil {
				continue
			}
			if j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: []*val{a, b}, out: target.format, label: "kept frames joined"}); j != nil && slices.Equal(j.data, target.data) {
				return j
			}
		}
	}
	return nil
}

// carriedPieceOrZeros is carriedPiece, or zeros of p's shape where p is
// all zeros (a past the first chunk did not have).
func (s *synth) carriedPieceOrZeros(p *val) *val {
	if !slices.ContainsFunc(p.data, func(x float32) bool { return x != 0 }) {
		return s.zeros(slices.Clone(p.shape), p.format, fmt.Sprintf("zeros%v", p.shape), "zeros standing for frames before the first (made from the request's shape)")
	}
	if !varied(p.data) {
		return nil
	}
	return s.carriedPiece(p)
}

// carriedPiece finds p among the kept values, newest first: one of p's
// shape or of p's size in another shape (reshaped), or one longer along
// a single axis holding p as a run of it.
func (s *synth) carriedPiece(p *val) *val {
	for i := len(s.carried) - 1; i >= 0; i-- {
		v := s.carried[i]
		if v.format != p.format {
			continue
		}
		if v.numel() == p.numel() {
			if slices.Equal(v.data, p.data) {
				if slices.Equal(v.shape, p.shape) {
					return v
				}
				return s.reshape(v, slices.Clone(p.shape))
			}
			continue
		}
		ax := runAxis(v.shape, p.shape)
		if ax < 0 {
			continue
		}
		if at := runAt(v, p, ax); at >= 0 {
			return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: at, End: at + p.shape[ax]}, args: []*val{v}, out: v.format,
				label: fmt.Sprintf("[%d, %d) along axis %d of a value an earlier call made", at, at+p.shape[ax], ax)})
		}
	}
	return nil
}

// runAxis is the one axis along which long is longer than short, their
// other sizes equal; −1 where there is no such single axis.
func runAxis(long, short []int) int {
	if len(long) != len(short) {
		return -1
	}
	ax := -1
	for i := range long {
		switch {
		case long[i] == short[i]:
		case long[i] > short[i] && ax < 0:
			ax = i
		default:
			return -1
		}
	}
	return ax
}

// runAt is the offset along ax at which v holds p, trying the last run
// first (a cache keeps the last frames); −1 where none does.
func runAt(v, p *val, ax int) int {
	outer, inner := exec.Numel(v.shape[:ax]), exec.Numel(v.shape[ax+1:])
	lv, lp := v.shape[ax], p.shape[ax]
	for at := lv - lp; at >= 0; at-- {
		same := true
		for o := 0; o < outer && same; o++ {
			src := v.data[(o*lv+at)*inner : (o*lv+at+lp)*inner]
			if !slices.Equal(src, p.data[o*lp*inner:(o+1)*lp*inner]) {
				same = false
			}
		}
		if same {
			return at
		}
	}
	return -1
}

// cutAxis is t's run [from, to) along ax as a value of its own (data
// only: a piece to look for).
func cutAxis(t *val, ax, from, to int) *val {
	shape := slices.Clone(t.shape)
	shape[ax] = to - from
	return &val{shape: shape, data: sliceData(t, ax, from, to), format: t.format}
}

// varied reports whether xs holds at least 8 numbers, not all one value
// (a fill matches a run of any value holding it).
func varied(xs []float32) bool {
	if len(xs) < 8 {
		return false
	}
	return slices.ContainsFunc(xs[1:], func(x float32) bool { return x != xs[0] })
}

// holdsCopy reports whether sc holds a value equal to t (glue reads it at
// once).
func holdsCopy(sc *scope, t *val) bool {
	return slices.ContainsFunc(sc.vals, func(v *val) bool {
		return v.numel() == t.numel() && slices.Equal(v.data, t.data)
	})
}
