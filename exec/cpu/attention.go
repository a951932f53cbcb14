package cpu

import (
	"fmt"
	"math"

	"zflow/exec"
)

// Attention is scaled dot-product attention per head, f32 scores and
// softmax, with the Spec's rounding points (RoundScores, RoundProbs,
// RoundWeights, RoundAccum); the output is rounded once to s.Out.
func (bk *Backend) Attention(q, k, v, mask exec.Tensor, p exec.AttentionParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("attention: %w", err)
	}
	qt, err := bk.get("attention", "q", q)
	if err != nil {
		return nil, err
	}
	kt, err := bk.get("attention", "k", k)
	if err != nil {
		return nil, err
	}
	vt, err := bk.get("attention", "v", v)
	if err != nil {
		return nil, err
	}
	g, err := attnGeometry(qt.shape, kt.shape, vt.shape, p)
	if err != nil {
		return nil, err
	}
	var mt *Tensor
	var mst []int
	switch p.Mask {
	case exec.MaskNone, exec.MaskCausal:
		if mask != nil {
			return nil, fmt.Errorf("exec: attention: mask kind %v with a mask tensor", p.Mask)
		}
	case exec.MaskExplicit:
		if mt, err = bk.get("attention", "mask", mask); err != nil {
			return nil, err
		}
		if mst, err = maskStrides(mt.shape, g.b, g.sq, g.sk); err != nil {
			return nil, err
		}
	default:
		return nil, exec.Unsupported(bk.Name(), "attention", "mask kind %v", p.Mask)
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1 / float32(math.Sqrt(float64(g.d)))
	}
	f := s.Out
	rs, rprob, rw := s.Has(exec.RoundScores), s.Round&exec.RoundProbs != 0, s.Round&exec.RoundWeights != 0
	raccum := s.Round&exec.RoundAccum != 0
	if rprob && rw {
		return nil, fmt.Errorf("exec: attention: RoundProbs and RoundWeights both set")
	}
	if s.Round&exec.RoundEach != 0 {
		rprob = true // the math SDPA: every intermediate in the storage format
	}
	out := newTensor([]int{g.b, g.sq, g.h * g.d}, f)
	rep := g.h / g.kv
	qw, kw := g.h*g.d, g.kv*g.d
	bk.parallel(g.b*g.h*g.sq, 16, func(lo, hi int) {
		sc := make([]float32, g.sk)
		acc := make([]float32, g.d)
		for idx := lo; idx < hi; idx++ {
			i := idx % g.sq
			h := (idx / g.sq) % g.h
			bb := idx / (g.sq * g.h)
			kh := h / rep
			qrow := qt.data[(bb*g.sq+i)*qw+h*g.d:][:g.d]
			mx := float32(math.Inf(-1))
			for j := range g.sk {
				visible := true
				switch p.Mask {
				case exec.MaskCausal:
					visible = j <= i
				case exec.MaskExplicit:
					visible = mt.data[bb*mst[0]+i*mst[1]+j*mst[2]] != 0
				}
				if !visible {
					sc[j] = float32(math.Inf(-1))
					continue
				}
				krow := kt.data[(bb*g.sk+j)*kw+kh*g.d:][:g.d]
				var dot float32
				for e, qv := range qrow {
					dot += float32(qv * krow[e])
				}
				sv := at(rs, f, dot*scale)
				sc[j] = sv
				mx = max(mx, sv)
			}
			var sum float32
			for j, sv := range sc {
				e := exec.Exp32(sv-mx, s.Math)
				sc[j] = e
				sum += e
			}
			clear(acc)
			for j, w := range sc {
				switch {
				case rw:
					w = f.Round(w)
				case rprob:
					w = f.Round(w / sum)
				default:
					w = w / sum
				}
				vrow := vt.data[(bb*g.sk+j)*kw+kh*g.d:][:g.d]
				if raccum {
					for e, vv := range vrow {
						acc[e] = f.Round(acc[e] + f.Round(float32(w*vv)))
					}
					continue
				}
				for e, vv := range vrow {
					acc[e] += float32(w * vv)
				}
			}
			dst := out.data[(bb*g.sq+i)*qw+h*g.d:][:g.d]
			for e, a := range acc {
				if rw {
					a /= sum
				}
				dst[e] = a
			}
			roundInto(dst, dst, f)
		}
	})
	return out, nil
}

type attnDims struct{ b, sq, sk, h, kv, d int }

// attnGeometry checks q [B, Sq, H·D], k and v [B, Sk, KV·D].
func attnGeometry(q, k, v []int, p exec.AttentionParams) (attnDims, error) {
	var g attnDims
	if len(q) != 3 || len(k) != 3 || len(v) != 3 {
		return g, fmt.Errorf("exec: attention: q %v, k %v, v %v are not [B, S, heads·D]", q, k, v)
	}
	g.h, g.kv = p.Heads, p.KVHeads
	if g.kv == 0 {
		g.kv = g.h
	}
	if g.h <= 0 || g.kv <= 0 || g.h%g.kv != 0 || q[2]%g.h != 0 {
		return g, fmt.Errorf("exec: attention: %d heads over %d kv heads for q %v", p.Heads, p.KVHeads, q)
	}
	g.b, g.sq, g.sk, g.d = q[0], q[1], k[1], q[2]/g.h
	for _, t := range [][]int{k, v} {
		if t[0] != g.b || t[1] != g.sk || t[2] != g.kv*g.d {
			return g, fmt.Errorf("exec: attention: q %v, k %v, v %v do not agree for %d heads of %d over %d kv heads", q, k, v, g.h, g.d, g.kv)
		}
	}
	return g, nil
}

// maskStrides returns the strides over (b, i, j) of a mask that broadcasts
// to [B, Sq, Sk].
func maskStrides(m []int, b, sq, sk int) ([]int, error) {
	target := []int{b, sq, sk}
	if len(m) > 3 {
		// Leading 1s (e.g. [B, 1, Sq, Sk] with one head axis) are dropped.
		for len(m) > 3 && (m[0] == 1 || len(m) == 4 && m[1] == 1) {
			if m[0] == 1 {
				m = m[1:]
			} else {
				m = append([]int{m[0]}, m[2:]...)
			}
		}
		if len(m) > 3 {
			return nil, fmt.Errorf("exec: attention: mask %v does not broadcast to %v", m, target)
		}
	}
	full := exec.Strides(m)
	st := make([]int, 3)
	for i := range 3 {
		j := len(m) - 3 + i
		switch {
		case j < 0 || m[j] == 1:
			st[i] = 0
		case m[j] == target[i]:
			st[i] = full[j]
		default:
			return nil, fmt.Errorf("exec: attention: mask %v does not broadcast to %v", m, target)
		}
	}
	return st, nil
}
