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
	g, err := exec.AttentionGeometry(qt.shape, kt.shape, vt.shape, p)
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
		if mst, err = exec.MaskStrides(mt.shape, g.B, g.Sq, g.Sk); err != nil {
			return nil, err
		}
	default:
		return nil, exec.Unsupported(bk.Name(), "attention", "mask kind %v", p.Mask)
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1 / float32(math.Sqrt(float64(g.D)))
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
	out := newTensor([]int{g.B, g.Sq, g.H * g.D}, f)
	rep := g.H / g.KV
	qw, kw := g.H*g.D, g.KV*g.D
	bk.parallel(g.B*g.H*g.Sq, 16, func(lo, hi int) {
		sc := make([]float32, g.Sk)
		acc := make([]float32, g.D)
		for idx := lo; idx < hi; idx++ {
			i := idx % g.Sq
			h := (idx / g.Sq) % g.H
			bb := idx / (g.Sq * g.H)
			kh := h / rep
			qrow := qt.data[(bb*g.Sq+i)*qw+h*g.D:][:g.D]
			mx := float32(math.Inf(-1))
			for j := range g.Sk {
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
				krow := kt.data[(bb*g.Sk+j)*kw+kh*g.D:][:g.D]
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
				vrow := vt.data[(bb*g.Sk+j)*kw+kh*g.D:][:g.D]
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
			dst := out.data[(bb*g.Sq+i)*qw+h*g.D:][:g.D]
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
