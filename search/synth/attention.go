package synth

import (
	"fmt"
	"math"
	"slices"

	"zflow/exec"
	"zflow/exec/program"
	"zflow/semantics"
)

// attnChoice is one assignment of the attention search.
type attnChoice struct {
	q, k, v   *val
	headDim   int
	rope      exec.RopeLayout // 0: none
	cos, sin  *val
	params    exec.AttentionParams
	label     string
	score     float64
	result    *val
	qNorm     *leafFit // the fit of the value q was read from (a q norm)
	ropeAfter bool
}

// attention explains target [B, S, H·D] as scaled dot-product attention
// over values the scope made (its children's results, and the pieces of a
// fused projection), each of q and k optionally rotated by RoPE tables
// the scope holds: staged, first the operands, head width, RoPE layout
// and causality, then the score scale.
func (s *synth) attention(t *val, sc *scope) *val {
	if len(t.shape) != 3 {
		return nil
	}
	width := t.shape[2]
	pool := s.operands(sc, t)
	if len(pool) == 0 {
		return nil
	}
	tables := ropeTables(sc)
	var headDims []int
	for _, tb := range tables {
		headDims = append(headDims, tb[0].shape[len(tb[0].shape)-1])
	}
	for d := 8; d <= 256 && d <= width; d *= 2 {
		if width%d == 0 && !slices.Contains(headDims, d) {
			headDims = append(headDims, d)
		}
	}
	var best *attnChoice
	var evidence []semantics.Candidate
	try := func(ch attnChoice) {
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil}, out: t.format, label: ch.label}
		v, score := s.ev.score(e, t)
		evidence = append(evidence, semantics.Candidate{Value: ch.label, Score: finite(score)})
		if v != nil && (best == nil || score < best.score) {
			ch.score, ch.result = score, v
			best = &ch
		}
	}
	for _, q := range pool {
		if q.shape[2] != width || q.shape[1] != t.shape[1] {
			continue
		}
		for _, k := range pool {
			if k == q {
				continue
			}
			for _, v := range pool {
				if v == q || v == k || !slices.Equal(v.shape, k.shape) {
					continue
				}
				for _, d := range headDims {
					if width%d != 0 || k.shape[2]%d != 0 || (width/d)%(k.shape[2]/d) != 0 {
						continue
					}
					p := exec.AttentionParams{Heads: width / d, KVHeads: k.shape[2] / d}
					for _, causal := range []bool{false, true} {
						pp := p
						if causal {
							pp.Mask = exec.MaskCausal
						}
						base := fmt.Sprintf("heads=%d kv=%d causal=%v", pp.Heads, pp.KVHeads, causal)
						try(attnChoice{q: q, k: k, v: v, headDim: d, params: pp, label: base + " rope=none"})
						for _, tb := range tables {
							if tb[0].shape[len(tb[0].shape)-1] > d {
								continue
							}
							for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
								rq, rk := s.rotate(q, tb, layout, pp.Heads, d), s.rotate(k, tb, layout, pp.KVHeads, d)
								if rq == nil || rk == nil {
									continue
								}
								try(attnChoice{q: rq, k: rk, v: v, headDim: d, rope: layout, cos: tb[0], sin: tb[1], params: pp,
									label: base + " rope=" + layout.String()})
							}
						}
					}
				}
			}
		}
	}
	if best == nil {
		return nil
	}
	if best.score > tolerance(t.format) {
		s.refineScale(best, t)
	}
	if best.score > tolerance(t.format) {
		return nil
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: *best, scope: sc.module, boundary: t.origin, candidates: evidence})
	return best.result
}

// refineScale searches the score scale (golden section over log scale)
// and keeps it when it reproduces the target, snapped to a simple number.
func (s *synth) refineScale(best *attnChoice, t *val) {
	f := func(scale float64) (float64, *val) {
		p := best.params
		p.Scale = float32(scale)
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{best.q, best.k, best.v, nil}, out: t.format}
		v, sc := s.ev.score(e, t)
		return sc, v
	}
	lo, hi := math.Log(1e-3), math.Log(4.0)
	g := (math.Sqrt(5) - 1) / 2
	a, b := hi-g*(hi-lo), lo+g*(hi-lo)
	fa, _ := f(math.Exp(a))
	fb, _ := f(math.Exp(b))
	for range 60 {
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - g*(hi-lo)
			fa, _ = f(math.Exp(a))
		} else {
			lo, a, fa = a, b, fb
			b = lo + g*(hi-lo)
			fb, _ = f(math.Exp(b))
		}
	}
	fitted := math.Exp((lo + hi) / 2)
	atFit, _ := f(fitted)
	scale := snap(fitted, func(x float64) bool { sc, _ := f(x); return sc <= math.Max(1.01*atFit, tolerance(t.format)) })
	sc, v := f(scale)
	if v != nil && sc < best.score {
		best.params.Scale = float32(scale)
		best.score, best.result = sc, v
		best.label += fmt.Sprintf(" scale=%g", scale)
	}
}

// rotate applies RoPE to x [B, S, H·d] with tables tb (cos, sin).
func (s *synth) rotate(x *val, tb [2]*val, layout exec.RopeLayout, heads, d int) *val {
	r := tb[0].shape[len(tb[0].shape)-1]
	rows := tb[0].numel() / r
	if rows != x.shape[1] || r%2 != 0 {
		return nil
	}
	p := exec.RopeParams{Heads: heads, Layout: layout, RotaryDim: r}
	if r == d {
		p.RotaryDim = 0
	}
	cos, sin := s.reshape(tb[0], []int{rows, r}), s.reshape(tb[1], []int{rows, r})
	return s.derive(&expr{op: program.OpRope, attrs: program.Attrs{Rope: p}, args: []*val{x, cos, sin}, out: x.format, label: layout.String()})
}

// operands are the values attention may read: the scope's own rank-3
// results whose rows and width fit, their per-head forms made rank 3, and
// the pieces of a fused projection.
func (s *synth) operands(sc *scope, t *val) []*val {
	var pool []*val
	add := func(v *val) {
		if v != nil && len(v.shape) == 3 && v.shape[0] == t.shape[0] && !v.opaque {
			pool = append(pool, v)
		}
	}
	own := recentFirst(sc.vals)
	for _, v := range own {
		if !sc.own[v] || v.opaque {
			continue
		}
		switch len(v.shape) {
		case 3:
			add(v)
			w := v.shape[2]
			if w == 3*t.shape[2] || (w > t.shape[2] && (w-t.shape[2])%2 == 0) {
				kv := (w - t.shape[2]) / 2
				for _, cut := range [][2]int{{0, t.shape[2]}, {t.shape[2], t.shape[2] + kv}, {t.shape[2] + kv, w}} {
					add(s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: cut[0], End: cut[1]}, args: []*val{v}, out: v.format}))
				}
			}
			if w%3 == 0 && w == 3*t.shape[2] {
				for _, d := range []int{8, 16, 32, 64, 128} {
					if t.shape[2]%d != 0 {
						continue
					}
					h := t.shape[2] / d
					g := s.reshape(v, []int{v.shape[0], v.shape[1], h, 3, d})
					for i := range 3 {
						c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: i, End: i + 1}, args: []*val{g}, out: v.format})
						add(s.reshape(c, []int{v.shape[0], v.shape[1], h * d}))
					}
				}
			}
		case 4:
			// [B, H, S, D] → [B, S, H·D]
			pv := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{v}, out: v.format})
			if pv != nil {
				add(s.reshape(pv, []int{v.shape[0], v.shape[2], v.shape[1] * v.shape[3]}))
				add(s.reshape(v, []int{v.shape[0], v.shape[1], v.shape[2] * v.shape[3]}))
			}
		}
	}
	if len(pool) > 9 {
		pool = pool[:9]
	}
	return pool
}

// ropeTables are the (cos, sin) pairs among the scope's values: two
// consecutive values of one shape with cos² + sin² = 1.
func ropeTables(sc *scope) [][2]*val {
	var out [][2]*val
	for i := 0; i+1 < len(sc.vals); i++ {
		c, sn := sc.vals[i], sc.vals[i+1]
		if c.opaque && sn.opaque {
			// a table the program cannot make is still usable: taken as a constant
		}
		if slices.Equal(c.shape, sn.shape) && len(c.shape) >= 2 && unitCircle(c, sn) && !allOnes(c) {
			out = append(out, [2]*val{c, sn})
		}
	}
	return out
}

func allOnes(v *val) bool {
	for _, x := range v.data {
		if x != 1 {
			return false
		}
	}
	return true
}
