package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestExplicitAttention: a step-by-step attention whose scores and
// probabilities are boundaries (talking heads' linears over the heads, in
// f32): q [1, 6, 8] times 1/√D before the product, the scores laid out
// [B, Sq, Sk, H]; the probabilities, softmaxed over the keys of a value
// laid out the same way; and the output P·v with the heads merged. Each is
// explained from the scope's values alone; the scores only where a module
// with parameters reads them.
func TestExplicitAttention(t *testing.T) {
	const b, n, h, d = 1, 6, 2, 4
	rng := rand.New(rand.NewPCG(4, 4))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	q := &val{shape: []int{b, n, h * d}, data: fill(n * h * d), format: precision.F32, origin: "q", seq: 1}
	k := &val{shape: []int{b, n, h * d}, data: fill(n * h * d), format: precision.F32, origin: "k", seq: 2}
	v := &val{shape: []int{b, n, h * d}, data: fill(n * h * d), format: precision.F32, origin: "v", seq: 3}
	scale := float32(1 / math.Sqrt(d))
	// scores [B, Sq, Sk, H], q scaled first (each product rounded to f32,
	// summed in order: the matmul's arithmetic)
	scores := make([]float32, n*n*h)
	for i := range n {
		for j := range n {
			for hh := range h {
				var acc float32
				for c := range d {
					acc += q.data[i*h*d+hh*d+c] * scale * k.data[j*h*d+hh*d+c]
				}
				scores[(i*n+j)*h+hh] = acc
			}
		}
	}
	own := func(sc *scope, vs ...*val) {
		for _, x := range vs {
			sc.own[x] = true
		}
	}
	s, sc, target := planted(t, precision.F32, []int{b, n, n, h}, scores, q, k, v)
	own(sc, q, k, v)
	if got := s.scoresOf(target, sc); got != nil {
		t.Error("scores a parameterless module reads (a dropout) computed: the attention makes its output without them")
	}
	s.readerParams = true // read by talking heads' linear
	got := s.scoresOf(target, sc)
	if got == nil || relRMS(precision.F32, got.data, scores) > 1e-6 {
		t.Fatalf("scores not explained (%v)", got)
	}
	// probabilities [B, Sq, Sk, H] of a scores value laid out the same way
	probs := make([]float32, len(scores))
	for i := range n {
		for hh := range h {
			m := math.Inf(-1)
			for j := range n {
				m = math.Max(m, float64(scores[(i*n+j)*h+hh]))
			}
			var sum float64
			for j := range n {
				sum += math.Exp(float64(scores[(i*n+j)*h+hh]) - m)
			}
			for j := range n {
				probs[(i*n+j)*h+hh] = float32(math.Exp(float64(scores[(i*n+j)*h+hh])-m) / sum)
			}
		}
	}
	sv := &val{shape: []int{b, n, n, h}, data: scores, format: precision.F32, origin: "talking heads' logits", seq: 4}
	s2, sc2, pt := planted(t, precision.F32, []int{b, n, n, h}, probs, sv)
	s2.readerParams = true
	if got := s2.softmaxOf(pt, sc2.vals); got == nil || relRMS(precision.F32, got.data, probs) > 1e-6 {
		t.Fatalf("probabilities not explained (%v)", got)
	}
	// the output: P [B, H, Sq, Sk] times v's heads, merged [B, Sq, H·D]
	p4 := make([]float32, len(probs))
	for i := range n {
		for j := range n {
			for hh := range h {
				p4[(hh*n+i)*n+j] = probs[(i*n+j)*h+hh]
			}
		}
	}
	out := make([]float32, n*h*d)
	for i := range n {
		for hh := range h {
			for c := range d {
				var acc float32
				for j := range n {
					acc += p4[(hh*n+i)*n+j] * v.data[j*h*d+hh*d+c]
				}
				out[i*h*d+hh*d+c] = acc
			}
		}
	}
	pv := &val{shape: []int{b, h, n, n}, data: p4, format: precision.F32, origin: "probabilities", seq: 5}
	s3, sc3, ot := planted(t, precision.F32, []int{b, n, h * d}, out, v, pv)
	own(sc3, v)
	if got := s3.weighedValues(ot, sc3); got == nil || relRMS(precision.F32, got.data, out) > 1e-6 {
		t.Fatalf("output not explained (%v)", got)
	}
}
