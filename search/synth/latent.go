package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// latentAttention explains t [B, S, H·dv] as attention whose keys and
// values come out of a compressed projection (multi-head latent
// attention): per head, q is [q_nope | RoPE(q_pe)] cut from one
// projection Q [B, S, H·(dn+dr)]; k is [k_nope | RoPE(k_pe)], k_nope cut
// per head from a projection KV [B, S, H·(dn+dv)] (of the normalised
// latent), k_pe the last dr channels of the compressed value C, one
// for every head; v is KV's other part per head. The head widths follow
// from the values' widths and the RoPE tables' (dr); v is padded with
// zeros to q's head width (as the fused kernels are called) and the
// padding cut from the result.
func (s *synth) latentAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	b, n, wt := t.shape[0], t.shape[1], t.shape[2]
	tables := s.ropeTables(sc)
	if len(tables) == 0 {
		return nil
	}
	var vals []*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || !sc.own[v] || v.numel()%(b*n) != 0 {
			continue
		}
		if r := s.reshape(v, []int{b, n, v.numel() / (b * n)}); r != nil {
			vals = append(vals, r)
		}
	}
	var cands []*expr
	chosen := map[*expr]attnChoice{} // what each candidate computes, for the factors read off the winner
	for _, tb := range tables {
		dr := tb[0].shape[len(tb[0].shape)-1]
		for _, kv := range vals {
			hdn := kv.shape[2] - wt // H·dn
			if hdn <= 0 {
				continue
			}
			for _, q := range vals {
				hdr := q.shape[2] - hdn // H·dr
				if q == kv || hdr <= 0 || hdr%dr != 0 || hdn%(hdr/dr) != 0 || wt%(hdr/dr) != 0 {
					continue
				}
				h := hdr / dr
				dn, dv := hdn/h, wt/h
				for _, c := range vals {
					if c == q || c == kv || c.shape[2] <= dr {
						continue
					}
					for _, layout := range []exec.RopeLayout{exec.RopeInterleaved, exec.RopeHalf} {
						qq, kk, vv := s.latentOperands(q, kv, c, tb, layout, h, dn, dr, dv)
						if qq == nil {
							continue
						}
						for _, mask := range []exec.MaskKind{exec.MaskCausal, exec.MaskNone} {
							p := exec.AttentionParams{Heads: h, KVHeads: h, Mask: mask}
							full := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{qq, kk, vv, nil, nil}, out: t.format})
							if full == nil {
								continue
							}
							d := dn + dr
							heads := s.reshape(full, []int{b, n, h, d})
							cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: dv}, args: []*val{heads}, out: t.format, label: "values' width"})
							if cut == nil {
								continue
							}
							c := &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{cut}, out: t.format,
								label: fmt.Sprintf("latent attention heads=%d nope=%d rope_dim=%d v=%d rope=%s causal=%v", h, dn, dr, dv, layout, mask == exec.MaskCausal)}
							cands = append(cands, c)
							chosen[c] = attnChoice{q: qq, k: kk, v: vv, headDim: d, rope: layout, params: p, label: c.label}
						}
					}
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "attention", candidates: ev}
		ch := chosen[v.from]
		ch.score, ch.result = relRMS(t.format, v.data, t.data), v
		s.attn = append(s.attn, attnRecord{choice: ch, scope: sc.module, boundary: t.origin, candidates: ev})
	}
	return v
}

// latentOperands builds the q, k and v [B, S, H·(dn+dr)] of latentAttention.
func (s *synth) latentOperands(q, kv, c *val, tb [2]*val, layout exec.RopeLayout, h, dn, dr, dv int) (*val, *val, *val) {
	b, n := q.shape[0], q.shape[1]
	d := dn + dr
	cut := func(x *val, axis, from, to int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: axis, Start: from, End: to}, args: []*val{x}, out: x.format})
	}
	join := func(x, y *val, label string) *val {
		if x == nil || y == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 3}, args: []*val{x, y}, out: x.format, label: label})
	}
	q4 := s.reshape(q, []int{b, n, h, d})
	kv4 := s.reshape(kv, []int{b, n, h, dn + dv})
	if q4 == nil || kv4 == nil {
		return nil, nil, nil
	}
	qpe := s.reshape(s.rotate(s.reshape(cut(q4, 3, dn, d), []int{b, n, h * dr}), tb, layout, h, dr), []int{b, n, h, dr})
	qq := s.reshape(join(cut(q4, 3, 0, dn), qpe, "q: nope, rope"), []int{b, n, h * d})
	kpe := s.rotate(cut(c, 2, c.shape[2]-dr, c.shape[2]), tb, layout, 1, dr)
	if kpe == nil {
		return nil, nil, nil
	}
	kpe = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: h, Axis: 2}, args: []*val{s.reshape(kpe, []int{b, n, 1, dr})}, out: kpe.format, label: "one rotated key for every head"})
	kk := s.reshape(join(cut(kv4, 3, 0, dn), kpe, "k: nope, rope"), []int{b, n, h * d})
	vv := cut(kv4, 3, dn, dn+dv)
	if dv < d && vv != nil {
		zeros := &val{shape: []int{b, n, h, d - dv}, data: make([]float32, b*n*h*(d-dv)), format: vv.format, origin: kv.origin + "/padding",
			constNote: "zeros padding the values to the queries' head width (made from the request's shape)"}
		vv = join(vv, zeros, "v padded")
	}
	vv = s.reshape(vv, []int{b, n, h * d})
	if qq == nil || kk == nil || vv == nil {
		return nil, nil, nil
	}
	return qq, kk, vv
}

// gatedAttention explains t as attention times a gate of the scope
// (o_proj(attention · σ(gate)): gated attention): for each recent value
// of t's shape the scope made and the gate functions, attention is
// searched for t divided by the gate, and the product must then
// reproduce t itself.
func (s *synth) gatedAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	tried := 0
	for _, g := range recentFirst(sc.vals) {
		if tried == 2 {
			break
		}
		if g.opaque || !sc.own[g] || !slices.Equal(g.shape, t.shape) {
			continue
		}
		tried++
		if w := s.attentionTimesGate(t, sc, g); w != nil {
			return w
		}
	}
	return nil
}

// attentionTimesGate is gatedAttention's search for one gate value g of
// t's shape.
func (s *synth) attentionTimesGate(t *val, sc *scope, g *val) *val {
	for _, f := range []exec.ActKind{exec.ActSigmoid} {
		proxy := &val{shape: t.shape, data: make([]float32, len(t.data)), format: t.format, origin: t.origin, reshapedFrom: true}
		ok := true
		for i, x := range g.data {
			a := exec.Activate(f, x, 0)
			if !(a > 1e-6) {
				ok = false
				break
			}
			proxy.data[i] = t.data[i] / a
		}
		if !ok {
			continue
		}
		a := s.attention(proxy, sc)
		if a == nil {
			continue
		}
		gate := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{g}, out: t.format, label: "gate " + f.String()})
		if gate == nil {
			continue
		}
		if w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{a, gate}, out: t.format, label: "attention · " + f.String() + "(gate)"}}); w != nil {
			return w
		}
	}
	return nil
}

// maxCutGates bounds the gates cutGatedAttention searches attention for.
const maxCutGates = 8

// cutGatedAttention is gatedAttention with the gate a cut of a wider value
// of the scope [B, L, 2·W] that no call holds on its own: each head's
// second half (a projection read per head as [q | gate], heads of every
// power-of-two width) or the value's second half. One of glue's late
// forms.
func (s *synth) cutGatedAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	tried := 0
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || v.data == nil || v.param || !slices.Equal(v.shape, []int{bs, l, 2 * w}) {
			continue
		}
		var gates []*val
		for d := minHeadDim; d <= maxHeadDim && d <= w; d *= 2 {
			if w%d != 0 {
				continue
			}
			r := s.reshape(v, []int{bs, l, w / d, 2 * d})
			g := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: d, End: 2 * d}, args: []*val{r}, out: v.format, label: fmt.Sprintf("each head's second half (heads of %d)", d)})
			gates = append(gates, s.reshape(g, t.shape))
		}
		gates = append(gates, s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: w, End: 2 * w}, args: []*val{v}, out: v.format, label: "the second half"}))
		for _, g := range gates {
			if g == nil {
				continue
			}
			if tried++; tried > maxCutGates {
				return nil
			}
			if r := s.attentionTimesGate(t, sc, g); r != nil {
				return r
			}
		}
	}
	return nil
}

// widerAttention is attention, then gatedAttention, with the six best
// first-stage choices refined instead of three: where q is scaled by a
// constant far from 1 (a temperature after a weightless q norm) the right
// operands score worse at 1/√d than wrong ones until their scale is
// fitted. One of glue's late forms.
func (s *synth) widerAttention(t *val, sc *scope) *val {
	s.wideRefine = true
	defer func() { s.wideRefine = false }()
	if v := s.attention(t, sc); v != nil {
		return v
	}
	return s.gatedAttention(t, sc)
}

// minScaleGain is the factor by which some temperature must lower a
// first-stage choice's error for the wider refinement to run: a right
// choice at a wrong temperature gains ×40–50 (MuseGlimmer's q × 3.87),
// while over unrelated operands no temperature gains ×1.4 (the mutated
// traces of TestDiscoverProperty).
const minScaleGain = 4

// rankByScale re-sorts the first stage's choices (the 96 best: at 1/√d
// the right operands of a real-width q × 3.87 ranked past the 24th) by their
// best score over a few temperatures (the scale times ½, 2, 4 and 8),
// so that refinement, which fits the scale on the best six, reaches
// operands that only a scale far from 1/√d makes right (widerAttention).
//
// It reports the largest factor by which another temperature lowered a
// choice's error: near 1, no temperature changed what the first stage
// saw, and the wider refinement has nothing to add.
func (s *synth) rankByScale(all []attnChoice, t *val) float64 {
	n := min(96, len(all))
	gain := 1.0
	for i := range all[:n] {
		ch := &all[i]
		base := ch.params.Scale
		if base == 0 {
			base = 1 / float32(math.Sqrt(float64(ch.headDim)))
		}
		first := ch.score
		for _, f := range []float32{0.5, 2, 4, 8} {
			p := ch.params
			p.Scale = base * f
			e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{ch.q, ch.k, ch.v, nil, nil, ch.sinks}, out: t.format}
			if ch.q.shape[1] != t.shape[1] {
				continue
			}
			if _, sc := s.ev.score(e, t); sc < ch.score {
				ch.score, ch.result = sc, nil // the refinement reruns it whole
			}
		}
		if ch.score > 0 {
			gain = max(gain, first/ch.score)
		}
	}
	sortByScore(all[:n])
	return gain
}
