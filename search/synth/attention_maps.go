package synth

import "github.com/zflow/zflow/exec/program"

// mapsAttention explains t [B, C, h, w], a map laid out channels first,
// as attention over rows: t read as [B, h·w, C], the scope's maps of the
// batch ([B, C', h', w']: q, k and v made by convolutions) read as rows
// [B, h'·w', C'] the same way, the result laid back out as a map (LeViT's
// and EfficientViT's convolutional attentions, whose heads are views of
// conv outputs). The scope's own 4-D values stay beside their rows too:
// per-head scores [B, H, h·w, Sk] show the head count.
func (s *synth) mapsAttention(t *val, sc *scope, joined bool) *val {
	b, c, h, w := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	n := h * w
	maps := 0
	mapped := sc.mapped(func(v *val) *val {
		if v.opaque || v.integral() || len(v.shape) != 4 || v.shape[0] != b {
			return nil
		}
		r := s.reshape(v, []int{b, v.shape[1], v.shape[2] * v.shape[3]})
		if r == nil {
			return nil
		}
		if sc.own[v] {
			maps++
		}
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{r}, out: v.format, label: "a map's cells as rows"})
	})
	if maps == 0 {
		return nil // no map made inside the scope: nothing to attend with
	}
	for _, v := range sc.vals {
		if len(v.shape) == 4 && sc.own[v] {
			mapped.add(v, true) // as they are too: per-head scores show the head count
		}
	}
	proxy := s.readAs(t, []int{b, n, c}, func(d []float32) []float32 {
		return permuteData(&val{shape: []int{b, c, n}, data: d}, []int{0, 2, 1})
	})
	proxy.reshapedFrom = true
	r := s.attentionOf(proxy, mapped, joined)
	if r == nil {
		return nil
	}
	back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{r}, out: r.format, label: "rows laid out as a map"})
	return s.reshape(back, t.shape)
}
