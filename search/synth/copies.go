package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxCopies bounds the repeat factor copied reads along a map's axes.
const maxCopies = 4

// copied explains t [B, C, …] (a map or a clip) whose values show it is a
// smaller value copied along one axis after the channels: its first
// entries copies of the first kept one or its last of the last kept
// (torch.cat([x[:, :, :1], x]), F.pad's replicate: a causal video
// convolution's past), or each entry repeated k times (repeat_interleave,
// a nearest upsampling), or its batch the copies of a smaller batch. The
// smaller value, read off t, is explained by
// glue as a target of its own, a sum two modules made say, then copied
// back; one axis at a time, so copies along two axes recurse. A late
// form: only where nothing else explains t, as equal entries can be a
// coincidence of the request (equal tokens in a row).
func (s *synth) copied(t *val, sc *scope) *val {
	if len(t.shape) < 3 || t.integral() {
		return nil
	}
	// the batch: a batch of one spread over frames (I2VGen-XL's context
	// joined, then repeated once per frame)
	if w := s.repeatCopied(t, sc, 0); w != nil {
		return w
	}
	for ax := 2; ax < len(t.shape) && len(t.shape) >= 4; ax++ {
		if w := s.edgeCopied(t, sc, ax); w != nil {
			return w
		}
		if w := s.repeatCopied(t, sc, ax); w != nil {
			return w
		}
	}
	return nil
}

// edgeCopied is copied with copies of the edge entries along ax.
func (s *synth) edgeCopied(t *val, sc *scope, ax int) *val {
	S := t.shape[ax]
	same := func(i, j int) bool { return slices.Equal(sliceData(t, ax, i, i+1), sliceData(t, ax, j, j+1)) }
	lead := 0
	for lead < S-1 && same(lead, lead+1) {
		lead++
	}
	trail := 0
	for trail < S-1-lead && same(S-1-trail, S-2-trail) {
		trail++
	}
	if lead == 0 && trail == 0 || lead+trail >= S-1 {
		return nil // no copies, or one entry along ax (a broadcast, not a pad)
	}
	core := s.part(t, ax, lead, S-trail)
	core.reshapedFrom = true
	v := s.glueApart(core, sc)
	if v == nil {
		return nil
	}
	v = s.reshape(v, core.shape)
	parts := []*val{v}
	if lead > 0 {
		parts = append([]*val{s.edgeRepeat(v, ax, 0, lead)}, parts...)
	}
	if trail > 0 {
		parts = append(parts, s.edgeRepeat(v, ax, core.shape[ax]-1, trail))
	}
	if slices.Contains(parts, nil) {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: t.format, label: "edge entries copied"}})
	return w
}

// glueApart is glue on a target of its own, from its first forms on,
// also from within the late pass.
func (s *synth) glueApart(t *val, sc *scope) *val {
	late := s.late
	s.late = false
	defer func() { s.late = late }()
	return s.glueWithinBudget(t, sc)
}

// edgeRepeat is v's entry at along ax, n times.
func (s *synth) edgeRepeat(v *val, ax, at, n int) *val {
	e := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: at, End: at + 1}, args: []*val{v}, out: v.format, label: "an edge entry"})
	if e == nil || n == 1 {
		return e
	}
	return s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: ax}, args: []*val{e}, out: v.format, label: fmt.Sprintf("the edge entry %d times", n)})
}

// repeatCopied is copied with each entry along ax repeated k times.
func (s *synth) repeatCopied(t *val, sc *scope, ax int) *val {
	S := t.shape[ax]
	most := maxCopies
	if ax == 0 {
		most = S // a batch of one copied once per frame: any count of frames
	}
	for k := 2; k <= most; k++ {
		if S%k != 0 || S == k && ax > 0 {
			continue // one entry along a map's axis: a broadcast, not copies
		}
		split := slices.Concat(t.shape[:ax], []int{S / k, k}, t.shape[ax+1:])
		grouped := &val{shape: split, data: t.data}
		first := sliceData(grouped, ax+1, 0, 1)
		repeated := true
		for j := 1; j < k && repeated; j++ {
			repeated = slices.Equal(first, sliceData(grouped, ax+1, j, j+1))
		}
		if !repeated {
			continue
		}
		shape := slices.Clone(t.shape)
		shape[ax] = S / k
		core := s.readAs(t, shape, func(d []float32) []float32 { return sliceData(&val{shape: split, data: d}, ax+1, 0, 1) })
		core.reshapedFrom = true
		v := s.glueApart(core, sc)
		if v == nil {
			return nil
		}
		one := s.reshape(v, slices.Concat(shape[:ax+1], []int{1}, shape[ax+1:]))
		rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: k, Axis: ax + 1}, args: []*val{one}, out: v.format, label: fmt.Sprintf("each entry %d times along axis %d", k, ax)})
		if r := s.reshape(rep, t.shape); r != nil {
			w, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{r}, out: t.format, label: "repeated entries"}})
			return w
		}
		return nil
	}
	return nil
}
