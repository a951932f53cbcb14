package cpu

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Norm normalises groups of the last axis (layer or RMS), statistics
// accumulated in f64 and rounded to f32 (mean, variance, then
// rstd = 1/√(var + eps) in f32), x̂ in f32, then y = x̂·(γ + offset) + β
// with the Spec's rounding points: RoundNormalized (x̂), RoundScale
// (γ + offset), RoundProduct (x̂·γ). RoundStats (layer norms) takes rstd
// and shift from exec.NormStats instead and x̂ = x·rstd + shift (in f32
// output, x̂ and then x̂·γ + β each one fused multiply-add, as the f32
// kernel's contracted vector code computes them);
// MathWelford (layer norms) takes the mean and variance from
// exec.WelfordMoments, rstd = 1/√(var + eps) rounded once, and γ·x̂ + β
// as one fused multiply-add. RoundMoments rounds the mean and rstd to
// x's format before x̂ = (x − mean)·rstd.
func (bk *Backend) Norm(x, gamma, beta exec.Tensor, p exec.NormParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("norm: %w", err)
	}
	if p.Kind != exec.NormLayer && p.Kind != exec.NormRMS {
		return nil, exec.Unsupported(bk.Name(), "norm", "kind %v", p.Kind)
	}
	xt, err := bk.get("norm", "x", x)
	if err != nil {
		return nil, err
	}
	gt, err := bk.opt("norm", "gamma", gamma)
	if err != nil {
		return nil, err
	}
	bt, err := bk.opt("norm", "beta", beta)
	if err != nil {
		return nil, err
	}
	if len(xt.shape) == 0 {
		return nil, fmt.Errorf("exec: norm: x is a scalar")
	}
	last := xt.shape[len(xt.shape)-1]
	g := p.Group
	if g == 0 {
		g = last
	}
	if g <= 0 || last%g != 0 {
		return nil, fmt.Errorf("exec: norm: group %d does not divide the last axis %d", p.Group, last)
	}
	for _, t := range []*Tensor{gt, bt} {
		if t != nil && exec.Numel(t.shape) != g {
			return nil, fmt.Errorf("exec: norm: parameter %v for groups of %d", t.shape, g)
		}
	}
	f := s.Out
	rn, rs, rp := s.Has(exec.RoundNormalized), s.Has(exec.RoundScale), s.Has(exec.RoundProduct)
	rstats, welford := s.Round&exec.RoundStats != 0, s.Math&exec.MathWelford != 0
	if welford && p.Kind != exec.NormLayer {
		return nil, exec.Unsupported(bk.Name(), "norm", "%v on a %v norm (a layer-norm kernel's arithmetic)", s, p.Kind)
	}
	if rstats && p.Kind == exec.NormRMS {
		rn = true // x·r is one of the primitives
	}
	moments := s.Round&exec.RoundMoments != 0
	if moments && (rstats || welford) {
		return nil, exec.Unsupported(bk.Name(), "norm", "RoundMoments with %v (two kernels' statistics)", s)
	}
	if rstats && welford {
		return nil, exec.Unsupported(bk.Name(), "norm", "RoundStats with MathWelford (two kernels' statistics)")
	}
	sqrtDiv := s.Math&exec.MathSqrtDiv != 0
	if sqrtDiv && (p.Kind != exec.NormRMS || s.Math&exec.MathL2 != 0) {
		return nil, exec.Unsupported(bk.Name(), "norm", "%v on a %v norm (x / √(mean(x²) + eps): RMS norms written out)", s, p.Kind)
	}
	if s.Math&exec.MathL2 != 0 {
		if p.Kind != exec.NormRMS || welford || moments || gt == nil && p.Offset != 0 {
			return nil, exec.Unsupported(bk.Name(), "norm", "%v on a %v norm (F.normalize times √G: RMS norms, no other statistics)", s, p.Kind)
		}
		return bk.normL2(xt, gt, bt, g, p, s), nil
	}
	// the CPU kernel on an f32 tensor: its vector code contracted,
	// x·rstd + shift and ·γ + β one fused multiply-add each
	fused := rstats && p.Kind == exec.NormLayer && f == precision.F32 && !rn && !rp
	// γ' = γ + offset once for all groups.
	var scale []float32
	if gt != nil {
		scale = make([]float32, g)
		for i, v := range gt.data {
			scale[i] = v
			if p.Offset != 0 {
				scale[i] = at(rs, f, v+p.Offset)
			}
		}
	} else if p.Offset != 0 {
		return nil, fmt.Errorf("exec: norm: offset %g without γ", p.Offset)
	}
	out := newTensor(xt.shape, f)
	groups := len(xt.data) / g
	bk.parallel(groups, max(1, 2048/g), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			src, dst := xt.data[q*g:(q+1)*g], out.data[q*g:(q+1)*g]
			var mean, rstd, shift, root float32
			switch {
			case sqrtDiv:
				root = exec.RMSRoot(src, p.Eps, f)
			case rstats && p.Kind == exec.NormRMS:
				rstd = exec.RMSStats(src, p.Eps, f)
			case rstats:
				rstd, shift = exec.NormStats(src, p.Eps, f)
			case welford:
				var v float32
				mean, v = exec.WelfordMoments(src)
				rstd = float32(1 / math.Sqrt(float64(v+p.Eps)))
			default:
				mean, rstd = stats(src, p.Kind, p.Eps)
			}
			if moments {
				mean, rstd = xt.format.Round(mean), xt.format.Round(rstd)
			}
			for i, v := range src {
				var n float32
				switch {
				case fused:
					n = exec.FMA32(v, rstd, shift)
				case sqrtDiv:
					n = v / root
				case rstats:
					n = float32(v*rstd) + shift
				default:
					n = float32((v - mean) * rstd)
				}
				n = at(rn, f, n)
				switch {
				case fused:
					g, b := float32(1), float32(0)
					if scale != nil {
						g = scale[i]
					}
					if bt != nil {
						b = bt.data[i]
					}
					n = exec.FMA32(n, g, b)
				case welford && scale != nil && bt != nil && !rp:
					n = exec.FMA32(scale[i], n, bt.data[i]) // γ·x̂ + β contracted
				default:
					if scale != nil {
						n = at(rp, f, float32(n*scale[i]))
					}
					if bt != nil {
						n += bt.data[i]
					}
				}
				dst[i] = n
			}
			roundInto(dst, dst, f)
		}
	})
	return out, nil
}

// normL2 is an RMS norm as F.normalize times √g computes it (MathL2):
// every step stored in s.Out.
func (bk *Backend) normL2(xt, gt, bt *Tensor, g int, p exec.NormParams, s exec.Spec) *Tensor {
	f := s.Out
	c := exec.L2Scale(g, f, s.Math)
	denFormat := f // ‖x‖ stored; kept f32 where x was normalised upcast
	if s.Math&exec.MathNormalizeF32 != 0 {
		denFormat = precision.F32
	}
	var scale []float32
	if gt != nil {
		scale = make([]float32, g)
		for i, v := range gt.data {
			scale[i] = at(s.Has(exec.RoundScale), f, v+p.Offset)
		}
	}
	out := newTensor(xt.shape, f)
	bk.parallel(len(xt.data)/g, max(1, 2048/g), func(lo, hi int) {
		for q := lo; q < hi; q++ {
			src, dst := xt.data[q*g:(q+1)*g], out.data[q*g:(q+1)*g]
			den := exec.L2Denominator(src, p.Eps, denFormat, s.Round&exec.RoundStats != 0 && denFormat == f)
			for i, v := range src {
				n := f.Round(f.Round(v/den) * c)
				if scale != nil {
					n = f.Round(n * scale[i])
				}
				if bt != nil {
					n = f.Round(n + bt.data[i])
				}
				dst[i] = n
			}
		}
	})
	return out
}

// stats returns the mean to subtract (0 for RMS) and 1/√(var + eps), where
// var is the biased variance (layer) or the mean square (RMS); sums in f64,
// results rounded to f32, the reciprocal square root in f32.
func stats(x []float32, kind exec.NormKind, eps float32) (mean, rstd float32) {
	n := float64(len(x))
	var v float64
	if kind == exec.NormLayer {
		var sum float64
		for _, e := range x {
			sum += float64(e)
		}
		mu := sum / n
		for _, e := range x {
			d := float64(e) - mu
			v += float64(d * d) // the conversion keeps arm64 from fusing this into an FMA
		}
		mean = float32(mu)
	} else {
		for _, e := range x {
			v += float64(e) * float64(e)
		}
	}
	variance := float32(v / n)
	return mean, 1 / float32(math.Sqrt(float64(variance+eps)))
}
