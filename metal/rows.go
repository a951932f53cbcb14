//go:build darwin

package metal

import (
	"fmt"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// Norm runs the one source's row kernel zf_norm_seq (one thread a group
// of the norm, the CPU reference's f64 statistics); Linear and Attention
// run its cooperative kernels (tiles.zf): zf_linear_tiled, and
// zf_attention_tiled or zf_attention_flash, with the threadgroup sizes
// their tiles are written for. The tiled kernels compute the row kernels'
// arithmetic, each reduction in the CPU reference's order, which package
// kernels checks bit for bit on the host and package cuda on an NVIDIA GPU
// (README.md says what has run where).

// SetExactAttention, when on, sends every attention to the exact kernel
// (zf_attention_tiled) even where the flash kernel may take it (tests).
func (b *Backend) SetExactAttention(on bool) {
	b.mu.Lock()
	b.exactAttn = on
	b.mu.Unlock()
}

func format(t *Tensor) precision.Format {
	if t == nil {
		return 0
	}
	return t.format
}

// bufOr is t's buffer, or alt's where t is absent (Metal wants every
// argument bound; the kernel does not read it).
func bufOr(t, alt *Tensor) *buffer {
	if t == nil {
		return alt.buf
	}
	return t.buf
}

// Norm normalises groups of the last axis with the CPU reference's f64
// statistics (emulated in integers: Metal has no f64). RoundStats,
// RoundMoments and MathWelford are refused.
func (b *Backend) Norm(x, gamma, beta exec.Tensor, p exec.NormParams, s exec.Spec) (exec.Tensor, error) {
	xt, err := b.get("norm", "x", x)
	if err != nil {
		return nil, err
	}
	gt, err := b.opt("norm", "gamma", gamma)
	if err != nil {
		return nil, err
	}
	bt, err := b.opt("norm", "beta", beta)
	if err != nil {
		return nil, err
	}
	np, err := kernels.NormSeq(b.Name(), xt.shape, xt.format, format(gt), format(bt), p, s)
	if err != nil {
		return nil, err
	}
	for _, t := range []*Tensor{gt, bt} {
		if t != nil && exec.Numel(t.shape) != int(np.G) {
			return nil, fmt.Errorf("exec: norm: parameter %v for groups of %d", t.shape, np.G)
		}
	}
	return b.run(xt.shape, s.Out, "zf_norm_seq", int(np.Groups), func(out *Tensor) []arg {
		return []arg{{buf: out.buf}, {buf: xt.buf}, {buf: bufOr(gt, xt)}, {buf: bufOr(bt, xt)}, {params: kernels.Bytes(&np)}}
	})
}

// Linear is x·Wᵀ + b: zf_linear_tiled, 64 × 64 outputs a threadgroup of
// 256 threads, each output's sum in k order (zf_linear_seq's bits).
func (b *Backend) Linear(x, w, bias exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	xt, err := b.get("linear", "x", x)
	if err != nil {
		return nil, err
	}
	wt, err := b.get("linear", "weight", w)
	if err != nil {
		return nil, err
	}
	bt, err := b.opt("linear", "bias", bias)
	if err != nil {
		return nil, err
	}
	lp, shape, err := kernels.LinearSeq(b.Name(), xt.shape, wt.shape, xt.format, wt.format, format(bt), s)
	if err != nil {
		return nil, err
	}
	if bt != nil && (len(bt.shape) != 1 || bt.shape[0] != int(lp.N)) {
		return nil, fmt.Errorf("exec: linear: bias %v for %d outputs", bt.shape, lp.N)
	}
	return b.runGroups(shape, s.Out, "zf_linear_tiled", kernels.LinearTiledGroups(lp), kernels.GemmThreads, func(out *Tensor) []arg {
		return []arg{{buf: out.buf}, {buf: xt.buf}, {buf: wt.buf}, {buf: bufOr(bt, xt)}, {params: kernels.Bytes(&lp)}}
	})
}

// Attention is scaled dot-product attention, 32 query rows of a head a
// threadgroup of 256 threads sharing each K and V tile: the flash kernel
// (one pass, running maximum; not bit-exact, within kernels.FlashBound)
// where kernels.Flash allows it, as the CUDA backend chooses its flash
// kernels, else the exact one (zf_attention_seq's arithmetic). Heads
// wider than kernels.AttnDMax, MathOnlineSoftmax and sinks are refused.
func (b *Backend) Attention(q, k, v, mask, bias, sinks exec.Tensor, p exec.AttentionParams, s exec.Spec) (exec.Tensor, error) {
	if sinks != nil {
		return nil, exec.Unsupported(b.Name(), "attention", "attention sinks (no Metal kernel yet)")
	}
	qt, err := b.get("attention", "q", q)
	if err != nil {
		return nil, err
	}
	kt, err := b.get("attention", "k", k)
	if err != nil {
		return nil, err
	}
	vt, err := b.get("attention", "v", v)
	if err != nil {
		return nil, err
	}
	mt, err := b.opt("attention", "mask", mask)
	if err != nil {
		return nil, err
	}
	bt, err := b.opt("attention", "bias", bias)
	if err != nil {
		return nil, err
	}
	a, err := exec.CheckAttention(q, k, v, mask, bias, nil, p)
	if err != nil {
		return nil, err
	}
	ap, slopes, err := kernels.AttentionSeq(b.Name(), a, p, s, qt.format, kt.format, vt.format, format(mt), format(bt))
	if err != nil {
		return nil, err
	}
	g := a.AttentionDims
	b.mu.Lock()
	defer b.mu.Unlock()
	out, err := b.newTensor([]int{g.B, g.Sq, g.H * g.D}, s.Out)
	if err != nil {
		return nil, err
	}
	sb := qt.buf
	if slopes != nil {
		if sb, err = b.d.alloc(4 * len(slopes)); err != nil {
			out.buf.id.Send(sel.release)
			return nil, fmt.Errorf("exec: metal: attention: the ALiBi slopes: %w", err)
		}
		copy(sb.bytes(), unsafe.Slice((*byte)(unsafe.Pointer(&slopes[0])), 4*len(slopes)))
		b.pending = append(b.pending, sb) // released once the queue has drained past this dispatch
	}
	kernel := "zf_attention_tiled"
	if ok, _ := kernels.Flash(ap, s, qt.format, kt.format, vt.format); ok && !b.exactAttn {
		kernel = "zf_attention_flash"
	}
	err = b.d.dispatchGroups(kernel, kernels.AttentionGroups(ap), kernels.AttnThreads, arg{buf: out.buf}, arg{buf: qt.buf}, arg{buf: kt.buf},
		arg{buf: vt.buf}, arg{buf: bufOr(mt, qt)}, arg{buf: bufOr(bt, qt)}, arg{buf: sb}, arg{params: kernels.Bytes(&ap)})
	if err != nil {
		out.buf.id.Send(sel.release)
		return nil, err
	}
	return out, nil
}
