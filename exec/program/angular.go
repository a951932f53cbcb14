package program

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
)

// AngularParams configure OpAngular: YOSO's expected LSH
// attention (its use_expectation path). Per head, with q̂ and k̂ the rows
// of q and k divided by their L2 norms (at least 1e-12),
//
//	c_n = Σ_j (1 − acos(q̂_n·k̂_j)/π)^Power · v_j,   out_n = c_n / max(‖c_n‖, 1e-12),
//
// no softmax and no mask; computed in f64, rounded once to the spec's
// format.
type AngularParams struct {
	Heads int
	Power int
}

// angularShape is the output shape for q [B, N, H·D], k [B, M, H·D],
// v [B, M, H·Dv]: [B, N, H·Dv].
func angularShape(q, k, v []int, p AngularParams) ([]int, error) {
	if len(q) != 3 || len(k) != 3 || len(v) != 3 || p.Heads < 1 || p.Power < 1 || p.Power > 64 || q[0] != k[0] || k[0] != v[0] ||
		k[1] != v[1] || q[2] != k[2] || q[2]%p.Heads != 0 || v[2]%p.Heads != 0 {
		return nil, fmt.Errorf("angular attention of q %v, k %v, v %v in %d heads, power %d", q, k, v, p.Heads, p.Power)
	}
	return []int{q[0], q[1], v[2]}, nil
}

// angularHost runs OpAngular on the host (a reference step:
// the expectation is S² cosines per head; a GPU backend downloads its
// operands for it).
func angularHost(b exec.Backend, q, k, v exec.Tensor, p AngularParams, s exec.Spec) (exec.Tensor, error) {
	shape, err := angularShape(q.Shape(), k.Shape(), v.Shape(), p)
	if err != nil {
		return nil, err
	}
	var in [3][]float32
	for i, t := range []exec.Tensor{q, k, v} {
		if in[i], err = b.Download(t); err != nil {
			return nil, err
		}
	}
	out := AngularAttention(in[0], in[1], in[2], q.Shape()[0], q.Shape()[1], k.Shape()[1], q.Shape()[2]/p.Heads, v.Shape()[2]/p.Heads, p)
	for i, x := range out {
		out[i] = s.Out.Round(x)
	}
	return b.Upload(out, shape, s.Out)
}

// AngularAttention computes OpAngular on host slices: q [B, N,
// H·D], k [B, M, H·D], v [B, M, H·Dv] → [B, N, H·Dv] (f32, unrounded).
func AngularAttention(q, k, v []float32, B, N, M, D, Dv int, p AngularParams) []float32 {
	out := make([]float32, B*N*p.Heads*Dv)
	angular(q, k, v, B, N, M, D, Dv, p.Heads, func(theta float64, vj []float32, c [][]float64) {
		w := math.Pow(theta, float64(p.Power))
		for d, x := range vj {
			c[0][d] += w * float64(x)
		}
	}, 1, func(_ int, at int, c []float64) { normalised(out[at:at+Dv], c) })
	return out
}

// AngularAttentionPowers is AngularAttention at every power 1…n at once,
// out[τ−1] the result at power τ (each weight a running product of the
// similarity rather than one Pow: equal to AngularAttention's to f64
// rounding): the cosines and arc-cosines are computed once, not n times.
func AngularAttentionPowers(q, k, v []float32, B, N, M, D, Dv, heads, n int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, B*N*heads*Dv)
	}
	angular(q, k, v, B, N, M, D, Dv, heads, func(theta float64, vj []float32, c [][]float64) {
		w := 1.0
		for t := range c {
			w *= theta
			for d, x := range vj {
				c[t][d] += w * float64(x)
			}
		}
	}, n, func(t int, at int, c []float64) { normalised(out[t][at:at+Dv], c) })
	return out
}

// angular walks every (query, key) pair of every head: the similarity
// θ = 1 − acos(q̂·k̂)/π, handed with the key's value row to add into
// the query's sums c (sums of them, cleared per query), then each sum
// handed to done with the query's output offset.
func angular(q, k, v []float32, B, N, M, D, Dv, H int, add func(theta float64, vj []float32, c [][]float64), sums int, done func(t, at int, c []float64)) {
	unit := func(x []float32) []float64 {
		var n float64
		for _, e := range x {
			n += float64(e) * float64(e)
		}
		n = math.Max(math.Sqrt(n), 1e-12)
		u := make([]float64, len(x))
		for i, e := range x {
			u[i] = float64(e) / n
		}
		return u
	}
	kh := make([][]float64, M)
	c := make([][]float64, sums)
	for i := range c {
		c[i] = make([]float64, Dv)
	}
	for b := range B {
		for h := range H {
			for j := range M {
				o := (b*M+j)*H*D + h*D
				kh[j] = unit(k[o : o+D])
			}
			for n := range N {
				o := (b*N+n)*H*D + h*D
				qh := unit(q[o : o+D])
				for i := range c {
					clear(c[i])
				}
				for j := range M {
					var dot float64
					for d := range D {
						dot += qh[d] * kh[j][d]
					}
					theta := 1 - math.Acos(math.Max(-1, math.Min(1, dot)))/math.Pi
					vo := (b*M+j)*H*Dv + h*Dv
					add(theta, v[vo:vo+Dv], c)
				}
				for t := range c {
					done(t, (b*N+n)*H*Dv+h*Dv, c[t])
				}
			}
		}
	}
}

// normalised writes c / max(‖c‖, 1e-12) into dst.
func normalised(dst []float32, c []float64) {
	var nn float64
	for _, e := range c {
		nn += e * e
	}
	nn = math.Max(math.Sqrt(nn), 1e-12)
	for d := range dst {
		dst[d] = float32(c[d] / nn)
	}
}
