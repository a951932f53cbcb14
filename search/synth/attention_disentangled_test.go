package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// disentangledReference is disentangled attention written the way the
// reference computes it, in float64: per head, scores = q·kᵀ +
// gather(q·Pkᵀ, c2p) + gather(k·Pqᵀ, p2c)ᵀ, all over √(d·factor), with
// c2p[i, j] = clamp(rel[i, j] + span, 0, 2span − 1) and p2c[j, i] =
// clamp(−rel[j, i] + span, …); softmax, times v. q, k, v [b, n, h·d],
// pk, pq [2span, h·d], rel [n, n] (one for the batch), keep [b·n] the
// keys attended (nil: all; a masked key's score is −∞); c2p and p2c pick
// the terms present (neither: plain attention, the negative control).
func disentangledReference(q, k, v, pk, pq []float32, rel []int, keep []bool, b, n, h, d, span, factor int, c2p, p2c bool) []float32 {
	width, l := h*d, 2*span
	clamp := func(x int) int { return min(max(x, 0), l-1) }
	out := make([]float32, b*n*width)
	dot := func(x []float32, xr int, y []float32, yr, hh int) float64 {
		var acc float64
		for c := range d {
			acc += float64(x[xr*width+hh*d+c]) * float64(y[yr*width+hh*d+c])
		}
		return acc
	}
	scale := math.Sqrt(float64(d * factor))
	for bb := range b {
		for hh := range h {
			for i := range n {
				sc := make([]float64, n)
				for j := range n {
					sc[j] = dot(q, bb*n+i, k, bb*n+j, hh)
					if c2p {
						sc[j] += dot(q, bb*n+i, pk, clamp(rel[i*n+j]+span), hh)
					}
					if p2c {
						sc[j] += dot(k, bb*n+j, pq, clamp(-rel[j*n+i]+span), hh)
					}
					sc[j] /= scale
					if keep != nil && !keep[bb*n+j] {
						sc[j] = math.Inf(-1)
					}
				}
				p := softmax64(sc)
				for c := range d {
					var acc float64
					for j := range n {
						acc += p[j] * float64(v[(bb*n+j)*width+hh*d+c])
					}
					out[(bb*n+i)*width+hh*d+c] = float32(acc)
				}
			}
		}
	}
	return out
}

// signedLogBuckets are relative buckets j − i, past span/2 squeezed
// logarithmically (as DeBERTa's are; any integer table serves).
func signedLogBuckets(n, span int) []int {
	out := make([]int, n*n)
	for i := range n {
		for j := range n {
			r := i - j
			mid := span / 2
			a := r
			if a < 0 {
				a = -a
			}
			if a > mid {
				lg := int(math.Ceil(math.Log(float64(a)/float64(mid))/math.Log(float64(4*span)/float64(mid))*float64(mid-1))) + mid
				if r < 0 {
					lg = -lg
				}
				r = lg
			}
			out[i*n+j] = r
		}
	}
	return out
}

// TestDisentangledAttention plants DeBERTa-style disentangled attention:
// q, k, v and two projected tables of 2·span buckets the scope's
// children made, an integer table of relative buckets, the position terms
// gathered at clamp(±rel + span) and added to the content term, all over
// √(d·factor). disentangledAttention explains it (the terms present and
// the factor read off the values); plain attention beside the same
// tables and buckets is not taken for it.
func TestDisentangledAttention(t *testing.T) {
	const h, d = 2, 4
	cases := []struct {
		name     string
		b, n     int
		span     int
		factor   int
		c2p, p2c bool
		terms    string // the label's terms
		masked   int    // keys masked at the end of the last sample (a 0/1 key mask in the scope)
	}{
		{name: "c2p and p2c, sequence longer than the span", b: 1, n: 11, span: 4, factor: 3, c2p: true, p2c: true, terms: "disentangled=[c2p p2c]"},
		{name: "two samples, span wider than the sequence", b: 2, n: 5, span: 8, factor: 3, c2p: true, p2c: true, terms: "disentangled=[c2p p2c]"},
		{name: "two samples, the last keys of one masked", b: 2, n: 7, span: 4, factor: 3, c2p: true, p2c: true, masked: 2, terms: "mask="},
		{name: "c2p only", b: 1, n: 9, span: 4, factor: 2, c2p: true, terms: "disentangled=[c2p] "},
		{name: "plain attention (negative control)", b: 1, n: 9, span: 4, factor: 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(60+i), 11))
			width := h * d
			q, k, v := randVal(rng, c.b, c.n, width), randVal(rng, c.b, c.n, width), randVal(rng, c.b, c.n, width)
			pk, pq := randVal(rng, 1, 2*c.span, width), randVal(rng, 1, 2*c.span, width)
			rel := signedLogBuckets(c.n, c.span)
			rv := &val{shape: []int{1, c.n, c.n}, data: make([]float32, c.n*c.n), format: precision.F32, intType: true}
			for j, x := range rel {
				rv.data[j] = float32(x)
			}
			for _, x := range []struct {
				v    *val
				name string
			}{{q, "q/out"}, {k, "k/out"}, {v, "v/out"}, {pq, "q#1/out"}, {pk, "k#1/out"}, {rv, "rel/out"}} {
				x.v.origin, x.v.fit = x.name, &leafFit{kind: "linear"}
			}
			var keep []bool
			var mv *val
			if c.masked > 0 {
				keep = make([]bool, c.b*c.n)
				mv = &val{shape: []int{c.b, 1, 1, c.n}, data: make([]float32, c.b*c.n), format: precision.F32, intType: true, origin: "mask/in"}
				for j := range keep {
					keep[j] = j < c.b*c.n-c.masked
					if keep[j] {
						mv.data[j] = 1
					}
				}
			}
			want := disentangledReference(q.data, k.data, v.data, pk.data, pq.data, rel, keep, c.b, c.n, h, d, c.span, c.factor, c.c2p, c.p2c)
			s, sc, target := planted(t, precision.F32, []int{c.b, c.n, width}, want)
			for _, x := range []*val{rv, q, k, v, pq, pk} {
				sc.add(x, true)
			}
			if mv != nil {
				sc.add(mv, false)
			}
			got := s.disentangledAttention(target, sc)
			if !c.c2p && !c.p2c {
				if got != nil {
					t.Fatalf("a plain attention taken for a disentangled one (rel-RMS %.3g)", relRMS(precision.F32, got.data, target.data))
				}
				return
			}
			explainedWithin(t, got, target)
			ch := s.attn[len(s.attn)-1].choice
			if ch.q != q || ch.k != k || ch.v != v || ch.headDim != d {
				t.Errorf("operands q=%s k=%s v=%s d=%d, want q/out k/out v/out %d", ch.q.origin, ch.k.origin, ch.v.origin, ch.headDim, d)
			}
			if want := float32(1 / math.Sqrt(float64(d*c.factor))); ch.params.Scale != want {
				t.Errorf("scale %g, want %g (%s)", ch.params.Scale, want, ch.label)
			}
			if !strings.Contains(ch.label, c.terms) {
				t.Errorf("label %q, want the terms %q", ch.label, c.terms)
			}
			// the document's factors: the terms and the scale's factor,
			// each decisive over the variants around the winner
			if len(s.disentangled) != 1 {
				t.Fatalf("%d disentangled records, want 1", len(s.disentangled))
			}
			wantTerms := map[[2]bool]string{{true, true}: "c2p+p2c", {true, false}: "c2p", {false, true}: "p2c"}[[2]bool{c.c2p, c.p2c}]
			for _, f := range s.disentangled[0].factors() {
				want := any(wantTerms)
				if f.Name == "attention_scale_factor" {
					want = float64(c.factor)
				}
				if f.Value != want || !(f.Margin > 2) {
					t.Logf("%+v", f.Candidates)
					t.Errorf("%s = %v (margin %v), want %v decisive", f.Name, f.Value, f.Margin, want)
				}
			}
		})
	}
}
