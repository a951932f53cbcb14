package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestMapsAttention plants a convolutional attention: q, k and v are maps
// [1, 8, 3, 3] (2 heads of 4 channels, each head's channels a block of
// the map's), the result the attention over the 9 cells laid back out as
// a map [1, 8, 3, 3] (v @ attnᵀ viewed as [B, H·D, h, w]). Read as rows,
// it is an attention of 2 heads; a map that is no attention of them is
// not explained.
func TestMapsAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	const heads, d, cells = 2, 4, 9
	c := heads * d
	q, k, v := randVal(rng, 1, c, 3, 3), randVal(rng, 1, c, 3, 3), randVal(rng, 1, c, 3, 3)
	want := make([]float32, c*cells)
	for h := range heads {
		at := func(x *val) func(r, e int) float64 {
			return func(r, e int) float64 { return float64(x.data[(h*d+e)*cells+r]) }
		}
		plantedAttention(cells, d, at(q), at(k), at(v), func(r, e int, y float64) { want[(h*d+e)*cells+r] = float32(y) })
	}
	s, sc, target := planted(t, precision.F32, q.shape, want)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	explainedWithin(t, s.mapsAttention(target, sc, false), target)

	noise := randVal(rng, 1, c, 3, 3)
	s, sc, target = planted(t, precision.F32, q.shape, noise.data)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	if got := s.mapsAttention(target, sc, false); got != nil {
		t.Error("a random map read as an attention of the scope's maps")
	}
}

// TestContextWeighted plants MobileViT v2's separable self-attention: a
// fused projection x [1, 1+2C, P, N] split [1, C, C] along the channels,
// w = softmax of the first channel over N (the scope's context scores),
// t = relu(v)·Σ_n k·w. The form reads the slices and the ReLU; the same
// values times a context of other weights (a plain mean) is not.
func TestContextWeighted(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const c, p, n = 3, 2, 5
	x := randVal(rng, 1, 1+2*c, p, n)
	w := &val{shape: []int{1, 1, p, n}, data: make([]float32, p*n), format: precision.F32}
	for r := range p {
		var sum float64
		for k := range n {
			sum += math.Exp(float64(x.data[r*n+k]))
		}
		for k := range n {
			w.data[r*n+k] = float32(math.Exp(float64(x.data[r*n+k])) / sum)
		}
	}
	plant := func(vAt int) []float32 {
		out := make([]float32, c*p*n)
		for i := range c {
			for r := range p {
				var ctx float64
				for k := range n {
					ctx += float64(x.data[((1+i)*p+r)*n+k]) * float64(w.data[r*n+k])
				}
				for k := range n {
					out[(i*p+r)*n+k] = float32(math.Max(float64(x.data[((vAt+i)*p+r)*n+k]), 0) * ctx)
				}
			}
		}
		return out
	}
	s, sc, target := planted(t, precision.F32, []int{1, c, p, n}, plant(1+c), x)
	sc.add(w, true)
	explainedWithin(t, s.contextWeighted(target, sc, sc.vals), target)

	// the context weighted by other weights than the scope's (a mean):
	// no slice pair explains it
	saved := slices.Clone(w.data)
	for i := range w.data {
		w.data[i] = 1.0 / n
	}
	uniform := plant(1 + c)
	copy(w.data, saved)
	s, sc, target = planted(t, precision.F32, []int{1, c, p, n}, uniform, x)
	sc.add(w, true)
	if v := s.contextWeighted(target, sc, sc.vals); v != nil {
		t.Errorf("a context of other weights read as %s", v.from.label)
	}
}

// TestGlobalQueryKeys plants SwiftFormer's additive attention: q̂, k̂ the
// rows of q and k L2-normalised, t = (Σ_n q̂_n)·k̂ before the projection,
// then the projection's output plus q̂. Both are read; where the scope
// holds k but not q, the residual is not explained by k̂.
func TestGlobalQueryKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	const n, d = 6, 4
	q, k, proj := randVal(rng, 1, n, d), randVal(rng, 1, n, d), randVal(rng, 1, n, d)
	unit := func(x *val) []float64 {
		out := make([]float64, len(x.data))
		for i := range n {
			var sq float64
			for j := range d {
				sq += float64(x.data[i*d+j]) * float64(x.data[i*d+j])
			}
			for j := range d {
				out[i*d+j] = float64(x.data[i*d+j]) / math.Sqrt(sq)
			}
		}
		return out
	}
	qn, kn := unit(q), unit(k)
	g := make([]float64, d)
	for i := range n {
		for j := range d {
			g[j] += qn[i*d+j]
		}
	}
	prod, res := make([]float32, n*d), make([]float32, n*d)
	for i := range n * d {
		prod[i] = float32(g[i%d] * kn[i])
		res[i] = proj.data[i] + float32(qn[i])
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, d}, prod)
	sc.add(q, true)
	sc.add(k, true)
	got := s.globalQueryKeys(target, sc, sc.vals)
	explainedWithin(t, got, target)

	s, sc, target = planted(t, precision.F32, []int{1, n, d}, res, proj, q, k)
	explainedWithin(t, s.plusUnitRows(target, sc.vals), target)
	s, sc, target = planted(t, precision.F32, []int{1, n, d}, res, proj, k)
	if v := s.plusUnitRows(target, sc.vals); v != nil {
		t.Errorf("the keys' unit rows taken for the queries': %s", v.from.label)
	}
}

// plantedAttention is softmax(q·kᵀ/√d)·v for one head: q, k, v read by
// at(row, channel), n rows, d channels; out(row, channel) is written.
func plantedAttention(n, d int, q, k, v func(r, c int) float64, out func(r, c int, y float64)) {
	plantedAttentionQK(n, n, d, q, k, v, out)
}

// plantedAttentionQK is plantedAttention of nq queries over nk keys.
func plantedAttentionQK(nq, nk, d int, q, k, v func(r, c int) float64, out func(r, c int, y float64)) {
	plantedAttentionDV(nq, nk, d, d, q, k, v, out)
}

// plantedAttentionDV is plantedAttentionQK with values of dv columns.
func plantedAttentionDV(nq, nk, d, dv int, q, k, v func(r, c int) float64, out func(r, c int, y float64)) {
	plantedAttentionBias(nq, nk, d, dv, q, k, v, nil, out)
}

// plantedAttentionBias is plantedAttentionDV with bias(i, j) added to
// the scaled scores (nil: none).
func plantedAttentionBias(nq, nk, d, dv int, q, k, v func(r, c int) float64, bias func(i, j int) float64, out func(r, c int, y float64)) {
	for i := range nq {
		scores := make([]float64, nk)
		top := math.Inf(-1)
		for j := range nk {
			for e := range d {
				scores[j] += q(i, e) * k(j, e)
			}
			scores[j] /= math.Sqrt(float64(d))
			if bias != nil {
				scores[j] += bias(i, j)
			}
			top = max(top, scores[j])
		}
		var sum float64
		for j := range scores {
			scores[j] = math.Exp(scores[j] - top)
			sum += scores[j]
		}
		for e := range dv {
			var y float64
			for j := range nk {
				y += scores[j] / sum * v(j, e)
			}
			out(i, e, y)
		}
	}
}

// TestBlocksAttention plants NesT's attention: x [1, T, N, C] through a
// fused projection [1, T, N, 3C] laid out (3, H, D), attention within
// each of the T blocks, the heads merged last ((attn @ v).permute(0, 2,
// 3, 4, 1): each row's channels (d, h)). Read as blocks of rows with the
// heads merged last; the heads merged first is another value, not read
// for it.
func TestBlocksAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 7))
	const blocks, n, heads, d = 3, 4, 2, 4
	c := heads * d
	qkv := randVal(rng, 1, blocks, n, 3*c)
	at := func(b, r, part, h, e int) float64 {
		return float64(qkv.data[((b*n+r)*3+part)*c+h*d+e])
	}
	last, first := make([]float32, blocks*n*c), make([]float32, blocks*n*c)
	for b := range blocks {
		for h := range heads {
			plantedAttention(n, d,
				func(r, e int) float64 { return at(b, r, 0, h, e) },
				func(r, e int) float64 { return at(b, r, 1, h, e) },
				func(r, e int) float64 { return at(b, r, 2, h, e) },
				func(r, e int, y float64) {
					last[(b*n+r)*c+e*heads+h] = float32(y)
					first[(b*n+r)*c+h*d+e] = float32(y)
				})
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, blocks, n, c}, last)
	sc.add(qkv, true)
	explainedWithin(t, s.blocksAttention(target, sc), target)

	s, sc, target = planted(t, precision.F32, []int{1, blocks, n, c}, first)
	sc.add(qkv, true)
	got := s.blocksAttention(target, sc)
	explainedWithin(t, got, target)
	if got != nil && madeBy(got, "heads merged last") {
		t.Error("heads merged first read as merged last")
	}
	s, sc, target = planted(t, precision.F32, []int{1, blocks, n, c}, last)
	sc.add(qkv, true)
	if got := s.blocksAttention(target, sc); got == nil || !madeBy(got, "heads merged last") {
		t.Error("heads merged last not read so")
	}
}

// madeBy reports whether an expression labelled label makes v, at any
// depth.
func madeBy(v *val, label string) bool {
	if v == nil || v.from == nil {
		return false
	}
	if strings.Contains(v.from.label, label) {
		return true
	}
	return slices.ContainsFunc(v.from.args, func(a *val) bool { return madeBy(a, label) })
}

// TestFusedQKHalves plants TNT's attention: q and k the halves of one
// projection [1, N, 2C], v another's [1, N, C], 2 heads. The halves are
// operands of their own and the attention is read.
func TestFusedQKHalves(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const n, heads, d = 5, 2, 4
	c := heads * d
	qk, v := randVal(rng, 1, n, 2*c), randVal(rng, 1, n, c)
	want := make([]float32, n*c)
	for h := range heads {
		plantedAttention(n, d,
			func(r, e int) float64 { return float64(qk.data[r*2*c+h*d+e]) },
			func(r, e int) float64 { return float64(qk.data[r*2*c+c+h*d+e]) },
			func(r, e int) float64 { return float64(v.data[r*c+h*d+e]) },
			func(r, e int, y float64) { want[r*c+h*d+e] = float32(y) })
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, c}, want)
	sc.add(qk, true)
	sc.add(v, true)
	explainedWithin(t, s.attention(target, sc), target)
}
