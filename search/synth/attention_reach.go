package synth

import "math"

// An attention's output row is a weighted mean of its values' rows: the
// softmax weights are non-negative and sum to 1 (to less with a sink, to
// none on a row its mask empties). So each output entry lies between the
// least and the greatest entry of its channel over the keys, or at 0. How
// far the target lies outside that range bounds from below the rel-RMS
// error of every attention over those values, whatever scale, mask, bias,
// window or cap the refinement would try.

// outOfReach is the bound past which the refinement leaves a choice
// alone: above every format's rounding (bf16's tolerance is 1.5e-2; an
// operand rounded to a narrower format moves the range by far less), so
// only choices no refinement could bring within tolerance are skipped.
// The first stage still scores them: forms built on its ranking (a bias
// of their own added to the values) may move the range.
const outOfReach = 0.05

// reachBound is the bound for an attention with heads query heads and
// kvHeads value heads over v [B, Sk, Wv] making t [B, S, W]: each query
// head as wide in t as a value head in v, query head h reading value head
// h / (heads/kvHeads). 0 where the shapes do not read that way (no bound
// is claimed).
func reachBound(t, v *val, heads, kvHeads int) float64 {
	if v == nil || len(t.shape) != 3 || len(v.shape) != 3 || t.shape[0] != v.shape[0] || heads <= 0 || kvHeads <= 0 || heads%kvHeads != 0 {
		return 0
	}
	b, s, w := t.shape[0], t.shape[1], t.shape[2]
	sk, wv := v.shape[1], v.shape[2]
	if w%heads != 0 || wv%kvHeads != 0 || w/heads != wv/kvHeads || len(t.data) != b*s*w || len(v.data) != b*sk*wv {
		return 0
	}
	d, group := w/heads, heads/kvHeads
	lo, hi := make([]float32, wv), make([]float32, wv)
	var excess, norm float64
	for bi := range b {
		clear(lo)
		clear(hi)
		for j := range sk {
			row := v.data[(bi*sk+j)*wv : (bi*sk+j+1)*wv]
			for c, x := range row {
				lo[c] = min(lo[c], x)
				hi[c] = max(hi[c], x)
			}
		}
		for i := range s {
			row := t.data[(bi*s+i)*w : (bi*s+i+1)*w]
			for c, x := range row {
				vc := (c/d)/group*d + c%d
				var e float64
				switch {
				case x > hi[vc]:
					e = float64(x - hi[vc])
				case x < lo[vc]:
					e = float64(lo[vc] - x)
				}
				excess += e * e
				norm += float64(x) * float64(x)
			}
		}
	}
	if norm == 0 || math.IsNaN(excess) || math.IsInf(excess, 0) {
		return 0
	}
	return math.Sqrt(excess / norm)
}
