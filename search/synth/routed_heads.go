package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// routedHeadsAttention explains t [B, S, D] as attention whose query and
// output projections are experts a router picks per token over keys and
// values every expert shares (a mixture of attention heads):
//
//	t = Σ_e G[t, e] · W_out[e] · attention(rope(W_in[e]·x), rope(k), v) + b
//
// G the top-k weights of a router's logits [T, E] the scope holds, laid
// densely over the experts (zero where a token did not choose e; k read
// off the rows an expert call of the scope receives, T·k, or 1, 2); W_in
// [E, H, D] and W_out [E, D, H] rank-3 parameters of the scope's calls;
// k and v the halves of a value [B, S, 2H] of the scope, in either order;
// x an argument [B, S, D]; b a vector [D] of the scope (its own or an
// uncalled sub-module's) or none; RoPE from the scope's tables, either
// layout, or none; causal or no mask. Every expert is computed: the
// queries of all E as E·H/d heads over the H/d kv heads repeated E times
// (each expert's j-th head reads kv head j), the heads' outputs scaled by
// G, then one linear by W_out laid [D, E·H]. The sum does not depend on
// the order the forward visits the chosen experts in, so an expert-sorted
// dispatch (rows grouped by expert, added back by index) is this same
// sum. One of glue's late forms.
func (s *synth) routedHeadsAttention(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	bs, l, dm := t.shape[0], t.shape[1], t.shape[2]
	tokens := bs * l
	usable := func(v *val) bool { return v != nil && !v.opaque && v.data != nil }
	var rank3 []*val
	for _, name := range s.subtreeParams(sc.call) {
		if p, err := s.param(name); err == nil && len(p.shape) == 3 {
			rank3 = append(rank3, p)
		}
	}
	type pair struct{ in, out *val }
	var projs []pair
	for _, a := range rank3 {
		for _, b := range rank3 {
			e, h := a.shape[0], a.shape[1]
			if a != b && a.shape[2] == dm && slices.Equal(b.shape, []int{e, dm, h}) && e > 1 {
				projs = append(projs, pair{a, b})
			}
		}
	}
	if len(projs) == 0 {
		return nil
	}
	var x *val
	for _, v := range recentFirst(vals) {
		if usable(v) && sc.arg[v] && slices.Equal(v.shape, t.shape) {
			x = v
			break
		}
	}
	if x == nil {
		return nil
	}
	var biases []*val
	for _, v := range vals {
		if usable(v) && v.param && slices.Equal(v.shape, []int{dm}) {
			biases = append(biases, v)
		}
	}
	// each structure (heads, rope, k and v, mask) scored with every k's
	// first router and every bias; then the best structure with every
	// router of its k
	type build struct {
		att   *val // [B, S, E, H]: every expert's heads
		e, h  int
		wo    *val
		gates []denseGate
		label string
	}
	var builds []build
	for _, pr := range projs {
		e, h := pr.in.shape[0], pr.in.shape[1]
		gates := s.denseRoutings(sc, vals, tokens, e)
		if len(gates) == 0 {
			continue
		}
		var kvs [][2]*val
		for _, v := range vals {
			if !usable(v) || v.param || !slices.Equal(v.shape, []int{bs, l, 2 * h}) {
				continue
			}
			lo := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: h}, args: []*val{v}, out: v.format, label: "first half"})
			hi := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: h, End: 2 * h}, args: []*val{v}, out: v.format, label: "second half"})
			if lo != nil && hi != nil {
				kvs = append(kvs, [2]*val{lo, hi}, [2]*val{hi, lo})
			}
		}
		if len(kvs) == 0 {
			continue
		}
		q := s.derive(&expr{op: program.OpLinear, args: []*val{x, s.reshape(pr.in, []int{e * h, dm}), nil}, out: t.format, label: "every expert's queries"})
		wo := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{pr.out}, out: pr.out.format, label: "experts' output projections side by side"}), []int{dm, e * h})
		if q == nil || wo == nil {
			continue
		}
		type rotation struct {
			tb     [2]*val
			layout exec.RopeLayout
		}
		rots := []rotation{{}}
		for _, tb := range s.ropeTables(sc) {
			for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
				rots = append(rots, rotation{tb, layout})
			}
		}
		for d := minHeadDim; d <= maxHeadDim && d <= h; d *= 2 {
			if h%d != 0 {
				continue
			}
			for _, rot := range rots {
				qr, label := q, "no rope"
				if rot.tb[0] != nil {
					if r := rot.tb[0].shape[len(rot.tb[0].shape)-1]; r > d {
						continue
					}
					qr, label = s.rotate(q, rot.tb, rot.layout, e*h/d, d), rot.layout.String()
				}
				for i, kv := range kvs {
					k := kv[0]
					if rot.tb[0] != nil {
						k = s.rotate(k, rot.tb, rot.layout, h/d, d)
					}
					kr := s.reshape(s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: e, Axis: 2}, args: []*val{s.reshape(k, []int{bs, l, 1, h})}, out: k.format, label: "keys for every expert"}), []int{bs, l, e * h})
					vr := s.reshape(s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: e, Axis: 2}, args: []*val{s.reshape(kv[1], []int{bs, l, 1, h})}, out: kv[1].format, label: "values for every expert"}), []int{bs, l, e * h})
					if qr == nil || kr == nil || vr == nil {
						continue
					}
					for _, mask := range []exec.MaskKind{exec.MaskCausal, exec.MaskNone} {
						p := exec.AttentionParams{Heads: e * h / d, KVHeads: e * h / d, Mask: mask}
						att := s.reshape(s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{qr, kr, vr, nil, nil, nil}, out: t.format, label: "every expert's heads"}), []int{bs, l, e, h})
						if att == nil {
							continue
						}
						order := "k, v"
						if i%2 == 1 {
							order = "v, k"
						}
						builds = append(builds, build{att, e, h, wo, gates, fmt.Sprintf("routed heads attention: %d experts [%s, %s], heads of %d, %s, [%s] halves, mask %v", e, pr.in.origin, pr.out.origin, d, label, order, mask)})
					}
				}
			}
		}
	}
	gated := func(b build, g denseGate, bias *val) *expr {
		scaled := s.reshape(s.derive(&expr{op: program.OpMul, args: []*val{b.att, s.reshape(g.v, []int{bs, l, b.e, 1})}, out: t.format, label: "each expert's heads times its weight"}), []int{bs, l, b.e * b.h})
		if scaled == nil {
			return nil
		}
		return &expr{op: program.OpLinear, args: []*val{scaled, b.wo, bias}, out: t.format, label: fmt.Sprintf("%s, %s, bias %s", b.label, g.label, originOr(bias, "none"))}
	}
	var cands []*expr
	var of []int
	for i, b := range builds {
		seen := map[int]bool{}
		for _, g := range b.gates {
			k := g.k
			if seen[k] {
				continue
			}
			seen[k] = true
			for _, bias := range append([]*val{nil}, biases...) {
				if c := gated(b, g, bias); c != nil {
					cands, of = append(cands, c), append(of, i)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, ev := s.best(t, cands)
	if v == nil {
		top := 0
		for i := range ev {
			if ev[i].Score < ev[top].Score {
				top = i
			}
		}
		b := builds[of[top]]
		var more []*expr
		for _, g := range b.gates {
			for _, bias := range append([]*val{nil}, biases...) {
				if c := gated(b, g, bias); c != nil {
					more = append(more, c)
				}
			}
		}
		v, _ = s.best(t, more)
	}
	return v
}

// denseGate is a router's weights laid densely over its experts [T, E].
type denseGate struct {
	v     *val
	k     int
	label string
}

// denseRoutings are the router weights [T, E], zero where a token did not
// choose an expert, that a scope holding a router's logits [T, E] may
// route by: each top-k routing of them, k read off the rows a call of
// the scope receives (T·k) or 1, 2.
func (s *synth) denseRoutings(sc *scope, vals []*val, tokens, e int) []denseGate {
	var logits *val
	for _, v := range recentFirst(vals) {
		if !v.opaque && !v.integral() && v.data != nil && len(v.shape) >= 1 && v.shape[len(v.shape)-1] == e && v.numel() == tokens*e {
			logits = s.reshape(v, []int{tokens, e})
			break
		}
	}
	if logits == nil {
		return nil
	}
	var ks []int
	for _, ch := range s.children(sc.call) {
		for _, gc := range append([]trace.Call{ch}, s.children(ch)...) {
			for _, p := range gc.Tensors {
				if info, err := s.tr.Info(p.Key); err == nil && !trace.IsResult(p.Name) && len(info.Shape) == 2 && info.Shape[0]%tokens == 0 && info.Shape[0] > tokens {
					if k := info.Shape[0] / tokens; k < e && !slices.Contains(ks, k) {
						ks = append(ks, k)
					}
				}
			}
		}
	}
	for _, k := range []int{1, 2} {
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	var out []denseGate
	for _, k := range ks {
		if k >= e {
			continue
		}
		for _, r := range routeExprs(logits, nil, k, f32, " dense") {
			r.attrs.Route.Dense = true
			if w := s.derive(r); w != nil {
				out = append(out, denseGate{w, k, r.label})
			}
		}
	}
	return out
}
