package synth

import "slices"

// constantPart explains target's entries [start, start+n) along ax as a
// constant of the request: the same at every captured step, and no request
// input holds them (a part the pipeline builds afresh before each call and
// never changes, as a zero anchor latent and a zero mask channel joined
// beside the noisy latents are). The part is emitted as a constant of the
// trace's values; nil where it varies between steps or the trace has one
// step only (nothing tells a constant from a value of the request).
func (s *synth) constantPart(target *val, ax, start, n int) *val {
	part := func(st int) ([]float32, bool) {
		d, ok := s.at(target, st)
		if !ok || len(d) != len(target.data) {
			return nil, false
		}
		return sliceData(&val{shape: target.shape, data: d}, ax, start, start+n), true
	}
	if !s.invariant(target.format, part, 0) {
		return nil
	}
	shape := slices.Clone(target.shape)
	shape[ax] = n
	c := &val{shape: shape, data: sliceData(target, ax, start, start+n), format: target.format,
		origin: target.origin + " (the part beside the latents)"}
	s.em.constant(c, "the part of the argument beside the latents, equal at every captured step and in no request input: a constant the pipeline builds (a zero anchor, a mask channel)")
	return c
}
