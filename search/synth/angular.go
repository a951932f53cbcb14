package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// maxAngularPower bounds the powers angularAttention reads.
const maxAngularPower = 32

// angularAttention explains t [B, S, W] as YOSO's expected LSH attention
// (angular_attention): per head, the values weighted by (1 − acos(q̂·k̂)/π)^τ
// and summed, the sum L2-normalised. Each (q, k, v) of the values the
// scope's own calls made (its projections) and head width is scored on the host at every power τ ≤ 32
// (the cosines computed once); the best reproducing t is built and scored
// through the program, every power's score its evidence. Tried once every
// other form has failed.
func (s *synth) angularAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	B, N, W := t.shape[0], t.shape[1], t.shape[2]
	// q, k and v: results of the scope's own calls (its projections)
	var pool []*val
	for _, v := range sc.vals {
		if sc.own[v] && !v.opaque && len(v.shape) == 3 && v.shape[0] == B && len(pool) < 9 {
			pool = append(pool, v)
		}
	}
	tol := tolerance(t.format)
	for _, q := range pool {
		if !slices.Equal(q.shape[:2], t.shape[:2]) {
			continue
		}
		for _, k := range pool {
			if k == q || k.shape[2] != q.shape[2] {
				continue
			}
			for _, v := range pool {
				if v == q || v == k || v.shape[1] != k.shape[1] || v.shape[2] != W {
					continue
				}
				M := k.shape[1]
				for d := minHeadDim; d <= maxHeadDim && d <= q.shape[2]; d *= 2 {
					if q.shape[2]%d != 0 || W%(q.shape[2]/d) != 0 {
						continue
					}
					H := q.shape[2] / d
					var ev []semantics.Candidate
					best, bestScore := 0, math.Inf(1)
					for i, got := range program.AngularAttentionPowers(q.data, k.data, v.data, B, N, M, d, W/H, H, maxAngularPower) {
						tau := i + 1
						score := relRMS(t.format, got, t.data)
						ev = append(ev, semantics.Candidate{Value: float64(tau), Score: finite(score)})
						if score < bestScore {
							best, bestScore = tau, score
						}
					}
					if bestScore > 2*tol {
						continue
					}
					p := program.AngularParams{Heads: H, Power: best}
					w, _ := s.best(t, []*expr{{op: program.OpAngular, attrs: program.Attrs{Angular: p}, args: []*val{q, k, v}, out: t.format,
						label: fmt.Sprintf("angular attention heads=%d power=%d", H, best)}})
					if w == nil {
						continue
					}
					w.fit = &leafFit{kind: "attention", candidates: ev}
					s.angular = append(s.angular, angularRecord{scope: sc.module, boundary: t.origin, params: p, candidates: ev})
					return w
				}
			}
		}
	}
	return nil
}

// angularRecord is an angular attention the search found, for its
// factor.
type angularRecord struct {
	scope, boundary string
	params          program.AngularParams
	candidates      []semantics.Candidate
}
