package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// dynamicBiasAttention explains t [B, S, H·D] as attention whose scores
// carry a bias computed from values of the scope: a value the scope made
// with one column per key head ([B, Sk, KV], a projection of the values,
// say), through an inner function, times a parameter of the scope with
// one number per key head ([KV], found by shape), through an outer
// function, laid out per head as [B, H, 1, Sk] (each key head's column
// for the query heads it serves) and added to every query's scores. The
// forms are outer(a · inner(x)) for inner in identity and softplus and
// outer in identity and exp, all offered at once to the attention search
// as biases of the scope (its refinement tries each on its best choices),
// once per head count the RoPE tables or the head widths allow. Tried
// after every other attention form failed: each head count runs a whole
// attention search.
func (s *synth) dynamicBiasAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	width := t.shape[2]
	var headDims []int
	for _, tb := range s.ropeTables(sc) {
		headDims = append(headDims, tb[0].shape[len(tb[0].shape)-1])
	}
	for d := minHeadDim; d <= maxHeadDim && d <= width; d *= 2 {
		headDims = append(headDims, d)
	}
	for _, x := range recentFirst(sc.vals) {
		if x.opaque || !sc.own[x] || len(x.shape) != 3 || x.shape[0] != t.shape[0] {
			continue
		}
		kv := x.shape[2]
		if kv*minHeadDim > width || width%kv != 0 {
			continue
		}
		for _, a := range sc.vals {
			if !a.param || len(a.shape) != 1 || a.shape[0] != kv {
				continue
			}
			var forms []*val
			for _, inner := range []string{"", "softplus"} {
				for _, outer := range []exec.ActKind{exec.ActIdentity, exec.ActExp} {
					if b := s.dynamicBias(x, a, inner, outer); b != nil {
						forms = append(forms, b)
					}
				}
			}
			tried := map[int]bool{}
			for _, d := range headDims {
				heads := width / d
				if width%d != 0 || heads%kv != 0 || tried[heads] {
					continue
				}
				tried[heads] = true
				// every form at once: the search's refinement tries each
				// bias on its best choices
				sub := *sc
				sub.vals = nil
				for _, b := range forms {
					if hb := s.perHead(b, heads); hb != nil {
						sub.vals = append(sub.vals, hb)
					}
				}
				sub.vals = append(sub.vals, sc.vals...)
				if v := s.attention(t, &sub); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// dynamicBias is outer(a · inner(x)) for x [B, Sk, KV] and a [KV]: inner
// "" (identity) or "softplus", each step stored in x's format.
func (s *synth) dynamicBias(x, a *val, inner string, outer exec.ActKind) *val {
	f := x.format
	y := x
	label := x.origin
	if inner == "softplus" {
		y, label = s.softplus(x), "softplus("+label+")"
	}
	y = s.derive(&expr{op: program.OpMul, args: []*val{y, a}, out: f, label: a.origin + " · " + label})
	label = a.origin + " · " + label
	if y == nil || outer == exec.ActIdentity {
		return y
	}
	return s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: outer}, args: []*val{y}, out: f, label: fmt.Sprintf("%s(%s)", outer, label)})
}

// softplus is log(1 + exp(x)) written stably in ops every backend has,
// max(x, 0) + log(1 + exp(min(x, −x))), in f32 and stored once in x's
// format.
func (s *synth) softplus(x *val) *val {
	neg := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(-1)}, out: precision.F32, label: "−x"})
	m := s.derive(&expr{op: program.OpMinimum, args: []*val{x, neg}, out: precision.F32, label: "−|x|"})
	e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{m}, out: precision.F32, label: "exp(−|x|)"})
	l := s.derive(&expr{op: program.OpAdd, args: []*val{e, s.constant(1)}, out: precision.F32, label: "1 + exp(−|x|)"})
	l = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActLog}, args: []*val{l}, out: precision.F32, label: "log(1 + exp(−|x|))"})
	p := s.derive(&expr{op: program.OpMaximum, args: []*val{x, s.constant(0)}, out: precision.F32, label: "max(x, 0)"})
	return s.derive(&expr{op: program.OpAdd, args: []*val{p, l}, out: x.format, label: "softplus"})
}

// perHead lays b [B, Sk, KV] out as an attention bias [B, H, 1, Sk]: key
// head j's column for query heads j·H/KV … (j+1)·H/KV − 1.
func (s *synth) perHead(b *val, heads int) *val {
	bs, sk, kv := b.shape[0], b.shape[1], b.shape[2]
	p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{b}, out: b.format, label: "bias per key head"})
	if p == nil {
		return nil
	}
	if heads == kv {
		return s.reshape(p, []int{bs, heads, 1, sk})
	}
	r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: heads / kv, Axis: 2}, args: []*val{s.reshape(p, []int{bs, kv, 1, 1, sk})}, out: b.format, label: "bias per query head"})
	if r == nil || !slices.Equal(r.shape, []int{bs, kv, heads / kv, 1, sk}) {
		return nil
	}
	return s.reshape(r, []int{bs, heads, 1, sk})
}
