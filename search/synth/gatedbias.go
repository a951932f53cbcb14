package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// gatedBiasAttention explains t [B, S, E] as self-attention whose four
// projections are linears of sub-modules the call never calls (torch's
// F.multi_head_attention_forward over q_proj, k_proj, v_proj and
// out_proj's weights), its scores plus a position bias gated per head and
// query: WavLM's gated relative position bias. The gate is read from a
// value r [B, H, S, 2m] of the scope (a linear of each head's slice of the
// input): its two halves' sums a' and b', then σ(a')·(σ(b')·c − 1) + 2,
// c a parameter of H entries; the bias is the gate times a value of the
// scope holding H [S, S] tables (the position bias the first layer makes
// from its bucket table, [S, S, H] or [B·H, S, S], and hands to the next).
// Which linear is q, k, v and the output is not known from names: every
// assignment is scored. Tried after the plain attention forms.
func (s *synth) gatedBiasAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	b, n, e := t.shape[0], t.shape[1], t.shape[2]
	var lins [][2]*val
	for _, l := range s.directUncalledLinears(sc.module) {
		if slices.Equal(l[0].shape, []int{e, e}) {
			lins = append(lins, l)
		}
	}
	if len(lins) != 4 {
		return nil
	}
	var xs []*val
	for _, v := range sc.vals {
		if sc.arg[v] && !v.opaque && slices.Equal(v.shape, t.shape) {
			xs = append(xs, v)
		}
	}
	gates := s.headGates(sc, b, n, e)
	if len(xs) == 0 || len(gates) == 0 {
		return nil
	}
	var cands []*expr
	chosen := map[*expr]attnChoice{}
	for _, g := range gates {
		h := g.shape[1]
		for _, pb := range s.positionBiases(sc, b, h, n) {
			bias := s.derive(&expr{op: program.OpMul, args: []*val{g, pb}, out: t.format, label: "gate · position bias"})
			if bias == nil {
				continue
			}
			for _, x := range xs {
				for _, perm := range permutations4() {
					var qkv [3]*val
					for i := range 3 {
						l := lins[perm[i]]
						qkv[i] = s.derive(&expr{op: program.OpLinear, args: []*val{x, l[0], l[1]}, out: t.format, label: []string{"q", "k", "v"}[i] + " by an uncalled linear"})
					}
					p := exec.AttentionParams{Heads: h, KVHeads: h}
					a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{qkv[0], qkv[1], qkv[2], nil, bias, nil}, out: t.format, label: "attention, gated position bias"})
					if a == nil {
						continue
					}
					o := lins[perm[3]]
					label := fmt.Sprintf("attention of %d heads over uncalled projections %v, a gated position bias", h, perm)
					ex := &expr{op: program.OpLinear, args: []*val{a, o[0], o[1]}, out: t.format, label: label}
					cands = append(cands, ex)
					chosen[ex] = attnChoice{q: qkv[0], k: qkv[1], v: qkv[2], headDim: e / h, params: p, label: label, rows: -1, result: a}
				}
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	ch := chosen[v.from]
	ch.score = relRMS(t.format, v.data, t.data)
	v.fit = &leafFit{kind: "attention", candidates: ev}
	s.attn = append(s.attn, attnRecord{choice: ch, scope: sc.module, boundary: t.origin, candidates: ev})
	return v
}

// headGates are the gates [B, H, S, 1] made from each value r [B, H, S,
// 2m] of the scope (H dividing the width e): a' and b' the sums of r's two
// halves of m, in order, then σ(a')·(σ(b')·c − 1) + 2 with c each
// parameter of H entries the scope holds, laid [1, H, 1, 1].
func (s *synth) headGates(sc *scope, b, n, e int) []*val {
	var out []*val
	for _, r := range sc.vals {
		if r.opaque || r.integral() || len(r.shape) != 4 || r.shape[0] != b || r.shape[2] != n || r.shape[3] < 2 || r.shape[3]%2 != 0 {
			continue
		}
		h, m := r.shape[1], r.shape[3]/2
		if h < 1 || e%h != 0 {
			continue
		}
		var sums [2]*val
		for half := range 2 {
			for j := range m {
				col := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: half*m + j, End: half*m + j + 1}, args: []*val{r}, out: r.format})
				if sums[half] == nil {
					sums[half] = col
				} else {
					sums[half] = s.derive(&expr{op: program.OpAdd, args: []*val{sums[half], col}, out: r.format, label: "a half's sum"})
				}
			}
		}
		if sums[0] == nil || sums[1] == nil {
			continue
		}
		sa := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{sums[0]}, out: r.format, label: "σ(a')"})
		sb := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{sums[1]}, out: r.format, label: "σ(b')"})
		for _, c := range sc.vals {
			if !c.param || c.numel() != h || c.integral() {
				continue
			}
			cc := s.reshape(c, []int{1, h, 1, 1})
			bc := s.derive(&expr{op: program.OpMul, args: []*val{sb, cc}, out: r.format, label: "σ(b')·c"})
			less := s.derive(&expr{op: program.OpSub, args: []*val{bc, s.constant(1)}, out: r.format, label: "σ(b')·c − 1"})
			prod := s.derive(&expr{op: program.OpMul, args: []*val{sa, less}, out: r.format, label: "σ(a')·(σ(b')·c − 1)"})
			if g := s.derive(&expr{op: program.OpAdd, args: []*val{prod, s.constant(2)}, out: r.format, label: "the gate"}); g != nil {
				out = append(out, g)
			}
		}
	}
	return out
}

// positionBiases are the scope's float values holding H tables [S, S], laid
// [B, H, S, S]: [S, S, H] (an embedding of bucket ids) moved heads first,
// [H, S, S], [1, H, S, S] or [B·H, S, S] as they are.
func (s *synth) positionBiases(sc *scope, b, h, n int) []*val {
	var out []*val
	want := []int{b, h, n, n}
	for _, v := range sc.vals {
		if v.opaque || v.integral() {
			continue
		}
		var w *val
		switch {
		case slices.Equal(v.shape, []int{n, n, h}) && n != h:
			w = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1}}, args: []*val{v}, out: v.format, label: "heads first"})
			if b > 1 {
				w = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: b, Axis: 0}, args: []*val{w}, out: v.format, label: "per batch row"})
			}
			w = s.reshape(w, want)
		case v.numel() == b*h*n*n && v.shape[len(v.shape)-1] == n && v.shape[len(v.shape)-2] == n:
			w = s.reshape(v, want)
		}
		if w != nil {
			out = append(out, w)
		}
	}
	return out
}

// permutations4 are the 24 orders of 0..3.
func permutations4() [][4]int {
	var out [][4]int
	for a := range 4 {
		for b := range 4 {
			for c := range 4 {
				for d := range 4 {
					if a != b && a != c && a != d && b != c && b != d && c != d {
						out = append(out, [4]int{a, b, c, d})
					}
				}
			}
		}
	}
	return out
}
