package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestGatedProbabilities: ConViT's gated positional self-attention on a
// 3×3 grid, stated in float64: the rel_indices table (Δcol, Δrow, squared
// distance, key minus query) is read as a constant of the grid's shape;
// the probabilities are (1 − σ(g))·softmax(q·kᵀ/√d) + σ(g)·softmax(pos)
// per head, q and k the halves of one fused projection, pos a position
// projection's output laid out [B, N, N, H]. gatedProbabilities must
// explain them, the content map on the 1 − σ side.
func TestGatedProbabilities(t *testing.T) {
	const g, heads, d = 3, 2, 4
	n, width := g*g, heads*d
	rel := &val{shape: []int{1, n, n, 3}, data: make([]float32, n*n*3), format: precision.F32, origin: "pos_proj/arg0"}
	for i := range n {
		for j := range n {
			dr, dc := j/g-i/g, j%g-i%g
			copy(rel.data[(i*n+j)*3:], []float32{float32(dc), float32(dr), float32(dr*dr + dc*dc)})
		}
	}
	if note := pairOffsetsTable(rel); !strings.Contains(note, "Δcol, Δrow, Δrow² + Δcol²") {
		t.Fatalf("rel_indices read as %q", note)
	}
	rng := rand.New(rand.NewPCG(5, 12))
	rnd := func(shape ...int) *val {
		v := &val{shape: shape, data: make([]float32, prod(shape)), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(rng.NormFloat64())
		}
		return v
	}
	qk := rnd(1, n, 2*width)
	qk.origin, qk.fit = "qk/out", &leafFit{kind: "linear"}
	pos := rnd(1, n, n, heads)
	pos.origin = "pos_proj/out"
	gate := &val{shape: []int{heads}, data: []float32{0.3, -1.1}, format: precision.F32, origin: "gating_param"}
	probs := make([]float32, heads*n*n)
	for h := range heads {
		sg := 1 / (1 + math.Exp(-float64(gate.data[h])))
		for i := range n {
			sc, ps := make([]float64, n), make([]float64, n)
			for j := range n {
				for c := range d {
					sc[j] += float64(qk.data[i*2*width+h*d+c]) * float64(qk.data[j*2*width+width+h*d+c])
				}
				sc[j] /= math.Sqrt(d)
				ps[j] = float64(pos.data[(i*n+j)*heads+h])
			}
			a, b := softmax64(sc), softmax64(ps)
			for j := range n {
				probs[(h*n+i)*n+j] = float32((1-sg)*a[j] + sg*b[j])
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, heads, n, n}, probs)
	sc.add(gate, false)
	sc.add(qk, true)
	sc.add(pos, true)
	got := s.gatedProbabilities(target, sc)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, target.data); e > tolerance(precision.F32) {
		t.Errorf("rel-RMS %.3g", e)
	}
	if !strings.Contains(got.from.label, "(1 − σ(gating_param))·softmax(q·kᵀ)") {
		t.Errorf("explained as %q", got.from.label)
	}
}

// softmax64 is the softmax of x in float64 (the row's max subtracted).
func softmax64(x []float64) []float64 {
	m := math.Inf(-1)
	for _, e := range x {
		m = math.Max(m, e)
	}
	var sum float64
	out := make([]float64, len(x))
	for i, e := range x {
		out[i] = math.Exp(e - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}
