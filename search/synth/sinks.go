package synth

// withSinks wraps an attention search's try so that each choice is also
// tried with an attention sink: one logit per query head joined to every
// row's scores and dropped after the softmax. The logits are a parameter
// of the attention's own call holding exactly one number per head ([H],
// found by shape, whatever its name); the captured output decides,
// teacher forced, whether the choice with the sink or without it wins. A
// scope without such a parameter tries nothing more.
func (s *synth) withSinks(sc *scope, try func(attnChoice)) func(attnChoice) {
	var cands []*val
	for _, p := range sc.vals {
		if p.param && len(p.shape) == 1 {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return try
	}
	return func(ch attnChoice) {
		try(ch)
		for _, p := range cands {
			if p.shape[0] != ch.params.Heads || ch.sinks != nil {
				continue
			}
			c := ch
			c.sinks = p
			c.label += " sinks=" + p.origin
			try(c)
		}
	}
}
