package synth

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitAttentionPool explains a leaf t [B, O] made from tokens x [B, L, C]
// and a table P [L+1, C] (the call's parameter) as attention pooling: the
// mean token put before the tokens, P added, one query from the first row
// against keys and values from every row, then an output projection. The
// four projections are linears of sub-modules the call does not call
// (the attention is a function of their weights): which is q, k, v and
// out, and the head count, are searched.
func (s *synth) fitAttentionPool(module string, x *val, params []*val, t *val) *val {
	if len(x.shape) != 3 || len(t.shape) != 2 || len(params) != 1 || t.shape[0] != x.shape[0] {
		return nil
	}
	B, L, C, O := x.shape[0], x.shape[1], x.shape[2], t.shape[1]
	table := params[0]
	if !slices.Equal(table.shape, []int{L + 1, C}) {
		return nil
	}
	lins := s.uncalledLinears(module)
	if len(lins) != 4 {
		return nil
	}
	mean := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{x, nil}, out: x.format, label: "mean token"})
	joined := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{s.reshape(mean, []int{B, 1, C}), x}, out: x.format, label: "mean token first"})
	if joined == nil {
		return nil
	}
	xp := s.derive(&expr{op: program.OpAdd, args: []*val{joined, table}, out: x.format, label: "positions added"})
	first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: 1}, args: []*val{xp}, out: x.format})
	if xp == nil || first == nil {
		return nil
	}
	lin := func(in *val, l [2]*val) *val {
		return s.derive(&expr{op: program.OpLinear, args: []*val{in, l[0], l[1]}, out: t.format})
	}
	var cands []*expr
	for out := range lins {
		if lins[out][0].shape[0] != O || lins[out][0].shape[1] != C {
			continue
		}
		var rest []int
		for i := range lins {
			if i != out && slices.Equal(lins[i][0].shape, []int{C, C}) {
				rest = append(rest, i)
			}
		}
		if len(rest) != 3 {
			continue
		}
		for _, p := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
			q, k, v := lin(first, lins[rest[p[0]]]), lin(xp, lins[rest[p[1]]]), lin(xp, lins[rest[p[2]]])
			if q == nil || k == nil || v == nil {
				continue
			}
			for d := minHeadDim; d <= maxHeadDim && d <= C; d *= 2 {
				if C%d != 0 {
					continue
				}
				a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: C / d, KVHeads: C / d}},
					args: []*val{q, k, v, nil, nil}, out: t.format})
				if a == nil {
					continue
				}
				o := &expr{op: program.OpLinear, args: []*val{s.reshape(a, []int{B, C}), lins[out][0], lins[out][1]}, out: t.format,
					label: fmt.Sprintf("attention pool heads=%d", C/d)}
				cands = append(cands, o)
			}
		}
	}
	return s.bestFit(t, cands, "attention")
}

// uncalledSubs are module's sub-modules that no call of the trace holds
// a parameter of (a forward that uses a child's weights itself:
// F.conv1d(x, self.conv1d.weight, ...)), each with its parameters' names.
func (s *synth) uncalledSubs(module string) map[string][]string {
	module, _, _ = strings.Cut(module, "#")
	if s.calledParams == nil {
		s.calledParams = map[string]bool{}
		for _, c := range s.tr.Manifest.Calls {
			for _, p := range c.Params {
				s.calledParams[p] = true
			}
		}
	}
	subs := map[string][]string{}
	for name := range s.tr.Manifest.Params {
		if s.calledParams[name] || !strings.HasPrefix(name, module+".") {
			continue
		}
		if i := strings.LastIndexByte(name, '.'); i > len(module) {
			subs[name[:i]] = append(subs[name[:i]], name)
		}
	}
	for _, names := range subs {
		slices.Sort(names)
	}
	return subs
}

// uncalledParams are the parameters of module's uncalled sub-modules
// (uncalledSubs), in address order.
func (s *synth) uncalledParams(module string) []*val {
	subs := s.uncalledSubs(module)
	var out []*val
	for _, sub := range slices.Sorted(maps.Keys(subs)) {
		for _, name := range subs[sub] {
			if v, err := s.param(name); err == nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// uncalledLinears are the linears of module's sub-modules that no call of
// the trace holds, in address order: per sub-module (the address a
// parameter sits at, names used only to address), a 2-D parameter is the
// weight [out, in] and a 1-D one of out values its bias, read off their
// shapes; a sub-module holding anything else is not a linear.
func (s *synth) uncalledLinears(module string) [][2]*val {
	subs := s.uncalledSubs(module)
	var out [][2]*val
	for _, sub := range slices.Sorted(maps.Keys(subs)) {
		var w, b *val
		for _, name := range subs[sub] {
			v, err := s.param(name)
			if err != nil {
				return nil
			}
			switch {
			case len(v.shape) == 2 && w == nil:
				w = v
			case len(v.shape) == 1 && b == nil:
				b = v
			default:
				w = nil // more than a weight and a bias: not a linear
				b = nil
			}
		}
		if w == nil || b != nil && b.shape[0] != w.shape[0] {
			continue
		}
		out = append(out, [2]*val{w, b})
	}
	return out
}

// kvAttention explains t [B, C] or [B, N, C] as attention of the scope's
// queries (a value [B, C], one query per batch row, or [B, N, C]) over the
// keys and values of L rows the scope made as one projection's two halves
// (a value [B, L, 2C]: a perceiver's to_kv, a pooler's) or, for one query,
// also as two values [B, L, C]: an attention pooler whose query is a
// pooled token, a cross-attention to a fused key/value projection. Without
// a mask, or under a 0/1 key mask of the scope over all L keys or over the
// last or first n < L, joined with ones for the rest (the pooled token put
// before masked tokens attends); the head width searched from 1. Tried
// where every other attention form failed.
func (s *synth) kvAttention(t *val, sc *scope) *val {
	if len(t.shape) != 2 && len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	b, c := t.shape[0], t.shape[len(t.shape)-1]
	n := 1
	if len(t.shape) == 3 {
		n = t.shape[1]
	}
	var q []*val
	var kv [][2]*val
	for _, v := range recentFirst(sc.vals) {
		if v.opaque || !sc.own[v] || v.integral() {
			continue
		}
		switch {
		case slices.Equal(v.shape, t.shape) && (n == 1 || linearResult(v)):
			q = append(q, v)
		case len(v.shape) == 3 && v.shape[0] == b && v.shape[1] > 1 && v.shape[2] == 2*c && (n == 1 || linearResult(v)):
			// many queries: keys read as a projection made them, of
			// another length (a cross-attention's, a perceiver's) or of
			// the queries' own (a self-attention's q beside a fused kv)
			kv = append(kv, s.halves(v, c)...)
		}
	}
	for _, k := range sc.vals {
		for _, v := range sc.vals {
			if n == 1 && k != v && sc.own[k] && sc.own[v] && !k.opaque && !v.opaque && len(k.shape) == 3 && slices.Equal(k.shape, v.shape) && k.shape[0] == b && k.shape[1] > 1 && k.shape[2] == c && linearResult(v) {
				kv = append(kv, [2]*val{k, v})
			}
		}
	}
	if len(q) == 0 || len(kv) == 0 {
		return nil
	}
	var cands []*expr
	for _, p := range kv {
		L := p[0].shape[1]
		masks := []*val{nil}
		for _, m := range sc.vals {
			if m.opaque || !m.integral() || allOnes(m) || !zeroOne(m) || len(m.shape) == 0 {
				continue
			}
			nm := m.shape[len(m.shape)-1] // the keys the mask covers
			if m.numel() != b*nm || nm > L {
				continue
			}
			mk := s.reshape(m, []int{b, 1, nm})
			if nm == L {
				masks = append(masks, mk)
				continue
			}
			ones := s.ones(b, L-nm)
			for _, args := range [][]*val{{ones, mk}, {mk, ones}} {
				if j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: args, out: m.format, label: "key mask joined with ones"}); j != nil {
					masks = append(masks, j)
				}
			}
		}
		for _, qv := range q {
			q3 := s.reshape(qv, []int{b, n, c})
			for d := 1; d <= maxHeadDim && d <= c; d *= 2 {
				if c%d != 0 {
					continue
				}
				for _, m := range masks {
					ap := exec.AttentionParams{Heads: c / d, KVHeads: c / d}
					if m != nil {
						ap.Mask = exec.MaskExplicit
					}
					a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: ap}, args: []*val{q3, p[0], p[1], m, nil}, out: t.format})
					if a == nil {
						continue
					}
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{a}, out: t.format,
						label: fmt.Sprintf("fused kv heads=%d mask=%v", c/d, m != nil)})
				}
			}
		}
	}
	return s.bestFit(t, cands, "attention")
}
