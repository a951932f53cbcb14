package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxZeroKeys bounds the count of zero keys zeroKeys fits (2^14: a
// sequence padded up to a block of many thousands of rows).
const maxZeroKeys = 1 << 14

// zeroKeys tries each of the best choices as attention whose softmax also
// counts n extra keys of score 0 and value 0: zero rows padded onto q, k
// and v (up to a kernel's block size) and attended with no mask, so each
// padding key adds exp(0) to every row's denominator and nothing to its
// sum. That is an attention sink of logit ln n on every head; n, one
// count for every head and row, is fitted to the captured output (a
// doubling scan, then a search between the best count's neighbours) and
// tried as a constant. Tried only where no first-stage choice holds: a
// plain attention misses such an output by a per-row factor.
func (s *synth) zeroKeys(best []attnChoice, t *val, try func(attnChoice)) {
	for _, ch := range best {
		if ch.sinks != nil || ch.q.shape[1] != t.shape[1] || ch.params.Heads < 1 {
			continue
		}
		n, score := s.fitZeroKeys(ch, t)
		if n < 1 || !(score < ch.score/2) {
			continue // no count explains the miss
		}
		c := ch
		c.sinks = s.zeroKeySinks(ch.params.Heads, n)
		c.label = ch.label + fmt.Sprintf(" zero_keys=%d", n)
		try(c)
	}
}

// fitZeroKeys is the count of zero keys that brings ch nearest t, and
// that choice's score (on t's sampled rows where it has many).
func (s *synth) fitZeroKeys(ch attnChoice, t *val) (int, float64) {
	target, q := t, ch.q
	if sub := sampledRows(t); sub != nil {
		q = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: sub.shape[1]}, args: []*val{ch.q}, out: ch.q.format})
		if q == nil {
			return 0, math.Inf(1)
		}
		target = sub
	}
	memo := map[int]float64{}
	score := func(n int) float64 {
		if r, ok := memo[n]; ok {
			return r
		}
		sinks := &val{shape: []int{ch.params.Heads}, data: logCount(ch.params.Heads, n), format: f32}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{q, ch.k, ch.v, nil, nil, sinks}, out: t.format}
		_, r := s.ev.score(e, target)
		memo[n] = r
		return r
	}
	bestN, bestScore := 0, math.Inf(1)
	for n := 1; n <= maxZeroKeys; n *= 2 {
		if r := score(n); r < bestScore {
			bestN, bestScore = n, r
		}
	}
	if bestN == 0 {
		return 0, math.Inf(1)
	}
	// the error falls towards the count and rises past it: a ternary
	// search between the doubling scan's neighbours of the best
	lo, hi := max(1, bestN/2), min(maxZeroKeys, 2*bestN)
	for hi-lo > 2 {
		m1, m2 := lo+(hi-lo)/3, hi-(hi-lo)/3
		if score(m1) <= score(m2) {
			hi = m2
		} else {
			lo = m1
		}
	}
	for n := lo; n <= hi; n++ {
		if r := score(n); r < bestScore {
			bestN, bestScore = n, r
		}
	}
	return bestN, bestScore
}

// zeroKeySinks is the constant sink logits ln n on each of heads heads,
// bound in the program with a note saying what they stand for.
func (s *synth) zeroKeySinks(heads, n int) *val {
	s.seq++
	v := &val{shape: []int{heads}, data: logCount(heads, n), format: f32, seq: s.seq, origin: fmt.Sprintf("zero_keys_%d", n)}
	s.em.constant(v, fmt.Sprintf("%d zero keys in every softmax (q, k and v padded with zero rows, attended with no mask): a sink of logit ln %d on every head", n, n))
	return v
}

// logCount is ln n, heads times.
func logCount(heads, n int) []float32 {
	d := make([]float32, heads)
	for i := range d {
		d[i] = float32(math.Log(float64(n)))
	}
	return d
}

// bestUpToRowScale is the n choices of all nearest t once each row of each
// head is scaled by its own least-squares factor in (0, 1]: zero keys (or
// any sink) shrink every row of a head by its own factor, so the right
// operands can rank far down by plain error. Choices scored on sampled
// rows (no whole result) are ranked by their plain score after the rest.
func bestUpToRowScale(all []attnChoice, t *val, n int) []attnChoice {
	type ranked struct {
		ch  attnChoice
		err float64
	}
	var rs []ranked
	for _, ch := range all {
		e := math.Inf(1)
		if ch.result != nil && len(ch.result.data) == len(t.data) && ch.params.Heads > 0 && t.shape[len(t.shape)-1]%ch.params.Heads == 0 {
			e = rowScaledErr(ch.result.data, t.data, t.shape[len(t.shape)-1]/ch.params.Heads)
		}
		rs = append(rs, ranked{ch, e})
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return cmpFloat(a.err, b.err) })
	var out []attnChoice
	for _, r := range rs[:min(n, len(rs))] {
		out = append(out, r.ch)
	}
	return out
}

// rowScaledErr is the rel-RMS of t against o with every run of d values
// (one head of one row) scaled by its least-squares factor, clamped to
// [0, 1].
func rowScaledErr(o, t []float32, d int) float64 {
	var num, den float64
	for i := 0; i+d <= len(t); i += d {
		var ot, oo float64
		for j := i; j < i+d; j++ {
			ot += float64(o[j]) * float64(t[j])
			oo += float64(o[j]) * float64(o[j])
		}
		a := 0.0
		if oo > 0 {
			a = min(max(ot/oo, 0), 1)
		}
		for j := i; j < i+d; j++ {
			r := float64(t[j]) - a*float64(o[j])
			num += r * r
			den += float64(t[j]) * float64(t[j])
		}
	}
	if den == 0 {
		return math.Inf(1)
	}
	return math.Sqrt(num / den)
}
