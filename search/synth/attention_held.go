package synth

import "math"

// span is the range [lo, hi] of one column of a value.
type span struct{ lo, hi float32 }

// columnSpans is the range of each column (last axis) of v over all its
// other axes, memoised by v (values are never changed once made).
func (s *synth) columnSpans(v *val) []span {
	if sp, ok := s.columns[v]; ok {
		return sp
	}
	c := v.shape[len(v.shape)-1]
	sp := make([]span, c)
	for i := range sp {
		sp[i] = span{float32(math.Inf(1)), float32(math.Inf(-1))}
	}
	if c > 0 && len(v.data) == v.numel() {
		for i, x := range v.data {
			j := i % c
			sp[j].lo, sp[j].hi = min(sp[j].lo, x), max(sp[j].hi, x)
		}
	}
	if s.columns == nil {
		s.columns = map[*val][]span{}
	}
	s.columns[v] = sp
	return sp
}

// attentionHeld reports whether t [B, S, W] could be an attention's
// output over the scope's values: each of its columns within the range
// of some column of a value of the scope, widened to 0 (a softmax output
// is a convex combination of the value rows; a sink, zero keys or a gate
// pull it toward 0). Attention's operands are the scope's values, cut,
// moved and split into heads, never rescaled, so a column no value
// holds rules every attention out: a screen before the attention
// searches, whose refinement costs thousands of attention runs on a
// target none can explain (a pooled key read as rows, MViTv2's).
func (s *synth) attentionHeld(t *val, sc *scope) bool {
	if len(t.data) != t.numel() || len(t.shape) < 2 {
		return true
	}
	var cols []span
	for _, v := range sc.vals {
		if v.opaque || v.integral() || len(v.shape) < 2 || len(v.data) != v.numel() {
			continue
		}
		for _, c := range s.columnSpans(v) {
			cols = append(cols, span{min(c.lo, 0), max(c.hi, 0)})
		}
	}
	if len(cols) == 0 {
		return true
	}
	own := s.columnSpans(t)
	missed := 0
	for _, c := range own {
		held := false
		for _, v := range cols {
			slack := 0.02*max(-v.lo, v.hi) + 1e-6
			if c.lo >= v.lo-slack && c.hi <= v.hi+slack {
				held = true
				break
			}
		}
		if !held {
			missed++
		}
	}
	return missed*100 <= len(own)
}
