package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// firstFrameApart explains a clip t [B, C, T, H, W] as its first frame and
// the frames after it, each explained apart and joined in time: a causal
// video VAE's sampler that packs the first frame one way and the rest
// another (HunyuanVideo 1.5's: the first frame folded in space only).
// For the two searches the scope also holds each clip of the scope of
// two or more frames cut the same way, its first frame and its rest.
// Tried once every other form failed, never inside itself or
// classRowsApart.
func (s *synth) firstFrameApart(t *val, sc *scope) *val {
	if s.splitting || s.peeling || len(t.shape) != 5 || t.shape[2] < 2 || t.integral() {
		return nil
	}
	var firsts, rests []*val
	for _, v := range sc.vals {
		if v.opaque || v.integral() || len(v.shape) != 5 || v.shape[0] != t.shape[0] || v.shape[2] < 2 {
			continue
		}
		f := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: 1}, args: []*val{v}, out: v.format, label: "the first frame"})
		r := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 1, End: v.shape[2]}, args: []*val{v}, out: v.format, label: "the frames after the first"})
		if f != nil && r != nil {
			firsts, rests = append(firsts, f), append(rests, r)
		}
	}
	if len(rests) == 0 {
		return nil
	}
	s.splitting = true
	defer func() { s.splitting = false }()
	explain := func(part *val, cut []*val) *val {
		sub := &scope{module: sc.module, call: sc.call, own: sc.own, arg: sc.arg, vecs: map[string][]vec{}}
		sub.vals = slices.Concat(sc.vals, cut)
		v := s.glueIn(part, sub)
		if v == nil || v.opaque {
			return nil
		}
		return v
	}
	first := explain(s.part(t, 2, 0, 1), firsts)
	if first == nil {
		return nil
	}
	rest := explain(s.part(t, 2, 1, t.shape[2]), rests)
	if rest == nil {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{s.reshape(first, []int{t.shape[0], t.shape[1], 1, t.shape[3], t.shape[4]}), s.reshape(rest, slices.Concat(t.shape[:2], []int{t.shape[2] - 1}, t.shape[3:]))}, out: t.format, label: "the first frame and the rest, explained apart"}})
	if w == nil || relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStep(w, t, tolerance(t.format)) {
		return nil
	}
	return w
}
