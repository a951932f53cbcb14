package exec

import (
	"fmt"

	"github.com/zflow/zflow/precision"
)

// Fallback implements Extended by composing Basic ops, explicitly and
// exactly: an intermediate the Spec does not round is kept in f32 (which is
// what a fused f32 kernel computes), one it rounds is stored in s.Out, and
// the last primitive rounds to s.Out. TimestepEmbed and RopeTable are
// computed on the host (TimestepEmbedding, RopeTables) and uploaded.
//
// A backend embeds Fallback, sets B to itself, and defines the Extended
// methods it specialises; Go's method promotion picks its own first.
type Fallback struct {
	B Basic
}

// mid is the Spec of an intermediate: s.Out if s rounds at r, else f32.
func mid(s Spec, r Round) Spec {
	if s.Has(r) {
		return Spec{Out: s.Out, Math: s.Math}
	}
	return Spec{Out: precision.F32, Math: s.Math}
}

// final is the Spec of the last primitive: s without internal points.
func final(s Spec) Spec { return Spec{Out: s.Out, Math: s.Math} }

// freer frees the intermediates of one composition.
type freer struct {
	b  Basic
	ts []Tensor
}

func (f *freer) keep(t Tensor, err error) (Tensor, error) {
	if err == nil {
		f.ts = append(f.ts, t)
	}
	return t, err
}

func (f *freer) free() {
	for _, t := range f.ts {
		f.b.Free(t)
	}
}

// condition reshapes a conditioning tensor of rank rank(x)−1 ([B, D] for x
// [B, S, D]) to broadcast over x's sequence axis ([B, 1, D]), as
// CondShape says; other shapes are returned as they are.
func (f *freer) condition(c Tensor, x Tensor) (Tensor, error) {
	shape := CondShape(c.Shape(), x.Shape())
	if len(shape) == len(c.Shape()) {
		return c, nil
	}
	return f.keep(f.b.Reshape(c, shape))
}

// CondShape is the shape a conditioning tensor (shift, scale, gate) takes
// to broadcast against x: when x has rank ≥ 3 and c has rank(x)−1, c is
// [B, ..., D] and gains a 1 after its first axis ([B, D] → [B, 1, D]);
// otherwise c keeps its shape and NumPy broadcasting applies.
func CondShape(c, x []int) []int {
	if len(x) >= 3 && len(c) == len(x)-1 {
		out := make([]int, 0, len(x))
		out = append(out, c[0], 1)
		return append(out, c[1:]...)
	}
	return c
}

// Modulate composes x·(1 + scale) + shift (or x·scale + shift) from Add/Mul.
func (fb Fallback) Modulate(x, shift, scale Tensor, p ModulateParams, s Spec) (Tensor, error) {
	f := &freer{b: fb.B}
	defer f.free()
	sc, err := f.condition(scale, x)
	if err != nil {
		return nil, fmt.Errorf("modulate: %w", err)
	}
	if p.PlusOne {
		one, err := f.keep(fb.B.Upload([]float32{1}, []int{1}, precision.F32))
		if err != nil {
			return nil, fmt.Errorf("modulate: %w", err)
		}
		if sc, err = f.keep(fb.B.Add(one, sc, mid(s, RoundScale))); err != nil {
			return nil, fmt.Errorf("modulate: 1+scale: %w", err)
		}
	}
	if shift == nil {
		return fb.B.Mul(x, sc, final(s))
	}
	prod, err := f.keep(fb.B.Mul(x, sc, mid(s, RoundProduct)))
	if err != nil {
		return nil, fmt.Errorf("modulate: product: %w", err)
	}
	sh, err := f.condition(shift, x)
	if err != nil {
		return nil, fmt.Errorf("modulate: %w", err)
	}
	return fb.B.Add(prod, sh, final(s))
}

// GatedResidual composes x + g(gate)·y from Act, Mul and Add.
func (fb Fallback) GatedResidual(x, y, gate Tensor, g ActKind, s Spec) (Tensor, error) {
	f := &freer{b: fb.B}
	defer f.free()
	gt, err := f.condition(gate, y)
	if err != nil {
		return nil, fmt.Errorf("gated residual: %w", err)
	}
	if g != ActIdentity || s.Has(RoundGate) {
		if gt, err = f.keep(fb.B.Act(gt, g, mid(s, RoundGate))); err != nil {
			return nil, fmt.Errorf("gated residual: gate: %w", err)
		}
	}
	prod, err := f.keep(fb.B.Mul(gt, y, mid(s, RoundProduct)))
	if err != nil {
		return nil, fmt.Errorf("gated residual: product: %w", err)
	}
	return fb.B.Add(x, prod, final(s))
}

// GLU composes f(gate)·value from Act and Mul.
func (fb Fallback) GLU(gate, value Tensor, fn ActKind, s Spec) (Tensor, error) {
	f := &freer{b: fb.B}
	defer f.free()
	g, err := f.keep(fb.B.Act(gate, fn, mid(s, RoundGate)))
	if err != nil {
		return nil, fmt.Errorf("glu: %w", err)
	}
	return fb.B.Mul(g, value, final(s))
}

// Chunk composes torch.chunk from Slice.
func (fb Fallback) Chunk(x Tensor, n, axis int) ([]Tensor, error) {
	sizes, ax, err := ChunkSizes(x.Shape(), n, axis)
	if err != nil {
		return nil, err
	}
	out := make([]Tensor, 0, len(sizes))
	start := 0
	for _, sz := range sizes {
		t, err := fb.B.Slice(x, ax, start, start+sz)
		if err != nil {
			for _, o := range out {
				fb.B.Free(o)
			}
			return nil, fmt.Errorf("chunk: %w", err)
		}
		out = append(out, t)
		start += sz
	}
	return out, nil
}

// ChunkSizes are torch.chunk's piece sizes along axis: ceil(dim/n) each,
// the last one shorter, fewer than n pieces when dim runs out.
func ChunkSizes(shape []int, n, axis int) ([]int, int, error) {
	ax, err := Axis(axis, len(shape))
	if err != nil {
		return nil, 0, fmt.Errorf("chunk: %w", err)
	}
	if n <= 0 {
		return nil, 0, fmt.Errorf("exec: chunk: %d pieces", n)
	}
	dim := shape[ax]
	size := (dim + n - 1) / n
	var sizes []int
	for start := 0; start < dim; start += size {
		sizes = append(sizes, min(size, dim-start))
	}
	if dim == 0 {
		sizes = []int{0}
	}
	return sizes, ax, nil
}

// PatchShapes checks a Patchify input [B, C, H, W] against p and returns the
// 6-D view [B, C, H/p, p, W/p, p] and the packed shape [B, H/p·W/p, C·p·p].
func PatchShapes(x []int, p PatchParams) (six, packed []int, err error) {
	if len(x) != 4 {
		return nil, nil, fmt.Errorf("exec: patchify: input %v is not [B, C, H, W]", x)
	}
	b, c, h, w := x[0], x[1], x[2], x[3]
	q := p.Patch
	switch {
	case q <= 0:
		return nil, nil, fmt.Errorf("exec: patchify: patch size %d", q)
	case h%q != 0 || w%q != 0:
		return nil, nil, fmt.Errorf("exec: patchify: %d×%d is not a multiple of patch %d", h, w, q)
	case p.Height != 0 && p.Height != h, p.Width != 0 && p.Width != w:
		return nil, nil, fmt.Errorf("exec: patchify: input is %d×%d, params say %d×%d", h, w, p.Height, p.Width)
	}
	return []int{b, c, h / q, q, w / q, q}, []int{b, (h / q) * (w / q), c * q * q}, nil
}

// Patchify composes pack_latents from Reshape and Permute.
func (fb Fallback) Patchify(x Tensor, p PatchParams) (Tensor, error) {
	six, packed, err := PatchShapes(x.Shape(), p)
	if err != nil {
		return nil, err
	}
	f := &freer{b: fb.B}
	defer f.free()
	v, err := f.keep(fb.B.Reshape(x, six))
	if err != nil {
		return nil, fmt.Errorf("patchify: %w", err)
	}
	v, err = f.keep(fb.B.Permute(v, []int{0, 2, 4, 1, 3, 5}))
	if err != nil {
		return nil, fmt.Errorf("patchify: %w", err)
	}
	return fb.B.Reshape(v, packed)
}

// Unpatchify composes unpack_latents from Reshape and Permute.
func (fb Fallback) Unpatchify(x Tensor, p PatchParams) (Tensor, error) {
	sh := x.Shape()
	if len(sh) != 3 || p.Patch <= 0 || p.Height <= 0 || p.Width <= 0 {
		return nil, fmt.Errorf("exec: unpatchify: input %v with patch %d, %d×%d", sh, p.Patch, p.Height, p.Width)
	}
	q := p.Patch
	c := sh[2] / (q * q)
	if c*q*q != sh[2] || p.Height%q != 0 || p.Width%q != 0 || sh[1] != (p.Height/q)*(p.Width/q) {
		return nil, fmt.Errorf("exec: unpatchify: input %v does not hold %d×%d in patches of %d", sh, p.Height, p.Width, q)
	}
	f := &freer{b: fb.B}
	defer f.free()
	v, err := f.keep(fb.B.Reshape(x, []int{sh[0], p.Height / q, p.Width / q, c, q, q}))
	if err != nil {
		return nil, fmt.Errorf("unpatchify: %w", err)
	}
	v, err = f.keep(fb.B.Permute(v, []int{0, 3, 1, 4, 2, 5}))
	if err != nil {
		return nil, fmt.Errorf("unpatchify: %w", err)
	}
	return fb.B.Reshape(v, []int{sh[0], c, p.Height, p.Width})
}

// HostAct computes f(x) on the host (ActivateSpec) and uploads it: for a
// math variant a backend's kernels do not have (CUDA's sinf and cosf
// emulated, on any device).
func (fb Fallback) HostAct(x Tensor, f ActKind, s Spec) (Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("act: %w", err)
	}
	xs, err := fb.B.Download(x)
	if err != nil {
		return nil, fmt.Errorf("act: %w", err)
	}
	for i, v := range xs {
		xs[i] = s.Out.Round(ActivateSpec(f, v, s))
	}
	return fb.B.Upload(xs, x.Shape(), s.Out)
}

// TimestepEmbed computes the embedding on the host and uploads it.
func (fb Fallback) TimestepEmbed(t Tensor, p TimestepParams, s Spec) (Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("timestep embed: %w", err)
	}
	if len(t.Shape()) != 1 {
		return nil, fmt.Errorf("exec: timestep embed: timesteps %v are not 1-D", t.Shape())
	}
	ts, err := fb.B.Download(t)
	if err != nil {
		return nil, fmt.Errorf("timestep embed: %w", err)
	}
	emb, err := TimestepEmbedding(ts, p, s.Math)
	if err != nil {
		return nil, err
	}
	return fb.B.Upload(emb, []int{len(ts), p.Dim}, s.Out)
}

// RopeTable computes the tables on the host and uploads them.
func (fb Fallback) RopeTable(pos Tensor, p RopeTableParams, s Spec) (cos, sin Tensor, err error) {
	if err := s.Check(); err != nil {
		return nil, nil, fmt.Errorf("rope table: %w", err)
	}
	sh := pos.Shape()
	if len(sh) != 2 {
		return nil, nil, fmt.Errorf("exec: rope table: positions %v are not [S, axes]", sh)
	}
	ps, err := fb.B.Download(pos)
	if err != nil {
		return nil, nil, fmt.Errorf("rope table: %w", err)
	}
	c, sn, err := RopeTables(ps, sh[0], p, s.Math)
	if err != nil {
		return nil, nil, err
	}
	width := len(c) / max(sh[0], 1)
	if cos, err = fb.B.Upload(c, []int{sh[0], width}, s.Out); err != nil {
		return nil, nil, fmt.Errorf("rope table: %w", err)
	}
	if sin, err = fb.B.Upload(sn, []int{sh[0], width}, s.Out); err != nil {
		fb.B.Free(cos)
		return nil, nil, fmt.Errorf("rope table: %w", err)
	}
	return cos, sin, nil
}

// SSMScan has no composition from Basic ops: a backend that does not
// define its own refuses it, naming itself.
func (fb Fallback) SSMScan(x, dt, a, bm, cm, d Tensor, s Spec) (Tensor, error) {
	return nil, Unsupported(fb.B.Name(), "ssm_scan", "no selective-scan kernel (the cpu backend runs it)")
}

// DeltaScan has no composition from Basic ops: a backend that does not
// define its own refuses it, naming itself.
func (fb Fallback) DeltaScan(q, k, v, g, beta Tensor, s Spec) (Tensor, error) {
	return nil, Unsupported(fb.B.Name(), "delta_scan", "no delta-rule scan kernel (the cpu backend runs it)")
}

// MemoryScan has no composition from Basic ops: a backend that does not
// define its own refuses it, naming itself.
func (fb Fallback) MemoryScan(q, k, v, i, f Tensor, eps float32, s Spec) (Tensor, error) {
	return nil, Unsupported(fb.B.Name(), "memory_scan", "no matrix-memory scan kernel (the cpu backend runs it)")
}

// FFT2Real has no composition from Basic ops: a backend that does not
// define its own refuses it, naming itself.
func (fb Fallback) FFT2Real(x Tensor, s Spec) (Tensor, error) {
	return nil, Unsupported(fb.B.Name(), "fft2_real", "no Fourier transform kernel (the cpu backend runs it)")
}

// Sinkhorn has no composition from Basic ops: a backend that does not
// define its own refuses it, naming itself.
func (fb Fallback) Sinkhorn(x Tensor, p SinkhornParams, s Spec) (Tensor, error) {
	return nil, Unsupported(fb.B.Name(), "sinkhorn", "no Sinkhorn normalisation kernel (the cpu backend runs it)")
}

// MatMul composed of Basic ops with the arithmetic the op defines: for
// each k in order, a's column k times b's row k ([.., M, 1]·[.., 1, N],
// each product rounded to f32) added to the running f32 sum, which is
// rounded once to s.Out. Two ops per k: a backend with a kernel of its
// own runs long products faster.
func (fb Fallback) MatMul(a, b Tensor, s Spec) (Tensor, error) {
	const op = "matmul"
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.Round != 0 || s.Math != 0 {
		return nil, Unsupported(fb.B.Name(), op, "spec %v: the product rounds once, in precise math", s)
	}
	shape, err := CheckMatMul(a.Shape(), b.Shape())
	if err != nil {
		return nil, err
	}
	r := len(shape)
	f32 := Out(precision.F32)
	var sum Tensor
	for k := range a.Shape()[r-1] {
		ak, err := fb.B.Slice(a, r-1, k, k+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		bk, err := fb.B.Slice(b, r-2, k, k+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		p, err := fb.B.Mul(ak, bk, f32)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if sum == nil {
			sum = p
		} else if sum, err = fb.B.Add(sum, p, f32); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	return fb.B.Cast(sum, s.Out)
}

// Recurrence has no composition from Basic ops here: a backend that does
// not run it says so.
func (fb Fallback) Recurrence(xg, whh, bh Tensor, p RecurrenceParams, s Spec) (Tensor, error) {
	return nil, Unsupported(fb.B.Name(), "recurrence", "no recurrent scan kernel (the cpu backend runs it)")
}
