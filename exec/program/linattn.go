package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// LinearAttentionParams configure kernelised (linear) attention: per head,
// with φ = Kernel applied to q and k,
//
//	out_n = Σ_j v_j (φ(k_j)·φ(q_n)) / (Σ_j φ(k_j)·φ(q_n) + Eps),
//
// computed as (vᵀφ(k))·φ(q) — keys and values summed first, as
// Sana's ReLU linear attention does — in f32, rounded once. Given two
// more operands qn and kn (of q's and k's shapes), the numerator reads
// them as they are in place of φ(q) and φ(k) while the normaliser still
// reads φ(q)·φ(k) (SANA-Video's RoPE'd kernels over unrotated ones):
//
//	out_n = Σ_j v_j (kn_j·qn_n) / (Σ_j φ(k_j)·φ(q_n) + Eps).
type LinearAttentionParams struct {
	Heads  int
	Kernel exec.ActKind
	Eps    float32
}

// linearAttentionShape is the output shape for q [B, N, H·D], k [B, M, H·D],
// v [B, M, H·Dv]: [B, N, H·Dv].
func linearAttentionShape(q, k, v []int, p LinearAttentionParams) ([]int, error) {
	if len(q) != 3 || len(k) != 3 || len(v) != 3 || p.Heads < 1 || q[0] != k[0] || k[0] != v[0] || k[1] != v[1] ||
		q[2] != k[2] || q[2]%p.Heads != 0 || v[2]%p.Heads != 0 {
		return nil, fmt.Errorf("linear attention of q %v, k %v, v %v in %d heads", q, k, v, p.Heads)
	}
	return []int{q[0], q[1], v[2]}, nil
}

// linearAttentionRun composes linear attention from backend ops, batch
// row by batch row and head by head: kv = vᵀ·φ(k) [Dv, D] and s = Σ_j φ(k_j)
// [1, D] as Linears over the keys, then num = φ(q)·kvᵀ and den = φ(q)·sᵀ,
// out = num / (den + Eps); all in f32, then cast to s.Out.
func linearAttentionRun(b exec.Backend, q, k, v, qn, kn exec.Tensor, p LinearAttentionParams, s exec.Spec) (exec.Tensor, error) {
	out, err := linearAttentionShape(q.Shape(), k.Shape(), v.Shape(), p)
	if err != nil {
		return nil, err
	}
	if err := numeratorShapes(q.Shape(), k.Shape(), qn, kn); err != nil {
		return nil, err
	}
	sc := &scratch{b: b}
	defer sc.free()
	keep := sc.keep
	f32 := exec.Out(precision.F32)
	B, N, M := out[0], q.Shape()[1], k.Shape()[1]
	d, dv := q.Shape()[2]/p.Heads, v.Shape()[2]/p.Heads
	phiQ, err := keep(b.Act(q, p.Kernel, f32))
	if err != nil {
		return nil, err
	}
	phiK, err := keep(b.Act(k, p.Kernel, f32))
	if err != nil {
		return nil, err
	}
	numQ, numK := phiQ, phiK
	if qn != nil {
		if numQ, err = keep(b.Cast(qn, precision.F32)); err != nil {
			return nil, err
		}
		if numK, err = keep(b.Cast(kn, precision.F32)); err != nil {
			return nil, err
		}
	}
	ones, err := keep(b.Upload(onesOf(M), []int{1, M}, precision.F32))
	if err != nil {
		return nil, err
	}
	eps, err := keep(b.Upload([]float32{p.Eps}, []int{1}, precision.F32))
	if err != nil {
		return nil, err
	}
	head := func(x exec.Tensor, bi, h, w, rows int) (exec.Tensor, error) {
		r, err := keep(b.Slice(x, 0, bi, bi+1))
		if err != nil {
			return nil, err
		}
		if r, err = keep(b.Slice(r, 2, h*w, (h+1)*w)); err != nil {
			return nil, err
		}
		return keep(b.Reshape(r, []int{rows, w}))
	}
	t := func(x exec.Tensor) (exec.Tensor, error) { return keep(b.Permute(x, []int{1, 0})) }
	var rows []exec.Tensor
	for bi := range B {
		var heads []exec.Tensor
		for h := range p.Heads {
			qh, err := head(phiQ, bi, h, d, N)
			if err != nil {
				return nil, err
			}
			kh, err := head(phiK, bi, h, d, M)
			if err != nil {
				return nil, err
			}
			nqh, nkh := qh, kh
			if qn != nil {
				if nqh, err = head(numQ, bi, h, d, N); err != nil {
					return nil, err
				}
				if nkh, err = head(numK, bi, h, d, M); err != nil {
					return nil, err
				}
			}
			vh, err := head(v, bi, h, dv, M)
			if err != nil {
				return nil, err
			}
			vt, err := t(vh)
			if err != nil {
				return nil, err
			}
			kt, err := t(kh)
			if err != nil {
				return nil, err
			}
			nkt, err := t(nkh)
			if err != nil {
				return nil, err
			}
			kv, err := keep(b.Linear(vt, nkt, nil, f32)) // [Dv, D] = vᵀ·φ(k)
			if err != nil {
				return nil, err
			}
			ks, err := keep(b.Linear(ones, kt, nil, f32)) // [1, D] = Σ_j φ(k_j)
			if err != nil {
				return nil, err
			}
			num, err := keep(b.Linear(nqh, kv, nil, f32)) // [N, Dv]
			if err != nil {
				return nil, err
			}
			den, err := keep(b.Linear(qh, ks, nil, f32)) // [N, 1]
			if err != nil {
				return nil, err
			}
			if den, err = keep(b.Add(den, eps, f32)); err != nil {
				return nil, err
			}
			o, err := keep(b.Div(num, den, f32))
			if err != nil {
				return nil, err
			}
			heads = append(heads, o)
		}
		row, err := keep(b.Concat(heads, 1)) // [N, H·Dv]
		if err != nil {
			return nil, err
		}
		if row, err = keep(b.Reshape(row, []int{1, N, p.Heads * dv})); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	all, err := keep(b.Concat(rows, 0))
	if err != nil {
		return nil, err
	}
	return b.Cast(all, s.Out)
}

// numeratorShapes checks the numerator's operands: none, or both, of q's
// and k's shapes.
func numeratorShapes(q, k []int, qn, kn exec.Tensor) error {
	if qn == nil && kn == nil {
		return nil
	}
	if qn == nil || kn == nil || !slices.Equal(qn.Shape(), q) || !slices.Equal(kn.Shape(), k) {
		return fmt.Errorf("linear attention's numerator operands: want both, of q's %v and k's %v shapes", q, k)
	}
	return nil
}

func onesOf(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}
