package exec

import (
	"math"

	"github.com/zflow/zflow/precision"
)

// The layer-norm statistics of RoundStats: PyTorch's CPU LayerNorm kernel
// (aten/src/ATen/native/cpu/layer_norm_kernel.cpp and moments_utils.h, as
// of torch 1.13) instantiated with the tensor's own type as its compute
// type, so that on bf16 every operation of the reduction rounds to bf16.
// Newer PyTorch computes these in f32 for bf16 tensors; this is what the
// older one (and any code written in that style) does, and it is exact
// only when reproduced step by step.

// statsLanes is the number of lanes of a 256-bit vector of format f (AVX2,
// the width PyTorch's CPU kernels use on x86 without AVX-512).
func statsLanes(f precision.Format) int {
	if f == precision.BF16 || f == precision.F16 {
		return 16
	}
	return 8
}

// statsChunk is moments_utils.h's kChunkSize: vectors per Welford chunk.
const statsChunk = 16

// NormMoments returns the mean and biased variance of x computed in format
// f as RowwiseMoments does: per vector lane, Welford updates over chunks
// of statsChunk vectors (m1 += δ·(1/(j+1)), m2 += δ·(x − m1)), chunks
// merged pairwise in a cascade, the elements after the last whole vector
// added by scalar Welford, then the lanes merged in order; every operation
// rounded to f (nearest, ties to even; f32 arithmetic for f32).
func NormMoments(x []float32, f precision.Format) (mean, variance float32) {
	r := f.Round
	lanes := statsLanes(f)
	N := len(x)
	n := N / lanes
	m := (n + statsChunk - 1) / statsChunk
	depth := 0
	for 1<<depth < m {
		depth++
	}
	// A cascade of depth 0 still writes level 0 (PyTorch's inline storage).
	levels := max(depth, 1)
	m0s := make([]int, levels)
	m1s := make([][]float32, levels)
	m2s := make([][]float32, levels)
	for i := range levels {
		m1s[i], m2s[i] = make([]float32, lanes), make([]float32, lanes)
	}
	var c [statsChunk]float32
	for i := range c {
		c[i] = r(1 / r(float32(i+1)))
	}
	m1v, m2v := make([]float32, lanes), make([]float32, lanes)
	for i := range m {
		cnt := min(statsChunk, n-i*statsChunk)
		clear(m1v)
		clear(m2v)
		for j := range cnt {
			xs := x[(i*statsChunk+j)*lanes:][:lanes]
			for l, xv := range xs {
				d := r(xv - m1v[l])
				m1v[l] = r(m1v[l] + r(float32(d*c[j])))
				m2v[l] = r(m2v[l] + r(float32(d*r(xv-m1v[l]))))
			}
		}
		addMomentsVec(r, cnt, m1v, m2v, &m0s[0], m1s[0], m2s[0])
		mask := i + 1
		for j := 1; j < depth && mask&1 == 0; j++ {
			addMomentsVec(r, m0s[j-1], m1s[j-1], m2s[j-1], &m0s[j], m1s[j], m2s[j])
			m0s[j-1] = 0
			clear(m1s[j-1])
			clear(m2s[j-1])
			mask >>= 1
		}
	}
	for i := 1; i < depth; i++ {
		addMomentsVec(r, m0s[i], m1s[i], m2s[i], &m0s[0], m1s[0], m2s[0])
	}
	m0 := 0
	var m1, m2 float32
	for i := n * lanes; i < N; i++ {
		d := r(x[i] - m1)
		m0++
		m1 = r(m1 + r(d/r(float32(m0))))
		m2 = r(m2 + r(float32(d*r(x[i]-m1))))
	}
	for l := range lanes {
		addMoments(r, n, m1s[0][l], m2s[0][l], &m0, &m1, &m2)
	}
	return m1, r(m2 / r(float32(N)))
}

// addMomentsVec merges (m0Add, m1Add, m2Add) into (m0, m1, m2) lane by lane.
func addMomentsVec(r func(float32) float32, m0Add int, m1Add, m2Add []float32, m0 *int, m1, m2 []float32) {
	nn := *m0 + m0Add
	var c float32
	if nn != 0 {
		c = r(r(float32(m0Add)) / r(float32(nn)))
	}
	w := r(float32(*m0))
	for l := range m1 {
		d := r(m1Add[l] - m1[l])
		m1[l] = r(m1[l] + r(float32(c*d)))
		m2[l] = r(m2[l] + r(m2Add[l]+r(float32(r(float32(r(float32(d*d))*c))*w))))
	}
	*m0 = nn
}

// addMoments is addMomentsVec for one lane (moments_utils.h's AddMoments).
func addMoments(r func(float32) float32, m0Add int, m1Add, m2Add float32, m0 *int, m1, m2 *float32) {
	nn := *m0 + m0Add
	var c float32
	if nn != 0 {
		c = r(r(float32(m0Add)) / r(float32(nn)))
	}
	d := r(m1Add - *m1)
	*m1 = r(*m1 + r(float32(c*d)))
	*m2 = r(*m2 + r(m2Add+r(float32(r(float32(r(float32(d*d))*c))*r(float32(*m0))))))
	*m0 = nn
}

// NormStats returns rstd and shift such that x̂ = x·rstd + shift, as the
// kernel computes them in format f from NormMoments: eps rounded to f,
// rstd = r(1 / r(√r(var + eps))), shift = r(−rstd·mean).
func NormStats(x []float32, eps float32, f precision.Format) (rstd, shift float32) {
	r := f.Round
	mean, v := NormMoments(x, f)
	rstd = r(1 / r(float32(math.Sqrt(float64(r(v+r(eps)))))))
	return rstd, r(float32(-rstd * mean))
}

// RMSStats is 1/√(mean(x²) + eps) as an RMS norm written as primitives on
// tensors of format f computes it (RoundStats): each square rounded to
// f, their mean (summed in f64, divided, rounded to f32 then f), the
// sum with eps (an f32 scalar) rounded, and its reciprocal square root
// rounded; the caller rounds x·r.
func RMSStats(x []float32, eps float32, f precision.Format) float32 {
	r := f.Round
	var sum float64
	for _, v := range x {
		sum += float64(r(float32(v * v)))
	}
	ms := r(float32(sum / float64(len(x))))
	return r(float32(1 / math.Sqrt(float64(r(ms+eps)))))
}

// RMSRoot is √(mean(x²) + eps) as RMSStats computes its argument, the
// root rounded to f (MathSqrtDiv: the caller rounds x / root).
func RMSRoot(x []float32, eps float32, f precision.Format) float32 {
	r := f.Round
	var sum float64
	for _, v := range x {
		sum += float64(r(float32(v * v)))
	}
	ms := r(float32(sum / float64(len(x))))
	return r(float32(math.Sqrt(float64(r(ms + eps)))))
}

// WelfordMoments returns the mean and biased variance of x as PyTorch's
// vectorised CUDA layer-norm kernel computes them in f32
// (layer_norm_kernel.cu, compute_stats): a block of 4 warps of 32 threads;
// thread t reads the 4-element vectors t, t+128, ... and adds each element
// by Welford's update with a fused multiply-add (δ = x − m, m' = fma(δ,
// 1/n, m), s' = fma(δ, x − m', s)); each warp combines its lanes by a
// shuffle-down tree (offsets 16 … 1), then the warps combine pairwise
// (offsets 2, 1); the variance is s/N. Elements after the last whole
// vector are not read (PyTorch uses this kernel only when 4 divides N).
func WelfordMoments(x []float32) (mean, variance float32) {
	const warps, lanes, vec = 4, 32, 4
	type acc struct{ mean, s2, count float32 }
	add := func(w acc, v float32) acc {
		d := v - w.mean
		n := w.count + 1
		m := FMA32(d, 1/n, w.mean)
		return acc{m, FMA32(d, v-m, w.s2), n}
	}
	combine := func(b, a acc) acc {
		count := a.count + b.count
		if !(count > 0) {
			return acc{}
		}
		delta := b.mean - a.mean
		coef := 1 / count
		nA, nB := float32(a.count*coef), float32(b.count*coef)
		mean := FMA32(nA, a.mean, float32(nB*b.mean))
		t := float32(float32(delta*delta) * a.count)
		return acc{mean, FMA32(t, nB, a.s2+b.s2), count}
	}
	th := make([]acc, warps*lanes)
	nvec := len(x) / vec
	for t := range th {
		for i := t; i < nvec; i += warps * lanes {
			for _, v := range x[i*vec : (i+1)*vec] {
				th[t] = add(th[t], v)
			}
		}
	}
	next := make([]acc, lanes)
	for y := range warps {
		w := th[y*lanes : (y+1)*lanes]
		for off := lanes / 2; off > 0; off /= 2 {
			for l := range w {
				o := w[l] // a shuffle from past the warp returns the lane's own value
				if l+off < lanes {
					o = w[l+off]
				}
				next[l] = combine(w[l], o)
			}
			copy(w, next)
		}
	}
	lead := make([]acc, warps)
	for y := range lead {
		lead[y] = th[y*lanes]
	}
	for off := warps / 2; off > 0; off /= 2 {
		for y := range off {
			lead[y] = combine(lead[y], lead[y+off])
		}
	}
	return lead[0].mean, lead[0].s2 / float32(len(x))
}

// FMA32 is a·b + c rounded once to f32 (nearest, ties to even).
func FMA32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24 + 24 bits
	s := p + float64(c)
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb) // s + e = p + c exactly
	r := float32(s)
	rs := float64(r)
	if e == 0 || rs == s || math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	// s is not an f32; only a tie between r and its neighbour towards s
	// can be decided wrongly by rounding s instead of s + e.
	n := math.Nextafter32(r, float32(math.Copysign(math.Inf(1), s-rs)))
	if s != (rs+float64(n))/2 {
		return r
	}
	if (e > 0) == (float64(n) > rs) {
		return n
	}
	return r
}

// L2Denominator is max(‖x‖₂, eps) as F.normalize computes it on tensors of
// format f (MathL2): the squares summed in f64, the sum rounded to f32,
// its square root in f32, stored in f, then clamped at eps. With stored
// (RoundStats) the sum is kept in f instead, each square and each partial
// sum rounded in element order (PyTorch ≤ 1.13's CPU norm on bf16).
func L2Denominator(x []float32, eps float32, f precision.Format, stored bool) float32 {
	var sum float64
	for _, v := range x {
		if stored {
			sum = float64(f.Round(float32(sum) + f.Round(v*v)))
		} else {
			sum += float64(v) * float64(v)
		}
	}
	return max(f.Round(float32(math.Sqrt(float64(float32(sum))))), eps)
}

// L2Scale is √g as MathL2 multiplies by it: f32, or stored in f first
// without MathScalarF32.
func L2Scale(g int, f precision.Format, m Math) float32 {
	c := float32(math.Sqrt(float64(g)))
	if m&MathScalarF32 == 0 {
		c = f.Round(c)
	}
	return c
}
