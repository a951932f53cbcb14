package synth

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestClampedMoves: a clip made of two pieces, each a map with its axes
// swapped, joined along the frames and clamped to [−1, 1] (a decoded
// clip), is read exactly from the two maps; without the pieces' second
// it is not, and neither is a target whose bounds no entry repeats.
func TestClampedMoves(t *testing.T) {
	mk := func(frames int, seed float64) *val {
		v := &val{shape: []int{1, frames, 4, 3}, data: make([]float32, frames*12), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(1.6 * math.Sin(seed+float64(i)*0.91))
		}
		return v
	}
	a, b := mk(1, 0.3), mk(2, 1.7)
	// the target [1, 3, 3, 4]: each piece's last two axes swapped, joined
	// along axis 1, clamped
	target := &val{shape: []int{1, 3, 3, 4}, data: make([]float32, 36), format: precision.F32}
	for f, p := range []struct {
		v *val
		f int
	}{{a, 0}, {b, 0}, {b, 1}} {
		for i := range 3 {
			for j := range 4 {
				x := p.v.data[(p.f*4+j)*3+i]
				target.data[(f*3+i)*4+j] = min(max(x, -1), 1)
			}
		}
	}
	if slices.Max(target.data) != 1 || slices.Min(target.data) != -1 {
		t.Fatal("the pieces never pass the bounds: no clamp to read")
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	got := s.clampedMoves(target, []*val{a, b})
	if got == nil || !slices.Equal(got.data, target.data) {
		t.Fatalf("not read exactly: %v", got)
	}
	if got := s.clampedMoves(target, []*val{b}); got != nil {
		t.Errorf("one piece missing: read by %v", got.from)
	}
	plain := &val{shape: []int{1, 3, 3, 4}, data: make([]float32, 36), format: precision.F32}
	for i := range plain.data {
		plain.data[i] = float32(i) * 0.01
	}
	if got := s.clampedMoves(plain, []*val{a, b}); got != nil {
		t.Errorf("no repeated bound: read by %v", got.from)
	}
}

// TestL2NormCandidate: rows divided by their L2 length (F.normalize, a
// parameterless module's output) are among the norm candidates; rows
// of other lengths do not bring that candidate.
func TestL2NormCandidate(t *testing.T) {
	x := &val{shape: []int{2, 5, 8}, data: make([]float32, 80), format: precision.F32}
	for i := range x.data {
		x.data[i] = float32(3 * math.Sin(float64(i)*0.77+0.1))
	}
	target := &val{shape: x.shape, data: make([]float32, 80), format: precision.F32}
	for r := range 10 {
		row := x.data[r*8 : (r+1)*8]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		for i, v := range row {
			target.data[r*8+i] = float32(float64(v) / math.Sqrt(ss))
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v, _ := s.best(target, s.normCandidates(x, target))
	if v == nil || relRMS(precision.F32, v.data, target.data) > 1e-6 {
		t.Fatalf("x / ‖x‖ not among the candidates: %v", v)
	}
	l2 := func(cands []*expr) bool {
		return slices.ContainsFunc(cands, func(e *expr) bool { return strings.Contains(e.label, "an L2 norm") })
	}
	if !l2(s.normCandidates(x, target)) || l2(s.normCandidates(x, x)) {
		t.Error("the L2 candidate: not offered for unit rows alone")
	}
}
