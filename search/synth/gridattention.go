package synth

import (
	"slices"
)

// gridAttention explains a target laid out on a grid, channels last [B,
// G1, …, Gn, W] (n = 2 or 3: an attention module that takes and returns
// its tokens as an image or a video), as attention over its cells read
// as rows [B, G1·…·Gn, W]: the scope's values on the same grid read as
// rows too, the grid kept for the biases made on it
// (queryPositionBiases), the result laid back on the grid. Only where
// the scope made a value on the grid wider than the target (a fused
// projection) or three of them (q, k and v).
func (s *synth) gridAttention(t *val, sc *scope) *val {
	n := len(t.shape)
	if t.reshapedFrom || t.integral() || n < 4 || n > 5 || s.grid != nil {
		return nil
	}
	lead := t.shape[:n-1]
	onGrid := func(v *val) bool {
		return !v.opaque && !v.integral() && len(v.shape) == n && slices.Equal(v.shape[:n-1], lead)
	}
	wide, same := 0, 0
	for _, v := range sc.vals {
		if sc.own[v] && onGrid(v) {
			switch w := v.shape[n-1]; {
			case w > t.shape[n-1]:
				wide++
			case w == t.shape[n-1]:
				same++
			}
		}
	}
	if wide == 0 && same < 3 {
		return nil
	}
	rows := prod(lead[1:])
	l := sc.mapped(func(v *val) *val {
		if onGrid(v) {
			return s.reshape(v, []int{lead[0], rows, v.shape[n-1]})
		}
		return nil
	})
	proxy := *t
	proxy.shape = []int{lead[0], rows, t.shape[n-1]}
	proxy.reshapedFrom = true
	s.grid = slices.Clone(lead[1:])
	defer func() { s.grid = nil }()
	return s.reshape(s.attentionOf(&proxy, l, false), t.shape)
}
