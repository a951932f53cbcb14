package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// Explicit attention: a model that computes attention step by step and
// hands a step to a module of its own (talking heads' linears over the
// heads axis, a dropout module on the probabilities) puts the scores or
// the probabilities on a boundary, [B, H, Sq, Sk] in some axis order.
// These forms explain such boundaries from the scope's operands:
// scoresOf the scores q·kᵀ (scaled before or after, or not; with the
// softmax after, the probabilities), softmaxOf the probabilities of a
// scores value the scope holds, and weighedValues the output P·v of
// probabilities the scope holds. The scores and probabilities are
// explained only where a module with parameters reads them (a dropout's
// argument is left uncomputed: the attention op makes its output without
// it, and computing it would cost an S² product per layer).

// explicitScales are how a step-by-step attention scales its scores: q
// times 1/√D before the product, the product times it, or neither (a
// scale folded elsewhere).
var explicitScales = []string{"q", "scores", "none"}

// scoresOf explains t [.., 4 axes] as the scores (or, softmaxed, the
// probabilities) of heads of q and k among the scope's operands, laid out
// in t's axis order, a position bias made from a parameter table added
// or not; where none of the scope's rows fits, its maps read as rows (q
// and k made by convolutions: EfficientFormer v2's talking heads).
func (s *synth) scoresOf(t *val, sc *scope) *val {
	if len(t.shape) != 4 || t.integral() || !s.readerParams {
		return nil
	}
	if v := s.scoresIn(t, sc); v != nil {
		return v
	}
	if m := s.mapsAsRows(sc, t.shape[0]); m != nil {
		return s.scoresIn(t, m)
	}
	return nil
}

// scoresIn is scoresOf over one reading of the scope.
func (s *synth) scoresIn(t *val, sc *scope) *val {
	b := t.shape[0]
	var cands []*expr
	for _, wq := range s.operandWidths(sc, b) {
		for _, qk := range s.qkPairs(sc, b, wq) {
			q, k := qk[0], qk[1]
			for _, perm := range permutations(4)[:] {
				// t's axis i is [B, H, Sq, Sk]'s axis perm[i]
				canon := make([]int, 4)
				for i, a := range perm {
					canon[a] = t.shape[i]
				}
				h, sq, sk := canon[1], canon[2], canon[3]
				if perm[0] != 0 || canon[0] != b || q.shape[1] != sq || k.shape[1] != sk || h < 1 || wq%h != 0 {
					continue
				}
				d := wq / h
				// the tables of offsets between the rows' cells (LeViT's
				// and EfficientFormer's absolute offsets, Swin's relative
				// ones) where the scope holds one
				biases := append([]*val{nil}, s.absOffsetBiases(sc, h, sq, sk)...)
				if sq == sk {
					biases = append(biases, s.offsetTableBiases(sc, h, sq)...)
				}
				for _, where := range explicitScales {
					for _, soft := range []bool{false, true} {
						for _, bias := range biases {
							if e := s.scoresExpr(q, k, bias, h, d, where, soft, perm, t); e != nil {
								cands = append(cands, e)
							}
						}
					}
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// qkPairs are the (q, k) pairs of width wq among the scope's operands of
// batch b: the first two pieces of each fused projection, then every
// ordered pair of distinct operands.
func (s *synth) qkPairs(sc *scope, b, wq int) [][2]*val {
	pool, fused := s.allOperands(sc, &val{shape: []int{b, 0, wq}})
	var pairs [][2]*val
	for _, f := range fused {
		pairs = append(pairs, [2]*val{f[0], f[1]})
	}
	for _, q := range pool {
		for _, k := range pool {
			if q != k && q.shape[2] == k.shape[2] {
				pairs = append(pairs, [2]*val{q, k})
			}
		}
	}
	return slices.DeleteFunc(pairs, func(p [2]*val) bool { return p[0].shape[2] != wq || p[1].shape[2] != wq })
}

// operandWidths are the widths a query may have among the scope's
// values of batch b: each [B, S, W] value's W, and W/3 (a fused q/k/v).
func (s *synth) operandWidths(sc *scope, b int) []int {
	var out []int
	for _, v := range sc.vals {
		if len(v.shape) != 3 || v.shape[0] != b || v.opaque {
			continue
		}
		for _, w := range []int{v.shape[2], v.shape[2] / 3} {
			if w > 0 && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// scoresExpr is the step-by-step scores of q [B, Sq, H·D] and k [B, Sk,
// H·D] scaled where says, plus bias [1, H, Sq, Sk] unless nil, softmaxed over the keys where soft, laid out as
// perm says (t's axis i is [B, H, Sq, Sk]'s axis perm[i]).
func (s *synth) scoresExpr(q, k, bias *val, h, d int, where string, soft bool, perm []int, t *val) *expr {
	b, sq, sk := q.shape[0], q.shape[1], k.shape[1]
	scale := s.constant(float64(float32(1 / math.Sqrt(float64(d)))))
	if where == "q" {
		q = s.derive(&expr{op: program.OpMul, args: []*val{q, scale}, out: q.format, label: "q times 1/√D"})
	}
	qh := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{s.reshape(q, []int{b, sq, h, d})}, out: t.format})
	kt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 3, 1}}, args: []*val{s.reshape(k, []int{b, sk, h, d})}, out: t.format})
	if qh == nil || kt == nil {
		return nil
	}
	sc := s.derive(&expr{op: program.OpMatMul, args: []*val{qh, kt}, out: t.format, label: "q·kᵀ per head"})
	if where == "scores" {
		sc = s.derive(&expr{op: program.OpMul, args: []*val{sc, scale}, out: t.format, label: "scores times 1/√D"})
	}
	label := fmt.Sprintf("scores of %d heads of %d, scaled at %s", h, d, where)
	if bias != nil {
		sc = s.derive(&expr{op: program.OpAdd, args: []*val{sc, bias}, out: t.format, label: "plus a position bias"})
		label += ", plus a position bias"
	}
	if soft {
		sc = s.derive(&expr{op: program.OpSoftmax, args: []*val{sc}, out: t.format, label: "softmax over the keys"})
		label = "probabilities: " + label
	}
	if sc == nil {
		return nil
	}
	if slices.Equal(perm, []int{0, 1, 2, 3}) {
		return &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{sc}, out: t.format, label: label}
	}
	return &expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{sc}, out: t.format, label: label}
}

// softmaxOf explains t [4 axes] as the softmax, over one axis, of a value
// of the scope of as many entries (scores a module made), in t's axis
// order: permute(softmax(permute(x, a last)), into t's order).
func (s *synth) softmaxOf(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() || !s.readerParams {
		return nil
	}
	var cands []*expr
	for _, x := range vals {
		if x.opaque || x.integral() || len(x.shape) != 4 || x.numel() != t.numel() || x == t {
			continue
		}
		for a := range 4 {
			p1 := []int{}
			for i := range 4 {
				if i != a {
					p1 = append(p1, i)
				}
			}
			p1 = append(p1, a)
			xp := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: p1}, args: []*val{x}, out: x.format, label: "the softmax's axis last"})
			if xp == nil {
				continue
			}
			sm := s.derive(&expr{op: program.OpSoftmax, args: []*val{xp}, out: t.format, label: "softmax"})
			if sm == nil {
				continue
			}
			for _, p2 := range permutations(4) {
				shape := make([]int, 4)
				for i, src := range p2 {
					shape[i] = sm.shape[src]
				}
				if !slices.Equal(shape, t.shape) {
					continue
				}
				cands = append(cands, &expr{op: program.OpPermute, attrs: program.Attrs{Perm: p2}, args: []*val{sm}, out: t.format,
					label: fmt.Sprintf("softmax over axis %d of a value of the scope", a)})
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// weighedValues explains t [B, Sq, H·D] as probabilities P [B, H, Sq, Sk]
// the scope holds times the heads of a value v [B, Sk, H·D] among its
// operands, the heads merged.
func (s *synth) weighedValues(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	b, sq, w := t.shape[0], t.shape[1], t.shape[2]
	pool, fused := s.allOperands(sc, t)
	for _, f := range fused {
		pool = append(pool, f[2])
	}
	var cands []*expr
	for _, p := range sc.vals {
		if p.opaque || p.integral() || len(p.shape) != 4 || p.shape[0] != b || p.shape[2] != sq || p.shape[1] < 1 || w%p.shape[1] != 0 {
			continue
		}
		h, sk := p.shape[1], p.shape[3]
		d := w / h
		for _, v := range pool {
			if v.shape[1] != sk || v.shape[2] != w {
				continue
			}
			vh := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{s.reshape(v, []int{b, sk, h, d})}, out: v.format})
			o := s.derive(&expr{op: program.OpMatMul, args: []*val{p, vh}, out: t.format, label: "probabilities times v per head"})
			o = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{o}, out: t.format})
			if o == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{o}, out: t.format,
				label: fmt.Sprintf("step-by-step attention output of %d heads", h)})
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// mapsWeighedValues explains a map t [B, C, h, w] as weighedValues of the
// scope's maps read as rows, laid back out as a map, or that plus a map
// the scope made (EfficientFormer v2: the probabilities times v's heads,
// viewed as a map, plus a depthwise convolution of v).
func (s *synth) mapsWeighedValues(t *val, sc *scope) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	mapped := s.mapsAsRows(sc, t.shape[0])
	if mapped == nil {
		return nil
	}
	proxy := s.mapAsRows(t)
	r := s.weighedValues(proxy, mapped)
	if r == nil {
		r = s.plusOwnRows(proxy, mapped, func(rest *val) *val { return s.weighedValues(rest, mapped) }, "probabilities times values")
	}
	if r == nil {
		return nil
	}
	back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{r}, out: r.format, label: "rows laid out as a map"})
	return s.reshape(back, t.shape)
}

// heldScoresAttention explains t [B, Sq, H·D] as probabilities the scope
// made itself, or the softmax of scores it made ([B, H, Sq, Sk]: a
// module of the scope added a position bias to q·kᵀ, GCViT's and
// others' step-by-step attention), times the heads of a value among its
// operands: the literal computation, tried before the attention op,
// which could take such scores only as a bias beside a q·kᵀ it would
// scale to nothing, within tolerance but rounded elsewhere.
func (s *synth) heldScoresAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	b, sq, w := t.shape[0], t.shape[1], t.shape[2]
	var probs []*val
	for _, v := range sc.vals {
		// probabilities a dropout passes on, read from the trace, would
		// make the program replay the captured run
		if !sc.own[v] || v.integral() || len(v.shape) != 4 || v.shape[0] != b || v.shape[2] != sq || v.shape[1] < 1 || w%v.shape[1] != 0 || readsOpaque(v, 8) {
			continue
		}
		probs = append(probs, v)
		if p := s.derive(&expr{op: program.OpSoftmax, args: []*val{v}, out: t.format, label: "softmax over the keys of scores the scope made"}); p != nil {
			probs = append(probs, p)
		}
	}
	if len(probs) == 0 {
		return nil
	}
	held := sc.mapped(func(*val) *val { return nil })
	held.vals = slices.DeleteFunc(held.vals, func(v *val) bool { return len(v.shape) == 4 })
	for _, p := range probs {
		held.add(p, true)
	}
	return s.weighedValues(t, held)
}

// readsOpaque reports whether v is, or is made (within depth steps) from,
// a captured value no expression explains.
func readsOpaque(v *val, depth int) bool {
	if v == nil {
		return false
	}
	if v.opaque {
		return true
	}
	if v.from == nil || depth == 0 {
		return false
	}
	return slices.ContainsFunc(v.from.args, func(a *val) bool { return readsOpaque(a, depth-1) })
}
