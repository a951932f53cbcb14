//go:build darwin

package metal

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// Backend is the Metal backend (a skeleton: see the package documentation).
type Backend struct {
	exec.Fallback // Chunk, Patchify, Unpatchify, RopeTable

	mu        sync.Mutex
	d         *device
	pending   []*buffer // freed while work may still read them; released after the next wait
	exactAttn bool      // every attention on the exact kernel (SetExactAttention)
}

var _ exec.Backend = (*Backend)(nil)

// New opens the system default Metal device and builds the pipelines of
// the MSL rendering. The error wraps exec.ErrUnsupported without a device.
func New() (*Backend, error) {
	d, err := openDevice()
	if err != nil {
		return nil, err
	}
	b := &Backend{d: d}
	b.Fallback = exec.Fallback{B: b}
	return b, nil
}

// Open is New as an exec.Backend (for --backend selection).
func Open() (exec.Backend, error) {
	b, err := New()
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Name is "metal".
func (b *Backend) Name() string { return "metal" }

// Device names the GPU.
func (b *Backend) Device() string { return b.d.name }

// Tensor is a Metal tensor: f32 (and f64-format) values as 4-byte floats,
// bf16 and f16 as 16-bit patterns, in a shared-storage buffer.
type Tensor struct {
	shape  []int
	format precision.Format
	buf    *buffer
	b      *Backend
}

// Shape is the tensor's shape (do not modify).
func (t *Tensor) Shape() []int { return t.shape }

// Format is the storage format.
func (t *Tensor) Format() precision.Format { return t.format }

func esize(f precision.Format) int {
	if f == precision.BF16 || f == precision.F16 {
		return 2
	}
	return 4
}

func (b *Backend) newTensor(shape []int, f precision.Format) (*Tensor, error) {
	if err := exec.CheckShape(shape); err != nil {
		return nil, err
	}
	if !f.Valid() {
		return nil, fmt.Errorf("exec: metal: invalid format %v", f)
	}
	buf, err := b.d.alloc(exec.Numel(shape) * esize(f))
	if err != nil {
		return nil, err
	}
	return &Tensor{shape: append([]int(nil), shape...), format: f, buf: buf, b: b}, nil
}

func (b *Backend) get(op, name string, t exec.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, fmt.Errorf("exec: metal: %s: %s is nil", op, name)
	}
	mt, ok := t.(*Tensor)
	if !ok || mt.b != b {
		return nil, exec.Unsupported(b.Name(), op, "%s is a %T, not a tensor of this metal backend", name, t)
	}
	if mt.buf == nil {
		return nil, fmt.Errorf("exec: metal: %s: %s was freed", op, name)
	}
	return mt, nil
}

func (b *Backend) opt(op, name string, t exec.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, nil
	}
	return b.get(op, name, t)
}

// Upload rounds data to f and writes it into a new shared buffer.
func (b *Backend) Upload(data []float32, shape []int, f precision.Format) (exec.Tensor, error) {
	if err := exec.CheckShape(shape); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	if n := exec.Numel(shape); n != len(data) {
		return nil, fmt.Errorf("exec: metal: upload: %d values for shape %v (%d elements)", len(data), shape, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.newTensor(shape, f)
	if err != nil {
		return nil, err
	}
	dst := t.buf.bytes()
	for i, v := range data {
		switch f {
		case precision.BF16:
			*(*uint16)(unsafe.Pointer(&dst[2*i])) = precision.BF16Bits(v)
		case precision.F16:
			*(*uint16)(unsafe.Pointer(&dst[2*i])) = precision.F16Bits(v)
		default:
			*(*float32)(unsafe.Pointer(&dst[4*i])) = v
		}
	}
	return t, nil
}

// Download waits for the queued work and widens t's values to f32.
func (b *Backend) Download(t exec.Tensor) ([]float32, error) {
	mt, err := b.get("download", "tensor", t)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.waitLocked(); err != nil {
		return nil, err
	}
	n := exec.Numel(mt.shape)
	out := make([]float32, n)
	src := mt.buf.bytes()
	for i := range out {
		switch mt.format {
		case precision.BF16:
			out[i] = precision.BF16ToF32(*(*uint16)(unsafe.Pointer(&src[2*i])))
		case precision.F16:
			out[i] = precision.F16ToF32(*(*uint16)(unsafe.Pointer(&src[2*i])))
		default:
			out[i] = *(*float32)(unsafe.Pointer(&src[4*i]))
		}
	}
	return out, nil
}

func (b *Backend) waitLocked() error {
	err := b.d.wait()
	for _, p := range b.pending {
		p.id.Send(sel.release)
	}
	b.pending = b.pending[:0]
	return err
}

// Free releases t's buffer once no reshape of it is live and the queued
// work is done with it.
func (b *Backend) Free(t exec.Tensor) {
	mt, ok := t.(*Tensor)
	if !ok || mt == nil || mt.buf == nil || mt.b != b {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mt.buf.refs--
	if mt.buf.refs == 0 {
		b.pending = append(b.pending, mt.buf)
		if len(b.pending) > 64 {
			b.waitLocked()
		}
	}
	mt.buf = nil
}

// Reshape shares x's buffer under a new shape.
func (b *Backend) Reshape(x exec.Tensor, shape []int) (exec.Tensor, error) {
	xt, err := b.get("reshape", "x", x)
	if err != nil {
		return nil, err
	}
	out := append([]int(nil), shape...)
	n, known, infer := exec.Numel(xt.shape), 1, -1
	for i, d := range out {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, fmt.Errorf("exec: reshape %v to %v: bad dimension %d", xt.shape, shape, d)
		default:
			known *= d
		}
	}
	if infer >= 0 && known != 0 {
		out[infer] = n / known
		known *= out[infer]
	}
	if known != n {
		return nil, fmt.Errorf("exec: reshape %v (%d elements) to %v", xt.shape, n, shape)
	}
	b.mu.Lock()
	xt.buf.refs++
	b.mu.Unlock()
	return &Tensor{shape: out, format: xt.format, buf: xt.buf, b: b}, nil
}

// run allocates an output and dispatches one kernel into it.
func (b *Backend) run(shape []int, f precision.Format, kernel string, n int, args func(out *Tensor) []arg) (exec.Tensor, error) {
	return b.runGroups(shape, f, kernel, n, 0, args)
}

// runGroups is run for a cooperative kernel: n threadgroups of threads
// threads each (threads 0: n threads of a grid-stride kernel).
func (b *Backend) runGroups(shape []int, f precision.Format, kernel string, n, threads int, args func(out *Tensor) []arg) (exec.Tensor, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out, err := b.newTensor(shape, f)
	if err != nil {
		return nil, err
	}
	if threads > 0 {
		err = b.d.dispatchGroups(kernel, n, threads, args(out)...)
	} else {
		err = b.d.dispatch(kernel, n, args(out)...)
	}
	if err != nil {
		out.buf.id.Send(sel.release)
		return nil, err
	}
	return out, nil
}

// ew runs zf_elementwise: output shape, inputs ins (≤ 3).
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
	p.Math, p.OutFmt = int32(s.Math), int32(s.Out)
	for i, t := range ins {
		p.Fmt[i] = int32(t.format)
	}
	n := int(p.N)
	if p.Vec != 0 {
		n /= 8
	}
	return b.run(shape, s.Out, "zf_elementwise", n, func(out *Tensor) []arg {
		a := []arg{{buf: out.buf}, {buf: out.buf}, {buf: out.buf}, {buf: out.buf}, {params: kernels.Bytes(&p)}}
		for i, t := range ins {
			a[1+i] = arg{buf: t.buf}
		}
		return a
	})
}

func cond(t *Tensor, x []int) *Tensor {
	return &Tensor{shape: exec.CondShape(t.shape, x), format: t.format, buf: t.buf, b: t.b}
}

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
	return f
}

// Cast rounds x to f.
func (b *Backend) Cast(x exec.Tensor, f precision.Format) (exec.Tensor, error) {
	xt, err := b.get("cast", "x", x)
	if err != nil {
		return nil, err
	}
	return b.ew("cast", xt.shape, exec.Out(f), []*Tensor{xt}, func(p *kernels.EW) { p.Op = kernels.OpCast })
}

func (b *Backend) binary(op string, code int32, a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
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
	shape, err := exec.Broadcast(at.shape, ct.shape)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return b.ew(op, shape, s, []*Tensor{at, ct}, func(p *kernels.EW) { p.Op = code })
}

// Add is a + b, rounded once.
func (b *Backend) Add(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("add", kernels.OpAdd, a, c, s)
}

// Mul is a · b, rounded once.
func (b *Backend) Mul(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("mul", kernels.OpMul, a, c, s)
}

// Sub is a − b, rounded once.
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

// Div is a / b (a · (1/b) under MathRecipDiv), rounded once.
func (b *Backend) Div(a, c exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	return b.binary("div", kernels.OpDiv, a, c, s)
}

// Act is f(x), rounded once.
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
	// RoundEach composes the activation of rounded primitives (zf_act_composed).
	var flags int32
	if s.Round&exec.RoundEach != 0 {
		flags = kernels.REach
	}
	return b.ew("act", xt.shape, s, []*Tensor{xt}, func(p *kernels.EW) { p.Op, p.Act, p.Flags = kernels.OpAct, int32(f), flags })
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
	gc := cond(gt, yt.shape)
	shape, err := exec.Broadcast(xt.shape, yt.shape)
	if err == nil {
		shape, err = exec.Broadcast(shape, gc.shape)
	}
	if err != nil {
		return nil, fmt.Errorf("gated residual: %w", err)
	}
	return b.ew("gated residual", shape, s, []*Tensor{xt, yt, gc}, func(p *kernels.EW) {
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
	gt, err := b.get("glu", "gate", gate)
	if err != nil {
		return nil, err
	}
	vt, err := b.get("glu", "value", value)
	if err != nil {
		return nil, err
	}
	shape, err := exec.Broadcast(gt.shape, vt.shape)
	if err != nil {
		return nil, fmt.Errorf("glu: %w", err)
	}
	return b.ew("glu", shape, s, []*Tensor{gt, vt}, func(p *kernels.EW) { p.Op, p.Act, p.Flags = kernels.OpGLU, int32(fn), flags(s) })
}

// Rope rotates the first RotaryDim elements of each head of x [B, S, H·D].
func (b *Backend) Rope(x, cos, sin exec.Tensor, p exec.RopeParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("rope: %w", err)
	}
	xt, err := b.get("rope", "x", x)
	if err != nil {
		return nil, err
	}
	ct, err := b.get("rope", "cos", cos)
	if err != nil {
		return nil, err
	}
	st, err := b.get("rope", "sin", sin)
	if err != nil {
		return nil, err
	}
	if len(xt.shape) != 3 || p.Heads <= 0 || xt.shape[2]%p.Heads != 0 || (p.Layout != exec.RopeInterleaved && p.Layout != exec.RopeHalf) {
		return nil, fmt.Errorf("exec: rope: x %v is not [B, S, H·D] for %d heads (layout %v)", xt.shape, p.Heads, p.Layout)
	}
	bsz, seq, d := xt.shape[0], xt.shape[1], xt.shape[2]/p.Heads
	r := p.RotaryDim
	if r == 0 {
		r = d
	}
	if r < 0 || r > d || r%2 != 0 {
		return nil, fmt.Errorf("exec: rope: rotary dim %d for heads of %d", p.RotaryDim, d)
	}
	c := ct.shape
	perBatch := len(c) == 3 && c[0] == bsz && bsz != 1
	shared := len(c) == 2 && c[0] == seq || len(c) == 3 && c[0] == 1 && c[1] == seq
	if !perBatch && !shared || c[len(c)-1] != r || fmt.Sprint(c) != fmt.Sprint(st.shape) || ct.format != st.format {
		return nil, fmt.Errorf("exec: rope: tables %v, %v for [%d, %d, %d]", c, st.shape, bsz, seq, r)
	}
	n := exec.Numel(xt.shape)
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
	return b.run(xt.shape, s.Out, "zf_rope_kernel", work, func(out *Tensor) []arg {
		return []arg{{buf: out.buf}, {buf: xt.buf}, {buf: ct.buf}, {buf: st.buf}, {params: kernels.Bytes(&rp)}}
	})
}

// TimestepEmbed computes diffusers' sinusoidal embedding on the GPU.
func (b *Backend) TimestepEmbed(t exec.Tensor, p exec.TimestepParams, s exec.Spec) (exec.Tensor, error) {
	if len(p.FreqOverrides) > 0 || s.Math&(exec.MathCUDASinCos|exec.MathF64SinCos) != 0 {
		// a table read off a reference's exp, CUDA's sin and cos or a table
		// made in float64: the
		// kernel computes its own frequencies and correctly rounded sin
		// and cos, so the host computes this one (exactly, then uploads)
		return b.Fallback.TimestepEmbed(t, p, s)
	}
	tt, err := b.get("timestep embed", "t", t)
	if err != nil {
		return nil, err
	}
	half := p.Dim / 2
	if len(tt.shape) != 1 || p.Dim <= 0 || p.Scale == 0 || p.MaxPeriod <= 0 || float32(half)-p.FreqShift == 0 {
		return nil, fmt.Errorf("exec: timestep embed: t %v with %+v", tt.shape, p)
	}
	div := float32(half) - p.FreqShift
	n := tt.shape[0] * p.Dim
	tp := kernels.TembP{N: int32(n), Dim: int32(p.Dim), Half: int32(half), Math: int32(s.Math), FmtT: int32(tt.format),
		OutFmt: int32(s.Out), NegLog: float32(-math.Log(float64(p.MaxPeriod))), Div: div, Recip: 1 / div, Scale: p.Scale}
	if p.FlipSinToCos {
		tp.Flip = 1
	}
	return b.run([]int{tt.shape[0], p.Dim}, s.Out, "zf_timestep", n, func(out *Tensor) []arg {
		return []arg{{buf: out.buf}, {buf: tt.buf}, {params: kernels.Bytes(&tp)}}
	})
}

// copyInto dispatches one strided copy.
func (b *Backend) copyInto(out, src *Tensor, dims, sst, dst []int, srcBase, dstBase int) error {
	p, err := kernels.NewCopy(dims, sst, dst, srcBase, dstBase, esize(src.format))
	if err != nil {
		return err
	}
	return b.d.dispatch("zf_copy", int(p.N), arg{buf: out.buf}, arg{buf: src.buf}, arg{params: kernels.Bytes(&p)})
}

// Permute: output axis i is input axis perm[i].
func (b *Backend) Permute(x exec.Tensor, perm []int) (exec.Tensor, error) {
	xt, err := b.get("permute", "x", x)
	if err != nil {
		return nil, err
	}
	outShape, axes, err := exec.PermuteShape(xt.shape, perm)
	if err != nil {
		return nil, err
	}
	r := len(outShape)
	in := exec.Strides(xt.shape)
	sst := make([]int, r)
	for i, a := range axes {
		sst[i] = in[a]
	}
	if d, _, _ := kernels.CollapseAxes(outShape, sst, exec.Strides(outShape)); len(d) > kernels.MaxRank {
		return nil, exec.Unsupported(b.Name(), "permute", "rank %d, %d once contiguous runs are merged (at most %d)", r, len(d), kernels.MaxRank)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out, err := b.newTensor(outShape, xt.format)
	if err != nil {
		return nil, err
	}
	return out, b.copyInto(out, xt, outShape, sst, exec.Strides(outShape), 0, 0)
}

// Slice copies x[..., start:end, ...] along axis.
func (b *Backend) Slice(x exec.Tensor, axis, start, end int) (exec.Tensor, error) {
	xt, err := b.get("slice", "x", x)
	if err != nil {
		return nil, err
	}
	ax, err := exec.Axis(axis, len(xt.shape))
	if err != nil {
		return nil, fmt.Errorf("slice: %w", err)
	}
	dim := xt.shape[ax]
	if start < 0 || end < start || end > dim {
		return nil, fmt.Errorf("exec: slice %v axis %d [%d:%d]: out of range", xt.shape, ax, start, end)
	}
	shape := append([]int(nil), xt.shape...)
	shape[ax] = end - start
	outer, inner, w := exec.Numel(xt.shape[:ax]), exec.Numel(xt.shape[ax+1:]), end-start
	b.mu.Lock()
	defer b.mu.Unlock()
	out, err := b.newTensor(shape, xt.format)
	if err != nil {
		return nil, err
	}
	return out, b.copyInto(out, xt, []int{outer, w * inner}, []int{dim * inner, 1}, []int{w * inner, 1}, start*inner, 0)
}

// Concat joins xs along axis.
func (b *Backend) Concat(xs []exec.Tensor, axis int) (exec.Tensor, error) {
	if len(xs) == 0 {
		return nil, fmt.Errorf("exec: concat: no tensors")
	}
	ts := make([]*Tensor, len(xs))
	for i, x := range xs {
		t, err := b.get("concat", fmt.Sprintf("input %d", i), x)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	ax, err := exec.Axis(axis, len(ts[0].shape))
	if err != nil {
		return nil, fmt.Errorf("concat: %w", err)
	}
	shape := append([]int(nil), ts[0].shape...)
	shape[ax] = 0
	for i, t := range ts {
		if t.format != ts[0].format || len(t.shape) != len(shape) {
			return nil, fmt.Errorf("exec: concat: input %d (%v %v) does not match input 0", i, t.format, t.shape)
		}
		for d := range t.shape {
			if d != ax && t.shape[d] != ts[0].shape[d] {
				return nil, fmt.Errorf("exec: concat on axis %d: input %d %v and input 0 %v differ on axis %d", ax, i, t.shape, ts[0].shape, d)
			}
		}
		shape[ax] += t.shape[ax]
	}
	outer, inner := exec.Numel(shape[:ax]), exec.Numel(shape[ax+1:])
	total := shape[ax] * inner
	b.mu.Lock()
	defer b.mu.Unlock()
	out, err := b.newTensor(shape, ts[0].format)
	if err != nil {
		return nil, err
	}
	pos := 0
	for _, t := range ts {
		w := t.shape[ax] * inner
		if w > 0 && outer > 0 {
			if err := b.copyInto(out, t, []int{outer, w}, []int{w, 1}, []int{total, 1}, 0, pos); err != nil {
				return nil, err
			}
		}
		pos += w
	}
	return out, nil
}
