package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// hardMaskLimit: an additive bias whose every entry is 0 or at most this
// is a mask (finfo.min, −inf, −10000), not a learned bias.
const hardMaskLimit = -1e4

// rankLimit bounds how many first-stage choices rankUnderMasks rescores.
const rankLimit = 48

// smallRank is the size (entries × rows) up to which rankUnderMasks
// ranks eight times as many choices.
const smallRank = 1 << 14

// hardMask reports whether v is an additive mask: entries 0 or at most
// hardMaskLimit, both kinds present.
func hardMask(v *val) bool {
	zeros, masked := 0, 0
	for _, x := range v.data {
		switch {
		case x == 0:
			zeros++
		case float64(x) <= hardMaskLimit:
			masked++
		default:
			return false
		}
	}
	return zeros > 0 && masked > 0
}

// rankUnderMasks reorders the first stage's choices (sorted by their
// unmasked score) by their score under the scope's additive masks, where
// it holds any: a choice whose operands are right scores far off without
// the mask (a banded window over a few keys), as far as wrong operands do,
// and rounding noise in a narrow format then decides which choices reach
// the refinement slots. The same holds under a bias made from the
// queries and a grid's tables (queryPositionBiases), or made by a module
// of the scope, which can move the scores as far. Scores are not changed: the refinement still searches
// mask, window and bias for each choice it takes.
func (s *synth) rankUnderMasks(all []attnChoice, t *val, sc *scope) {
	if len(all) < 2 {
		return
	}
	key := make(map[int]float64, len(all))
	n := min(rankLimit, len(all))
	if t.numel()*t.shape[1] <= smallRank {
		// a few rows: runs are cheap, and rounding noise ranks many wrong
		// choices (RoPE's variants over 4 rows) above the right one
		n = min(8*rankLimit, len(all))
	}
	any := false
	for i := range n {
		ch := all[i]
		key[i] = ch.score
		// additive masks, and score biases a module of the scope made
		// (a position module's logits handed to the attention: BoTNet's)
		bs := slices.DeleteFunc(s.scoreBiases(sc, ch.q, ch.k), func(b *val) bool { return !hardMask(b) && !sc.own[b] })
		bs = append(bs, s.segmentMasks(sc, ch.q, ch.k)...)
		// the position tables over the cells' offsets, each row of one
		// for a head attending apart (EfficientViT-M's cascaded heads)
		bs = append(bs, s.absOffsetBiases(sc, ch.params.Heads, ch.q.shape[1], ch.k.shape[1])...)
		if ch.q.shape[1] == ch.k.shape[1] {
			bs = append(bs, s.offsetTableBiases(sc, ch.params.Heads, ch.q.shape[1])...)
		}
		bs = append(bs, s.queryPositionBiases(sc, ch)...)
		// a 0/1 mask per query and key (a caption's padding made pairwise,
		// its first key kept for every query: HunyuanVideo's and
		// Step1X-Edit's token refiners) on a choice without a mask of its
		// own, after the biases
		var qm []*val
		if ch.params.Mask == exec.MaskNone {
			qm = s.queryMasks(sc, ch.q, ch.k)
		}
		for j, b := range append(bs, qm...) {
			p, bias, mask := ch.params, b, (*val)(nil)
			if j >= len(bs) {
				p.Mask, bias, mask = exec.MaskExplicit, nil, b
			}
			e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{ch.q, ch.k, ch.v, mask, bias, ch.sinks}, out: t.format}
			sc := math.Inf(1)
			if ch.q.shape[1] == t.shape[1] {
				_, sc = s.ev.score(e, t)
			} else if full, err := s.ev.run(e); err == nil {
				if v := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: ch.rows, End: ch.rows + t.shape[1]}, args: []*val{full}, out: full.format, label: "stream rows"}); v != nil {
					sc = relRMS(t.format, v.data, t.data)
				}
			}
			if sc < key[i] {
				key[i], any = sc, true
			}
		}
	}
	if !any {
		return
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ka, ok := key[a]
		if !ok {
			ka = all[a].score
		}
		kb, ok := key[b]
		if !ok {
			kb = all[b].score
		}
		return cmpFloat(ka, kb)
	})
	sorted := make([]attnChoice, len(all))
	for i, j := range idx {
		sorted[i] = all[j]
	}
	copy(all, sorted)
}
