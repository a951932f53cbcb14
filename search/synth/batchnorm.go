package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// batchNormRecord is a batch norm read with its initial running
// statistics (initialBatchNorm), for its factor.
type batchNormRecord struct {
	scope, boundary string
	eps             float32
	score           float64 // the read norm's rel-RMS at its boundary
}

// initialBatchNorm explains a call with γ and β [C] over x [B, C, ...]
// (channels second) as a batch norm in eval mode whose running
// statistics the trace does not hold (buffers, not parameters): with
// their initial values, mean 0 and variance 1, it is x·(γ·c) + β per
// channel, c = 1/√(1 + ε) in f32 as torch computes its inverse standard
// deviation, accumulated in f32 and rounded once. Tried where every norm
// over positions fails; the factor says what was assumed, and the
// self-check holds the document to it.
func (s *synth) initialBatchNorm(x *val, params []*val, t *val) *val {
	v, rec := s.initialBatchNormFit(x, params, t)
	if v != nil {
		s.batchNorms = append(s.batchNorms, rec)
	}
	return v
}

// initialBatchNormFit is initialBatchNorm's reading and its factor's
// record, not yet kept (a caller comparing it with other norms keeps it
// only where it wins).
func (s *synth) initialBatchNormFit(x *val, params []*val, t *val) (*val, batchNormRecord) {
	if len(params) != 2 || len(x.shape) < 2 || !slices.Equal(x.shape, t.shape) {
		return nil, batchNormRecord{}
	}
	c := x.shape[1]
	col := append([]int{c}, slices.Repeat([]int{1}, len(x.shape)-2)...)
	var cands []*expr
	var epss []float32
	for _, gb := range [][2]*val{{params[0], params[1]}, {params[1], params[0]}} {
		g, b := gb[0], gb[1]
		if !slices.Equal(g.shape, []int{c}) || !slices.Equal(b.shape, []int{c}) {
			continue
		}
		for _, eps := range []float32{1e-5, 1e-3, 1e-6, 1e-4} {
			inv := float32(1 / math.Sqrt(float64(float32(1)+eps)))
			k := s.constant(float64(inv))
			a := s.derive(&expr{op: program.OpMul, args: []*val{g, k}, out: precision.F32, label: "γ/√(1 + ε)"})
			m := s.derive(&expr{op: program.OpMul, args: []*val{x, s.reshape(a, col)}, out: precision.F32, label: "x times γ/√(1 + ε) per channel"})
			if m == nil {
				continue
			}
			y := &expr{op: program.OpAdd, args: []*val{m, s.reshape(b, col)}, out: precision.F32, label: fmt.Sprintf("batch norm, initial statistics, eps=%g", eps)}
			if t.format != precision.F32 {
				sum := s.derive(y)
				if sum == nil {
					continue
				}
				y = &expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{sum}, out: t.format, label: y.label}
			}
			cands = append(cands, y)
			epss = append(epss, eps)
		}
	}
	v, _ := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil, batchNormRecord{}
	}
	eps := epss[0]
	for i, c := range cands {
		if c.label == v.from.label {
			eps = epss[i]
			break
		}
	}
	return v, batchNormRecord{scope: s.scopeOf, boundary: t.origin, eps: eps, score: relRMS(t.format, v.data, t.data)}
}

// factor is the record's batch_norm_stats factor: declared (the running
// statistics are not in the trace; the initial ones reproduce it).
func (r batchNormRecord) factor() semantics.Factor {
	return semantics.Factor{Name: "batch_norm_stats", Scope: r.scope, Value: "initial", Candidates: []semantics.Candidate{{Value: "initial", Score: r.score}},
		Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "declared",
			Note: fmt.Sprintf("a batch norm in eval mode whose running statistics (buffers) the trace does not hold: mean 0 and variance 1, their initial values, reproduce it (ε %g); a trained model's statistics would differ", r.eps)}}
}
