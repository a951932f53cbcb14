//go:build linux

package cuda

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// pointwiseSource is the CUDA rendering of the one kernel source's
// pointwise part plus this package's norm kernel, which uses its
// functions. The source's row kernels (rows.zf, Metal's norm, linear and
// attention) are left out: this backend has its own and every module that
// includes this text would compile them again.
func pointwiseSource() string {
	src, err := kernels.RenderPointwise(kernels.CUDA)
	if err != nil {
		panic(err) // CUDA is always rendered
	}
	return src + normDefs() + normSource
}

// elementwise queues zf_elementwise over out with inputs ins (≤ 3).
func (b *Backend) elementwise(out *Tensor, p kernels.EW, ins ...*Tensor) error {
	if p.N == 0 {
		return nil
	}
	ptr := [3]uintptr{out.ptr(), out.ptr(), out.ptr()}
	for i, t := range ins {
		ptr[i] = t.ptr()
		p.Fmt[i] = int32(t.format)
	}
	p.OutFmt = int32(out.format)
	work := int(p.N)
	if p.Vec != 0 {
		work /= 8
	}
	return b.launch("zf_elementwise", b.grid1(work), block256, 0, out.ptr(), ptr[0], ptr[1], ptr[2], kernels.Bytes(&p))
}

// ew runs one broadcast elementwise op: out has shape, inputs ins.
func (b *Backend) ew(op string, shape []int, s exec.Spec, ins []*Tensor, set func(p *kernels.EW)) (exec.Tensor, error) {
	shapes := make([][]int, len(ins))
	for i, t := range ins {
		shapes[i] = t.shape
	}
	p, err := kernels.NewEW(shape, shapes...)
	if err != nil {
		return nil, exec.Unsupported(b.Name(), op, "%v", err)
	}
	set(&p)
	p.Math = int32(s.Math)
	return b.result(shape, s.Out, func(out *Tensor) error { return b.elementwise(out, p, ins...) })
}

func (b *Backend) gets(op string, names []string, ts ...exec.Tensor) ([]*Tensor, error) {
	out := make([]*Tensor, len(ts))
	for i, t := range ts {
		ct, err := b.get(op, names[i], t)
		if err != nil {
			return nil, err
		}
		out[i] = ct
	}
	return out, nil
}

// Cast rounds x to f.
func (b *Backend) Cast(x exec.Tensor, f precision.Format) (exec.Tensor, error) {
	xt, err := b.get("cast", "x", x)
	if err != nil {
		return nil, err
	}
	if !f.Valid() {
		return nil, fmt.Errorf("exec: cuda: cast: invalid format %v", f)
	}
	return b.ew("cast", xt.shape, exec.Out(f), []*Tensor{xt}, func(p *kernels.EW) { p.Op = kernels.OpCast })
}

func (b *Backend) binary(op string, code int32, a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	ts, err := b.gets(op, []string{"a", "b"}, a, c)
	if err != nil {
		return nil, err
	}
	shape, err := exec.Broadcast(ts[0].shape, ts[1].shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return b.ew(op, shape, s, ts, func(p *kernels.EW) { p.Op = code })
}

// Add is a + b, rounded once to s.Out.
func (b *Backend) Add(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("add", kernels.OpAdd, a, c, s)
}

// Mul is a · b, rounded once to s.Out.
func (b *Backend) Mul(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("mul", kernels.OpMul, a, c, s)
}

// Sub is a − b, rounded once to s.Out.
func (b *Backend) Sub(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("sub", kernels.OpSub, a, c, s)
}

// Minimum is min(a, b) (NaN where either is), rounded once to s.Out.
func (b *Backend) Minimum(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("minimum", kernels.OpMin, a, c, s)
}

// Maximum is max(a, b) (NaN where either is), rounded once to s.Out.
func (b *Backend) Maximum(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("maximum", kernels.OpMax, a, c, s)
}

// Div is a / b (a · (1/b) under MathRecipDiv), rounded once to s.Out.
func (b *Backend) Div(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("div", kernels.OpDiv, a, c, s)
}

// Act is f(x), rounded once to s.Out.
func (b *Backend) Act(x exec.Tensor, f exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	if s.Math&exec.MathCUDASinCos != 0 && (f == exec.ActSin || f == exec.ActCos) {
		return b.Fallback.HostAct(x, f, s) // CUDA's sinf and cosf, emulated exactly
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("act: %w", err)
	}
	if !f.Kernel() {
		return nil, exec.Unsupported(b.Name(), "act", "activation %v", f)
	}
	xt, err := b.get("act", "x", x)
	if err != nil {
		return nil, err
	}
	return b.ew("act", xt.shape, s, []*Tensor{xt}, func(p *kernels.EW) { p.Op, p.Act, p.Flags = kernels.OpAct, int32(f), actFlags(s) })
}

// actFlags is an activation's kernel flags: REach composes it of rounded
// primitives (exec.ActivateComposed) where the spec rounds after each.
func actFlags(s exec.Spec) int32 {
	if s.Round&exec.RoundEach != 0 {
		return kernels.REach
	}
	return 0
}

// flags maps a Spec's rounding points to the kernels' flags.
func flags(s exec.Spec) int32 {
	var f int32
	if s.Has(exec.RoundScale) {
		f |= kernels.RScale
	}
	if s.Has(exec.RoundProduct) {
		f |= kernels.RProduct
	}
	if s.Has(exec.RoundGate) {
		f |= kernels.RGate
	}
	if s.Has(exec.RoundNormalized) {
		f |= kernels.RNormalized
	}
	if s.Round&exec.RoundMoments != 0 {
		f |= kernels.RMoments
	}
	return f
}

// cond is a conditioning tensor viewed with exec.CondShape against x.
func cond(t *Tensor, x []int) *Tensor {
	return &Tensor{shape: exec.CondShape(t.shape, x), format: t.format, buf: t.buf, off: t.off, b: t.b}
}

// Modulate is x·(1 + scale) + shift (or x·scale + shift), fused.
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
	ins := []*Tensor{xt, cond(sc, xt.shape)}
	fl := flags(s)
	if p.PlusOne {
		fl |= kernels.PlusOne
	}
	if sh != nil {
		ins = append(ins, cond(sh, xt.shape))
		fl |= kernels.HasShift
	}
	return b.ew("modulate", xt.shape, s, ins, func(q *kernels.EW) { q.Op, q.Flags = kernels.OpModulate, fl })
}

// GatedResidual is x + g(gate)·y, fused.
func (b *Backend) GatedResidual(x, y, gate exec.Tensor, g exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("gated residual: %w", err)
	}
	if !g.Kernel() {
		return nil, exec.Unsupported(b.Name(), "gated residual", "gate function %v", g)
	}
	ts, err := b.gets("gated residual", []string{"x", "y", "gate"}, x, y, gate)
	if err != nil {
		return nil, err
	}
	gt := cond(ts[2], ts[1].shape)
	shape, err := exec.Broadcast(ts[0].shape, ts[1].shape)
	if err == nil {
		shape, err = exec.Broadcast(shape, gt.shape)
	}
	if err != nil {
		return nil, fmt.Errorf("gated residual: %w", err)
	}
	return b.ew("gated residual", shape, s, []*Tensor{ts[0], ts[1], gt}, func(p *kernels.EW) {
		p.Op, p.Act, p.Flags = kernels.OpGated, int32(g), flags(s)
	})
}

// GLU is f(gate)·value, fused.
func (b *Backend) GLU(gate, value exec.Tensor, fn exec.ActKind, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("glu: %w", err)
	}
	if !fn.Kernel() {
		return nil, exec.Unsupported(b.Name(), "glu", "activation %v", fn)
	}
	ts, err := b.gets("glu", []string{"gate", "value"}, gate, value)
	if err != nil {
		return nil, err
	}
	shape, err := exec.Broadcast(ts[0].shape, ts[1].shape)
	if err != nil {
		return nil, fmt.Errorf("glu: %w", err)
	}
	return b.ew("glu", shape, s, ts, func(p *kernels.EW) { p.Op, p.Act, p.Flags = kernels.OpGLU, int32(fn), flags(s) })
}

// Rope rotates the first RotaryDim elements of each head of x [B, S, H·D].
func (b *Backend) Rope(x, cos, sin exec.Tensor, p exec.RopeParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("rope: %w", err)
	}
	if p.Layout != exec.RopeInterleaved && p.Layout != exec.RopeHalf {
		return nil, exec.Unsupported(b.Name(), "rope", "layout %v", p.Layout)
	}
	ts, err := b.gets("rope", []string{"x", "cos", "sin"}, x, cos, sin)
	if err != nil {
		return nil, err
	}
	xt, ct, st := ts[0], ts[1], ts[2]
	if len(xt.shape) != 3 || p.Heads <= 0 || xt.shape[2]%p.Heads != 0 {
		return nil, fmt.Errorf("exec: rope: x %v is not [B, S, H·D] for %d heads", xt.shape, p.Heads)
	}
	bsz, seq := xt.shape[0], xt.shape[1]
	d := xt.shape[2] / p.Heads
	r := p.RotaryDim
	if r == 0 {
		r = d
	}
	if r < 0 || r > d || r%2 != 0 {
		return nil, fmt.Errorf("exec: rope: rotary dim %d for heads of %d", p.RotaryDim, d)
	}
	perBatch, err := tableShape(ct.shape, st.shape, bsz, seq, r)
	if err != nil {
		return nil, err
	}
	if ct.format != st.format {
		return nil, exec.Unsupported(b.Name(), "rope", "cos is %v and sin %v", ct.format, st.format)
	}
	n := xt.numel()
	if n > kernels.MaxElems {
		return nil, exec.Unsupported(b.Name(), "rope", "%d elements", n)
	}
	rp := kernels.RopeP{N: int32(n), Width: int32(xt.shape[2]), Seq: int32(seq), D: int32(d), R: int32(r),
		FmtX: int32(xt.format), FmtT: int32(ct.format), OutFmt: int32(s.Out), Flags: flags(s) & kernels.RProduct}
	if p.Layout == exec.RopeHalf {
		rp.HalfLayout = 1
	}
	if perBatch {
		rp.PerBatch = 1
	}
	rp.SetVec()
	work := n
	if rp.Vec != 0 {
		work /= 8
	}
	return b.result(xt.shape, s.Out, func(out *Tensor) error {
		if n == 0 {
			return nil
		}
		return b.launch("zf_rope_kernel", b.grid1(work), block256, 0, out.ptr(), xt.ptr(), ct.ptr(), st.ptr(), kernels.Bytes(&rp))
	})
}

// tableShape checks cos and sin: [S, R] (shared by the batch) or [B, S, R].
func tableShape(c, s []int, bsz, seq, r int) (perBatch bool, err error) {
	if len(c) != len(s) {
		return false, fmt.Errorf("exec: rope: cos %v and sin %v differ", c, s)
	}
	for i := range c {
		if c[i] != s[i] {
			return false, fmt.Errorf("exec: rope: cos %v and sin %v differ", c, s)
		}
	}
	switch {
	case len(c) == 2 && c[0] == seq && c[1] == r:
		return false, nil
	case len(c) == 3 && c[0] == bsz && c[1] == seq && c[2] == r:
		return true, nil
	case len(c) == 3 && c[0] == 1 && c[1] == seq && c[2] == r:
		return false, nil
	}
	return false, fmt.Errorf("exec: rope: tables %v are not [%d, %d] or [%d, %d, %d]", c, seq, r, bsz, seq, r)
}

// TimestepEmbed computes diffusers' sinusoidal embedding on the device.
func (b *Backend) TimestepEmbed(t exec.Tensor, p exec.TimestepParams, s exec.Spec) (exec.Tensor, error) {
	if len(p.FreqOverrides) > 0 || s.Math&(exec.MathCUDASinCos|exec.MathF64SinCos) != 0 {
		// a table read off a reference's exp, CUDA's sin and cos or a table
		// made in float64: the
		// kernel computes its own frequencies and correctly rounded sin
		// and cos, so the host computes this one (exactly, then uploads)
		return b.Fallback.TimestepEmbed(t, p, s)
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("timestep embed: %w", err)
	}
	tt, err := b.get("timestep embed", "t", t)
	if err != nil {
		return nil, err
	}
	if len(tt.shape) != 1 {
		return nil, fmt.Errorf("exec: timestep embed: timesteps %v are not 1-D", tt.shape)
	}
	half := p.Dim / 2
	switch {
	case p.Dim <= 0:
		return nil, fmt.Errorf("exec: timestep embed: dim %d", p.Dim)
	case p.Scale == 0 || p.MaxPeriod <= 0:
		return nil, fmt.Errorf("exec: timestep embed: scale %g and max period %g must be set", p.Scale, p.MaxPeriod)
	case float32(half)-p.FreqShift == 0:
		return nil, fmt.Errorf("exec: timestep embed: half dim %d − freq shift %g is zero", half, p.FreqShift)
	}
	div := float32(half) - p.FreqShift
	n := tt.shape[0] * p.Dim
	tp := kernels.TembP{N: int32(n), Dim: int32(p.Dim), Half: int32(half), Math: int32(s.Math), FmtT: int32(tt.format),
		OutFmt: int32(s.Out), NegLog: float32(-math.Log(float64(p.MaxPeriod))), Div: div, Recip: 1 / div, Scale: p.Scale}
	if p.FlipSinToCos {
		tp.Flip = 1
	}
	return b.result([]int{tt.shape[0], p.Dim}, s.Out, func(out *Tensor) error {
		if n == 0 {
			return nil
		}
		return b.launch("zf_timestep", b.grid1(n), block256, 0, out.ptr(), tt.ptr(), kernels.Bytes(&tp))
	})
}
