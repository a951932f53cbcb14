package cpu

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// binary runs a broadcasting elementwise op a∘b rounded once to s.Out.
func (b *Backend) binary(op string, a, c exec.Tensor, s exec.Spec, fn func(x, y float32) float32) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	at, err := b.get(op, "a", a)
	if err != nil {
		return nil, err
	}
	ct, err := b.get(op, "b", c)
	if err != nil {
		return nil, err
	}
	bc, err := newBcast(op, nil, at.shape, ct.shape)
	if err != nil {
		return nil, err
	}
	out := newTensor(bc.shape, s.Out)
	bc.run(b, out.data, [][]float32{at.data, ct.data}, func(dst []float32, src [][]float32) {
		x, y := src[0], src[1][:len(src[0])]
		for i := range dst {
			dst[i] = fn(x[i], y[i])
		}
		roundInto(dst, dst, s.Out)
	})
	return out, nil
}

// Add is a + b, rounded once to s.Out.
func (b *Backend) Add(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("add", a, c, s, func(x, y float32) float32 { return x + y })
}

// Mul is a · b, rounded once to s.Out.
func (b *Backend) Mul(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("mul", a, c, s, func(x, y float32) float32 { return x * y })
}

// Sub is a − b, rounded once to s.Out.
func (b *Backend) Sub(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("sub", a, c, s, func(x, y float32) float32 { return x - y })
}

// Minimum is min(a, b) (NaN where either is), rounded once to s.Out.
func (b *Backend) Minimum(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("minimum", a, c, s, exec.Min32)
}

// Maximum is max(a, b) (NaN where either is), rounded once to s.Out.
func (b *Backend) Maximum(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("maximum", a, c, s, exec.Max32)
}

// Div is a / b (a · (1/b) under MathRecipDiv), rounded once to s.Out.
func (b *Backend) Div(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	if s.Math&exec.MathRecipDiv != 0 {
		return b.binary("div", a, c, s, func(x, y float32) float32 { return x * (1 / y) })
	}
	return b.binary("div", a, c, s, func(x, y float32) float32 { return x / y })
}

// Act is f(x) in f32 (exec.ActivateSpec: composed under RoundEach),
// rounded to s.Out.
func (b *Backend) Act(x exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("act: %w", err)
	}
	if !f.Valid() {
		return nil, exec.Unsupported(b.Name(), "act", "activation %v", f)
	}
	xt, err := b.get("act", "x", x)
	if err != nil {
		return nil, err
	}
	out := newTensor(xt.shape, s.Out)
	b.parallel(len(xt.data), 4096, func(lo, hi int) {
		dst, src := out.data[lo:hi], xt.data[lo:hi]
		for i, v := range src {
			dst[i] = exec.ActivateSpec(f, v, s)
		}
		roundInto(dst, dst, s.Out)
	})
	return out, nil
}

// at rounds v to f when on is set.
func at(on bool, f precision.Format, v float32) float32 {
	if on {
		return f.Round(v)
	}
	return v
}

// Modulate is x·(1 + scale) + shift (or x·scale + shift), fused, with the
// Spec's rounding points (RoundScale, RoundProduct).
func (b *Backend) Modulate(x, shift, scale exec.Tensor, p exec.ModulateParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("modulate: %w", err)
	}
	xt, err := b.get("modulate", "x", x)
	if err != nil {
		return nil, err
	}
	sc, err := b.get("modulate", "scale", scale)
	if err != nil {
		return nil, err
	}
	sh, err := b.opt("modulate", "shift", shift)
	if err != nil {
		return nil, err
	}
	shapes := [][]int{xt.shape, exec.CondShape(sc.shape, xt.shape)}
	ins := [][]float32{xt.data, sc.data}
	if sh != nil {
		shapes = append(shapes, exec.CondShape(sh.shape, xt.shape))
		ins = append(ins, sh.data)
	}
	bc, err := newBcast("modulate", xt.shape, shapes...)
	if err != nil {
		return nil, err
	}
	rs, rp, f := s.Has(exec.RoundScale), s.Has(exec.RoundProduct), s.Out
	out := newTensor(xt.shape, f)
	bc.run(b, out.data, ins, func(dst []float32, src [][]float32) {
		xs, scs := src[0], src[1]
		for i := range dst {
			m := scs[i]
			if p.PlusOne {
				m = at(rs, f, 1+m)
			}
			dst[i] = float32(xs[i] * m)
		}
		if sh != nil {
			shs := src[2]
			for i := range dst {
				dst[i] = at(rp, f, dst[i]) + shs[i]
			}
		}
		roundInto(dst, dst, f)
	})
	return out, nil
}

// GatedResidual is x + g(gate)·y, fused, with RoundGate and RoundProduct.
func (b *Backend) GatedResidual(x, y, gate exec.Tensor, g exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("gated residual: %w", err)
	}
	if !g.Valid() {
		return nil, exec.Unsupported(b.Name(), "gated residual", "gate function %v", g)
	}
	xt, err := b.get("gated residual", "x", x)
	if err != nil {
		return nil, err
	}
	yt, err := b.get("gated residual", "y", y)
	if err != nil {
		return nil, err
	}
	gt, err := b.get("gated residual", "gate", gate)
	if err != nil {
		return nil, err
	}
	shape, err := exec.Broadcast(xt.shape, yt.shape)
	if err == nil {
		shape, err = exec.Broadcast(shape, exec.CondShape(gt.shape, yt.shape))
	}
	if err != nil {
		return nil, fmt.Errorf("gated residual: %w", err)
	}
	bc, err := newBcast("gated residual", shape, xt.shape, yt.shape, exec.CondShape(gt.shape, yt.shape))
	if err != nil {
		return nil, err
	}
	rg, rp, f := s.Has(exec.RoundGate), s.Has(exec.RoundProduct), s.Out
	out := newTensor(shape, f)
	bc.run(b, out.data, [][]float32{xt.data, yt.data, gt.data}, func(dst []float32, src [][]float32) {
		xs, ys, gs := src[0], src[1], src[2]
		for i := range dst {
			gv := at(rg, f, exec.Activate(g, gs[i], s.Math))
			dst[i] = xs[i] + at(rp, f, float32(gv*ys[i]))
		}
		roundInto(dst, dst, f)
	})
	return out, nil
}

// GLU is f(gate)·value, fused, with RoundGate.
func (b *Backend) GLU(gate, value exec.Tensor, fn exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("glu: %w", err)
	}
	if !fn.Valid() {
		return nil, exec.Unsupported(b.Name(), "glu", "activation %v", fn)
	}
	gt, err := b.get("glu", "gate", gate)
	if err != nil {
		return nil, err
	}
	vt, err := b.get("glu", "value", value)
	if err != nil {
		return nil, err
	}
	bc, err := newBcast("glu", nil, gt.shape, vt.shape)
	if err != nil {
		return nil, err
	}
	rg, f := s.Has(exec.RoundGate), s.Out
	out := newTensor(bc.shape, f)
	bc.run(b, out.data, [][]float32{gt.data, vt.data}, func(dst []float32, src [][]float32) {
		gs, vs := src[0], src[1]
		for i := range dst {
			dst[i] = at(rg, f, exec.Activate(fn, gs[i], s.Math)) * vs[i]
		}
		roundInto(dst, dst, f)
	})
	return out, nil
}
