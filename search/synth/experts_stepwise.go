package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// stepwiseExprs are the stepwise router candidates (ties to the lower
// index, then the higher) for weights wT and
// indices iT [T, k] over logits in [T, E]: each pick weighted by the
// softmax over the logits left within a relative margin of it. The
// margin is read off the values: each (row, pick) keeps the n logits
// nearest below it whose softmax gives the captured weight, which bounds
// the margin to [gap n, gap n+1); the rows' bounds meet in one interval,
// whose midpoint is taken. nil when the indices are not a descending
// pick of the logits or no margin fits every row.
func stepwiseExprs(in, wT, iT *val) []*expr {
	if len(in.shape) != 2 || len(iT.shape) == 0 {
		return nil
	}
	e, k := in.shape[1], iT.shape[len(iT.shape)-1]
	if k > e || in.shape[0]*k != iT.numel() || wT.numel() != iT.numel() {
		return nil
	}
	lo, hi, ok := marginRange(in.data, wT.data, iT.data, e, k, 4*tolerance(wT.format))
	if !ok {
		return nil
	}
	margin := float32((lo + hi) / 2)
	var out []*expr
	for _, high := range []bool{false, true} {
		p := program.RouteParams{K: k, Stepwise: true, Margin: margin, TiesHigh: high}
		out = append(out, &expr{op: program.OpRoute, attrs: program.Attrs{Route: p}, args: []*val{in}, out: wT.format,
			label: stepwiseLabel(k, margin, lo, hi) + fmt.Sprintf(" ties_high=%v", high)})
	}
	return out
}

// marginRange is the interval [lo, hi) of margins under which the
// stepwise router gives weights w [T, k] to the picks idx [T, k] of
// logits [T, E], each weight matched within tol; ok false when some
// pick's weight is not one of its softmaxes over the nearest logits, or
// the rows disagree. hi is 2 (every logit left kept) when no row bounds
// it from above: the relative distance never exceeds 2.
func marginRange(logits, w, idx []float32, e, k int, tol float64) (lo, hi float64, ok bool) {
	hi = 2
	for r := 0; r+e <= len(logits) && r/e*k+k <= len(w); r += e {
		row, picks := logits[r:r+e], idx[r/e*k:r/e*k+k]
		gone := make([]bool, e)
		for j, p := range picks {
			at := int(p)
			if at < 0 || at >= e || gone[at] || float32(at) != p {
				return 0, 0, false
			}
			m := row[at]
			var gaps []float64 // the relative distances of the logits left, nearest first
			var vals []float64
			for i, v := range row {
				if gone[i] || i == at {
					continue
				}
				if v > m {
					return 0, 0, false // not the largest left
				}
				gaps = append(gaps, float64((m-v)/max(float32(math.Abs(float64(v))), m)))
				vals = append(vals, float64(v-m))
			}
			order := make([]int, len(gaps))
			for i := range order {
				order[i] = i
			}
			slices.SortFunc(order, func(a, b int) int {
				switch {
				case gaps[a] < gaps[b]:
					return -1
				case gaps[a] > gaps[b]:
					return 1
				}
				return 0
			})
			want := float64(w[r/e*k+j])
			best, bestN := math.Inf(1), -1
			sum := 1.0
			for n := 0; n <= len(order); n++ {
				if n > 0 {
					sum += math.Exp(vals[order[n-1]])
				}
				if d := math.Abs(1/sum - want); d < best {
					best, bestN = d, n
				}
			}
			if best > tol*max(1, math.Abs(want)) {
				return 0, 0, false
			}
			if bestN > 0 {
				lo = max(lo, gaps[order[bestN-1]])
			}
			if bestN < len(order) {
				hi = min(hi, gaps[order[bestN]])
			}
			gone[at] = true
		}
	}
	return lo, hi, lo < hi
}

func stepwiseLabel(k int, margin float32, lo, hi float64) string {
	return fmt.Sprintf("top %d stepwise, softmax within margin %.4g of each pick (any in [%.4g, %.4g) fits)", k, margin, lo, hi)
}
