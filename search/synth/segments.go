package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// isBounds reports whether v is a vector of segment bounds: integers
// rising from 0 (never falling) to its last, with a segment between two
// of them at least once more than the whole (the cumulative lengths a
// varlen attention takes: cu_seqlens of windows or of packed sequences).
func isBounds(v *val) bool {
	k := len(v.data)
	if len(v.shape) != 1 || !v.integral() || k < 3 || v.data[0] != 0 || v.data[k-1] <= 0 {
		return false
	}
	for i := 1; i < k; i++ {
		if v.data[i] < v.data[i-1] {
			return false
		}
	}
	return true
}

// segmentsOf is the bounds a segment mask was made from, where bias is
// one (attention within windows or packed sequences); nil otherwise.
func segmentsOf(bias *val) []int {
	if bias == nil || bias.from == nil || bias.from.op != program.OpSegmentMask || len(bias.from.args) == 0 {
		return nil
	}
	out := make([]int, len(bias.from.args[0].data))
	for i, x := range bias.from.args[0].data {
		out[i] = int(x)
	}
	return out
}

// segmentMasks are the additive masks of attention within the segments
// that a bounds vector of the scope cuts the sequence into (the windows
// of a windowed vision tower, sequences packed into one), one per such
// vector whose last bound is the queries' and keys' length: tried as
// score biases beside the scope's own.
func (s *synth) segmentMasks(sc *scope, q, k *val) []*val {
	n := q.shape[1]
	if k.shape[1] != n || q.shape[0] != 1 {
		return nil
	}
	var out []*val
	for _, v := range sc.vals {
		if v.opaque || !isBounds(v) || v.data[len(v.data)-1] != float32(n) {
			continue
		}
		if slices.ContainsFunc(out, func(m *val) bool { return m.from.args[0] == v }) {
			continue
		}
		e := &expr{op: program.OpSegmentMask, attrs: program.Attrs{N: n}, args: []*val{v}, out: precision.F32,
			label: fmt.Sprintf("within the segments %v bounds", v.data)}
		if m := s.derive(e); m != nil {
			out = append(out, m)
		}
	}
	return out
}
