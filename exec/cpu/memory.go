package cpu

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
)

// MemoryScan runs the gated matrix-memory scan as exec.Extended says: the
// recurrence itself, position by position, in f32 (exp in f64 rounded to
// f32, as a correctly rounded f32 exp; no fused multiply-add; the outer
// product k·vᵀ formed before its gate multiplies it, as mLSTM's step
// does), the output rounded once to s.Out. Work is spread over (batch
// row, head) pairs; each pair's state is its own.
func (bk *Backend) MemoryScan(q, k, v, ig, fg exec.Tensor, eps float32, s exec.Spec) (exec.Tensor, error) {
	const op = "memory_scan"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the scan rounds once, in precise math", s)
	}
	if !(eps >= 0) || math.IsInf(float64(eps), 0) {
		return nil, fmt.Errorf("%s: eps %g is not a finite number ≥ 0", op, eps)
	}
	var ts [5]*Tensor
	for i, in := range []struct {
		name string
		t    exec.Tensor
	}{{"q", q}, {"k", k}, {"v", v}, {"i", ig}, {"f", fg}} {
		t, err := bk.get(op, in.name, in.t)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	n, err := exec.CheckMemoryScan(ts[0].shape, ts[1].shape, ts[2].shape, ts[3].shape, ts[4].shape)
	if err != nil {
		return nil, err
	}
	qv, kv, vv, iv, fv := ts[0].data, ts[1].data, ts[2].data, ts[3].data, ts[4].data
	out := newTensor(ts[2].shape, s.Out)
	exp32 := func(x float32) float32 { return float32(math.Exp(float64(x))) }
	bk.parallel(n.B*n.H, 1, func(lo, hi int) {
		c := make([]float32, n.K*n.V) // C[i, j] at i·V + j
		nv := make([]float32, n.K)
		for job := lo; job < hi; job++ {
			b, h := job/n.H, job%n.H
			clear(c)
			clear(nv)
			m := float32(0)
			for t := range n.L {
				row := b*n.L + t
				gi, gf := iv[row*n.H+h], fv[row*n.H+h]
				next := max(gf+m, gi)
				fa, ia := exp32(gf+m-next), exp32(gi-next)
				m = next
				qt := qv[(row*n.H+h)*n.K : (row*n.H+h+1)*n.K]
				kt := kv[(row*n.H+h)*n.K : (row*n.H+h+1)*n.K]
				vt := vv[(row*n.H+h)*n.V : (row*n.H+h+1)*n.V]
				yt := out.data[(row*n.H+h)*n.V : (row*n.H+h+1)*n.V]
				clear(yt)
				var qn float32
				for i, ki := range kt {
					ci := c[i*n.V : (i+1)*n.V]
					qi := qt[i]
					for j, vj := range vt {
						ci[j] = float32(fa*ci[j]) + float32(ia*float32(ki*vj))
						yt[j] += float32(qi * ci[j])
					}
					nv[i] = float32(fa*nv[i]) + float32(ia*ki)
					qn += float32(qi * nv[i])
				}
				den := float32(max(float32(math.Abs(float64(qn))), exp32(-m)) + eps)
				for j := range yt {
					yt[j] /= den
				}
			}
		}
	})
	roundInto(out.data, out.data, s.Out)
	return out, nil
}

// FFT2Real runs the real part of the 2-D discrete Fourier transform as
// exec.Extended says: per matrix [N, M] of x's last two axes, each output
// the double sum in float64 of x·cos(2π(a·n/N + b·m/M)), the angle's
// fractions reduced exactly (a·n mod N, b·m mod M) before the cosine; the
// output rounded once to s.Out.
func (bk *Backend) FFT2Real(x exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	const op = "fft2_real"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, exec.Unsupported(bk.Name(), op, "spec %v: the transform rounds once, in precise math", s)
	}
	t, err := bk.get(op, "x", x)
	if err != nil {
		return nil, err
	}
	if err := exec.CheckFFT2Real(t.shape); err != nil {
		return nil, err
	}
	r := len(t.shape)
	rows, cols := t.shape[r-2], t.shape[r-1]
	mats := exec.Numel(t.shape) / (rows * cols)
	out := newTensor(t.shape, s.Out)
	// cos and sin of 2π·j/n for every j < n, per axis
	table := func(n int) (cs, sn []float64) {
		cs, sn = make([]float64, n), make([]float64, n)
		for j := range n {
			a := 2 * math.Pi * float64(j) / float64(n)
			cs[j], sn[j] = math.Cos(a), math.Sin(a)
		}
		return cs, sn
	}
	rc, rs := table(rows)
	cc, cs := table(cols)
	bk.parallel(mats*rows, 1, func(lo, hi int) {
		// per output row a: first along m the row's transform for every
		// input row n (re and im of Σ_m x[n, m]·e^{−2πi·b·m/M}), then
		// along n: Re Σ_n e^{−2πi·a·n/N}·(re − i·im)…
		re, im := make([]float64, rows*cols), make([]float64, rows*cols)
		last := -1
		for job := lo; job < hi; job++ {
			mat, a := job/rows, job%rows
			src := t.data[mat*rows*cols : (mat+1)*rows*cols]
			if mat != last {
				for n := range rows {
					for b := range cols {
						var sr, si float64
						for m := range cols {
							j := b * m % cols
							xv := float64(src[n*cols+m])
							sr += xv * cc[j]
							si -= xv * cs[j]
						}
						re[n*cols+b], im[n*cols+b] = sr, si
					}
				}
				last = mat
			}
			dst := out.data[(mat*rows+a)*cols : (mat*rows+a+1)*cols]
			for b := range cols {
				var y float64
				for n := range rows {
					j := a * n % rows
					// Re((cos − i·sin)(re + i·im)) = cos·re + sin·im
					y += rc[j]*re[n*cols+b] + rs[j]*im[n*cols+b]
				}
				dst[b] = float32(y)
			}
		}
	})
	roundInto(out.data, out.data, s.Out)
	return out, nil
}
