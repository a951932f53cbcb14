package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitPairOrderRope explains cos and sin tables over position ids of k ≥ 2
// columns whose pairs take the frequencies of one ladder in another order
// than the ladder's (the row axis the even-indexed frequencies, the column
// axis the odd-indexed, the two laid out one after the other): each
// pair's frequency and column are read off its angles (pairFreqs), the
// pairs sorted into the ladder's order (the highest frequency first), the
// sorted tables explained by fitAxisMapRope (which column turns each
// frequency, θ), and the pairs put back in their order by a gather of the
// channels whose indices are a constant read off the values. Tried where
// the tables in the ladder's own order fail.
func (s *synth) fitPairOrderRope(xs []*val, cosT, sinT *val) (*val, *val) {
	d, rows, layouts := tableLayouts(cosT, sinT)
	if len(layouts) == 0 {
		return nil, nil
	}
	for _, x := range xs {
		k := x.numel() / rows
		if !x.integral() || k < 2 || k > 8 || x.numel() != rows*k {
			continue
		}
		for _, p2 := range s.idColumns(x, rows, k) {
			for _, layout := range layouts {
				order := pairOrder(tableAngles(cosT, sinT, layout), p2)
				if order == nil {
					continue
				}
				// src[c]: the channel of the ladder-ordered tables that
				// channel c of the captured ones holds
				src := make([]int, d)
				for j, i := range order {
					if layout == exec.RopeHalf {
						src[j], src[d/2+j] = i, d/2+i
					} else {
						src[2*j], src[2*j+1] = 2*i, 2*i+1
					}
				}
				sorted := func(t *val) *val {
					v := &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: t.format, origin: t.origin}
					for r := range rows {
						for c, sc := range src {
							v.data[r*d+sc] = t.data[r*d+c]
						}
					}
					return v
				}
				cv, sv := s.fitAxisMapRope([]*val{p2}, sorted(cosT), sorted(sinT))
				if cv == nil || sv == nil {
					continue
				}
				ids := &val{shape: []int{d}, data: make([]float32, d), format: precision.F32, origin: cosT.origin + "/pair order", intType: true}
				for c, sc := range src {
					ids.data[c] = float32(sc)
				}
				back := func(v, t *val) *val {
					cols := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{s.reshape(v, []int{rows, d})}, out: v.format, label: "channels first"})
					g := s.derive(&expr{op: program.OpGather, args: []*val{cols, ids}, out: v.format, label: "pairs in the tables' order"})
					w := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{g}, out: v.format, label: "rows first"}), t.shape)
					if w == nil || relRMS(t.format, w.data, t.data) > tolerance(t.format) {
						return nil
					}
					w.fit = v.fit
					return w
				}
				cw, sw := back(cv, cosT), back(sv, sinT)
				if cw == nil || sw == nil {
					continue
				}
				s.em.constant(ids, fmt.Sprintf("the ladder's channel each channel of the %s tables holds, read off the angles: pairs in the order %v", layout, order))
				return cw, sw
			}
		}
	}
	return nil, nil
}

// pairOrder reads each pair's frequency off its angles (angles [rows][P])
// at the column of ids p2 [rows, k] that fits it best (fitFrequency) and
// returns the ladder index of each pair: the pairs sorted by |frequency|,
// highest first (ties keep their order). nil where some pair fits no
// column or the order is the ladder's own (the identity).
func pairOrder(angles [][]float64, p2 *val) []int {
	if len(angles) == 0 {
		return nil
	}
	k, np := p2.shape[1], len(angles[0])
	freq := make([]float64, np)
	for j := range np {
		best := math.Inf(1)
		for a := range k {
			f, res, ok := fitFrequency(len(angles), func(r int) float64 { return float64(p2.data[r*k+a]) }, func(r int) float64 { return angles[r][j] })
			if ok && res < best {
				best, freq[j] = res, f
			}
		}
		if math.IsInf(best, 1) {
			return nil
		}
	}
	byFreq := make([]int, np)
	for j := range byFreq {
		byFreq[j] = j
	}
	slices.SortStableFunc(byFreq, func(a, b int) int { return cmpAbs(freq[b], freq[a]) })
	order := make([]int, np)
	identity := true
	for i, j := range byFreq {
		order[j] = i
		identity = identity && i == j
	}
	if identity {
		return nil
	}
	return order
}
