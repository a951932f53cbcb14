//go:build linux

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// attnP is zf_attn_p (the exact kernel).
type attnP struct {
	B, Sq, Sk, H, KV, D                       int32
	FmtQ, FmtK, FmtV, FmtM, OutFmt, Mask      int32
	MSb, MSi, MSj, RS, RProb, RW, Math, Total int32
	Scale                                     float32
	Each, Window                              int32
	Cap                                       float32
	Alibi, HasBias, FmtB                      int32
	BSb, BSh, BSi, BSj                        int32
	HasSinks, FmtS                            int32
	Online                                    int32 // 0 off; 1 a plain chain; 2 after cap, ALiBi or bias
	RQ                                        int32 // q·scale rounded to OutFmt before q·kᵀ (exec.RoundQuery)
}

// flashP is zf_flash_p.
type flashP struct {
	B, Sq, Sk, H, KV, QRs, KRs, Mask, MSb, MSi, MSj, FmtM, OutFmt, RoundScores int32
	Scale                                                                      float32
	Window                                                                     int32
	Cap                                                                        float32
	FmtB, BSb, BSh, BSi, BSj                                                   int32
}

// SetExactAttention, when on, sends every attention to the exact kernel
// (tests; it is slow at real sizes).
func (b *Backend) SetExactAttention(on bool) {
	b.mu.Lock()
	b.exactAttn = on
	b.mu.Unlock()
}

// SetFlashWarps sets the warps per block of the flash kernel (4 or 8: 64
// or 128 query rows a block); the default is 4, or $ZFLOW_FLASH_WARPS.
func (b *Backend) SetFlashWarps(n int) error {
	if n != 4 && n != 8 {
		return fmt.Errorf("cuda: flash warps %d (4 or 8)", n)
	}
	b.mu.Lock()
	b.flashWarps = n
	b.mu.Unlock()
	return nil
}

// flashSmem is the flash kernel's dynamic shared memory: two stages of K
// and V tiles of 64 rows of d+8 halves.
func flashSmem(d int) int { return 2 * 2 * 64 * (d + 8) * 2 }

// flashFlags are the flash kernel's compile-time options besides the
// head dim and the warps: what each module carries.
type flashFlags struct {
	f16, round, cap, alibi, bias bool
	mask                         exec.MaskKind
}

func bit(on bool) int {
	if on {
		return 1
	}
	return 0
}

// flashKernel compiles (once) and returns the flash kernel for head dim d,
// the options ff and the current warps a block.
func (b *Backend) flashKernel(d int, ff flashFlags) (string, int, error) {
	nw := b.flashWarps
	if nw == 0 {
		nw = 4
	}
	name := fmt.Sprintf("zf_flash_d%d_w%d_f%d_m%d_r%d_c%d_a%d_b%d", d, nw, bit(ff.f16), int(ff.mask), bit(ff.round),
		bit(ff.cap), bit(ff.alibi), bit(ff.bias))
	if _, ok := b.fns[name]; ok {
		return name, nw, nil
	}
	opts := []string{fmt.Sprintf("-DZF_D=%d", d), fmt.Sprintf("-DZF_NW=%d", nw), fmt.Sprintf("-DZF_HALF_IN=%d", bit(ff.f16)),
		fmt.Sprintf("-DZF_MASK=%d", int(ff.mask)), fmt.Sprintf("-DZF_ROUND=%d", bit(ff.round)),
		fmt.Sprintf("-DZF_CAP=%d", bit(ff.cap)), fmt.Sprintf("-DZF_ALIBI=%d", bit(ff.alibi)), fmt.Sprintf("-DZF_BIAS=%d", bit(ff.bias))}
	if err := b.loadModule(name, pointwiseSource()+flashHelpers+flashSource, opts, []string{"zf_flash"}); err != nil {
		return "", 0, err
	}
	fn := b.fns["zf_flash"]
	if err := b.d.check("cuFuncSetAttribute", b.d.cuFuncSetAttribute(fn, funcAttrMaxDynamicShared, int32(flashSmem(d)))); err != nil {
		return "", 0, err
	}
	b.fns[name] = fn
	return name, nw, nil
}

// Attention is scaled dot-product attention per head (see the package
// documentation for which kernel runs and what it rounds); window, cap,
// ALiBi and bias as exec.Backend says, in both kernels.
func (b *Backend) Attention(q, k, v, mask, bias, sinks exec.Tensor, p exec.AttentionParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("attention: %w", err)
	}
	if err := b.refuse("attention", s, exec.RoundAccum, 0); err != nil {
		return nil, err
	}
	ts, err := b.gets("attention", []string{"q", "k", "v"}, q, k, v)
	if err != nil {
		return nil, err
	}
	qt, kt, vt := ts[0], ts[1], ts[2]
	mt, err := b.opt("attention", "mask", mask)
	if err != nil {
		return nil, err
	}
	bt, err := b.opt("attention", "bias", bias)
	if err != nil {
		return nil, err
	}
	st, err := b.opt("attention", "sinks", sinks)
	if err != nil {
		return nil, err
	}
	a, err := exec.CheckAttention(q, k, v, mask, bias, sinks, p)
	if err != nil {
		return nil, err
	}
	if p.Window > 0 && p.Mask != exec.MaskCausal {
		// the kernels skip key blocks by the causal window only
		return nil, exec.Unsupported(b.Name(), "attention", "a bidirectional window (band) of %d", p.Window)
	}
	if p.Block > 0 {
		return nil, exec.Unsupported(b.Name(), "attention", "block-local attention (blocks of %d)", p.Block)
	}
	g := a.AttentionDims
	mst, bst := a.MaskStrides, a.BiasStrides
	if mst == nil {
		mst = []int{0, 0, 0}
	}
	if bst == nil {
		bst = []int{0, 0, 0, 0}
	}
	each := s.Round&exec.RoundEach != 0
	rprob, rw := s.Round&exec.RoundProbs != 0, s.Round&exec.RoundWeights != 0
	if rprob && rw {
		return nil, fmt.Errorf("exec: attention: RoundProbs and RoundWeights both set")
	}
	if each {
		rprob = true
	}
	rq := s.Round&exec.RoundQuery != 0
	outShape := []int{g.B, g.Sq, g.H * g.D}
	if exec.Numel(outShape) > math.MaxInt32 || exec.Numel(kt.shape) > math.MaxInt32 {
		return nil, exec.Unsupported(b.Name(), "attention", "tensors over 2³¹ elements")
	}
	if bt != nil && exec.Numel(bt.shape) > math.MaxInt32 {
		return nil, exec.Unsupported(b.Name(), "attention", "a bias over 2³¹ elements")
	}
	// The ALiBi slopes (exec.ALiBiSlopes, the one formula) go up as f32.
	var slopes *Tensor
	if p.ALiBi {
		st, err := b.Upload(p.Slopes(g.H), []int{g.H}, precision.F32)
		if err != nil {
			return nil, fmt.Errorf("attention: alibi slopes: %w", err)
		}
		slopes = st.(*Tensor)
		defer b.Free(slopes) // later users are ordered after the launch
	}
	ptr := func(t *Tensor) uintptr {
		if t != nil {
			return t.ptr()
		}
		return qt.ptr() // never read
	}
	fmtM, fmtB := int32(precision.F32), int32(precision.F32)
	if mt != nil {
		fmtM = int32(mt.format)
	}
	if bt != nil {
		fmtB = int32(bt.format)
	}
	fmtIn := qt.format
	// Sinks run in the exact kernel only: the flash kernel's online
	// softmax has no extra column.
	// q scaled and rounded first (RoundQuery) is the exact kernel's alone.
	flash := !b.exactAttn && !rprob && !rq && st == nil && (fmtIn == precision.BF16 || fmtIn == precision.F16) &&
		kt.format == fmtIn && vt.format == fmtIn && (g.D == 64 || g.D == 128)
	online := s.Math&exec.MathOnlineSoftmax != 0
	if online && (rprob || rq || st != nil) {
		return nil, exec.Unsupported(b.Name(), "attention", "%v with %v or sinks (a flash kernel rounds neither; no sinks measured)", exec.MathOnlineSoftmax, s.Round)
	}
	return b.result(outShape, s.Out, func(out *Tensor) error {
		if exec.Numel(outShape) == 0 {
			return nil
		}
		if flash {
			ff := flashFlags{f16: fmtIn == precision.F16, round: s.Has(exec.RoundScores), cap: p.Softcap > 0,
				alibi: p.ALiBi, bias: bt != nil, mask: p.Mask}
			fp := flashP{B: int32(g.B), Sq: int32(g.Sq), Sk: int32(g.Sk), H: int32(g.H), KV: int32(g.KV),
				QRs: int32(g.H * g.D), KRs: int32(g.KV * g.D), Mask: int32(p.Mask), MSb: int32(mst[0]), MSi: int32(mst[1]),
				MSj: int32(mst[2]), FmtM: fmtM, OutFmt: int32(s.Out), Scale: a.Scale, Window: int32(p.Window), Cap: p.Softcap,
				FmtB: fmtB, BSb: int32(bst[0]), BSh: int32(bst[1]), BSi: int32(bst[2]), BSj: int32(bst[3])}
			if ff.round {
				fp.RoundScores = 1
			}
			if b.useHopper(g.D) {
				ok, err := b.launchHopper(g.D, ff, &fp, out.ptr(), qt.ptr(), kt.ptr(), vt.ptr(), ptr(mt), ptr(bt), ptr(slopes))
				if ok || err != nil {
					return err
				}
			}
			name, nw, err := b.flashKernel(g.D, ff)
			if err != nil {
				return err
			}
			rows := 16 * nw
			grid := [3]uint32{uint32((g.Sq + rows - 1) / rows), uint32(g.B * g.H), 1}
			pb := unsafe.Slice((*byte)(unsafe.Pointer(&fp)), unsafe.Sizeof(fp))
			return b.launch(name, grid, [3]uint32{uint32(32 * nw), 1, 1}, uint32(flashSmem(g.D)), out.ptr(), qt.ptr(), kt.ptr(), vt.ptr(),
				ptr(mt), ptr(bt), ptr(slopes), pb)
		}
		total := g.B * g.H * g.Sq
		scratch, err := b.alloc(4 * total * (g.Sk + g.D))
		if err != nil {
			return err
		}
		defer b.release(scratch) // later users are ordered after this launch
		ap := attnP{B: int32(g.B), Sq: int32(g.Sq), Sk: int32(g.Sk), H: int32(g.H), KV: int32(g.KV), D: int32(g.D),
			FmtQ: int32(qt.format), FmtK: int32(kt.format), FmtV: int32(vt.format), FmtM: fmtM, OutFmt: int32(s.Out),
			Mask: int32(p.Mask), MSb: int32(mst[0]), MSi: int32(mst[1]), MSj: int32(mst[2]), Math: int32(s.Math &^ exec.MathTensorCore),
			Total: int32(total), Scale: a.Scale, Window: int32(p.Window), Cap: p.Softcap, FmtB: fmtB,
			BSb: int32(bst[0]), BSh: int32(bst[1]), BSi: int32(bst[2]), BSj: int32(bst[3])}
		if exec.TensorCoreSums(s, qt.format, kt.format, vt.format) {
			ap.Math |= int32(exec.MathTensorCore) // q·k and the weights·v as tensor cores sum them
		}
		ap.RS, ap.Each = int32(bit(s.Has(exec.RoundScores) && !each)), int32(bit(each))
		ap.RProb, ap.RW = int32(bit(rprob)), int32(bit(rw))
		ap.Alibi, ap.HasBias = int32(bit(p.ALiBi)), int32(bit(bt != nil))
		ap.HasSinks, ap.FmtS = int32(bit(st != nil)), int32(precision.F32)
		ap.RQ = int32(bit(rq))
		if online {
			ap.Online = 1
			if p.Softcap > 0 || p.ALiBi || bt != nil {
				ap.Online = 2
			}
		}
		if st != nil {
			ap.FmtS = int32(st.format)
		}
		pb := unsafe.Slice((*byte)(unsafe.Pointer(&ap)), unsafe.Sizeof(ap))
		blocks := max(1, min((total+127)/128, b.sms*32))
		return b.launch("zf_attn_exact", [3]uint32{uint32(blocks), 1, 1}, [3]uint32{128, 1, 1}, 0,
			out.ptr(), qt.ptr(), kt.ptr(), vt.ptr(), ptr(mt), ptr(bt), ptr(slopes), scratch.ptr, ptr(st), pb)
	})
}
