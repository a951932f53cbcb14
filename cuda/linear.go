//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// gemmState is the cuBLASLt handle, workspace and the plans made so far.
type gemmState struct {
	handle      uintptr
	ws          uintptr
	wsSize      uint64
	plans       map[gemmKey]*gemmPlan
	alpha, beta *float32 // pinned host scalars
}

type gemmKey struct {
	m, n, k int
	ab, d   int32 // cudaDataType of A/B and of C/D
	bias    bool
}

type gemmPlan struct {
	desc, la, lb, ld uintptr
	algo             [64]byte
	ws               uint64
}

const gemmWorkspace = 32 << 20

func (b *Backend) initGemm() error {
	g := &b.gemm
	if err := b.lt.check("cublasLtCreate", b.lt.cublasLtCreate(&g.handle)); err != nil {
		return err
	}
	if err := b.d.check("cuMemAlloc workspace", b.d.cuMemAlloc(&g.ws, gemmWorkspace)); err != nil {
		return err
	}
	g.wsSize = gemmWorkspace
	g.plans = map[gemmKey]*gemmPlan{}
	return nil
}

func cudaType(f precision.Format) int32 {
	switch f {
	case precision.BF16:
		return cudaR16BF
	case precision.F16:
		return cudaR16F
	}
	return cudaR32F
}

// storage is the device storage format of f (f64-format tensors hold f32).
func storage(f precision.Format) precision.Format {
	if f == precision.F64 {
		return precision.F32
	}
	return f
}

// plan returns (making once) the cuBLASLt descriptors and algorithm for
// row-major y[m×n] = x[m×k]·w[n×k]ᵀ, computed column-major as
// yᵀ[n×m] = op_T(w)·xᵀ.
func (b *Backend) plan(key gemmKey) (*gemmPlan, error) {
	if p, ok := b.gemm.plans[key]; ok {
		return p, nil
	}
	lt := b.lt
	p := &gemmPlan{}
	if err := lt.check("matmul desc", lt.cublasLtMatmulDescCreate(&p.desc, cublasCompute32F, cudaR32F)); err != nil {
		return nil, err
	}
	ta, tb := int32(opT), int32(opN)
	lt.cublasLtMatmulDescSetAttribute(p.desc, descTransA, unsafe.Pointer(&ta), 4)
	lt.cublasLtMatmulDescSetAttribute(p.desc, descTransB, unsafe.Pointer(&tb), 4)
	epi := uint32(epilogueDefault)
	if key.bias {
		epi = epilogueBias
	}
	if err := lt.check("epilogue", lt.cublasLtMatmulDescSetAttribute(p.desc, descEpilogue, unsafe.Pointer(&epi), 4)); err != nil {
		return nil, err
	}
	m, n, k := uint64(key.m), uint64(key.n), uint64(key.k)
	if err := lt.check("layout A", lt.cublasLtMatrixLayoutCreate(&p.la, key.ab, k, n, int64(k))); err != nil {
		return nil, err
	}
	if err := lt.check("layout B", lt.cublasLtMatrixLayoutCreate(&p.lb, key.ab, k, m, int64(k))); err != nil {
		return nil, err
	}
	if err := lt.check("layout D", lt.cublasLtMatrixLayoutCreate(&p.ld, key.d, n, m, int64(n))); err != nil {
		return nil, err
	}
	var pref uintptr
	if err := lt.check("preference", lt.cublasLtMatmulPreferenceCreate(&pref)); err != nil {
		return nil, err
	}
	ws := b.gemm.wsSize
	lt.cublasLtMatmulPreferenceSetAttribute(pref, prefMaxWorkspace, unsafe.Pointer(&ws), 8)
	if key.bias {
		// The heuristic reads the bias pointer's alignment: give it an
		// aligned placeholder (the real pointer is set per call).
		ptr := b.gemm.ws
		lt.cublasLtMatmulDescSetAttribute(p.desc, descBiasPointer, unsafe.Pointer(&ptr), 8)
	}
	var res [heuristicResultLen]byte
	var got int32
	if err := lt.check(fmt.Sprintf("heuristic %d×%d×%d", key.m, key.n, key.k),
		lt.cublasLtMatmulAlgoGetHeuristic(b.gemm.handle, p.desc, p.la, p.lb, p.ld, p.ld, pref, 1, unsafe.Pointer(&res[0]), &got)); err != nil {
		return nil, err
	}
	if got == 0 {
		return nil, exec.Unsupported(b.Name(), "linear", "cuBLASLt has no algorithm for %d×%d×%d (types %d→%d)", key.m, key.n, key.k, key.ab, key.d)
	}
	copy(p.algo[:], res[:64])
	p.ws = *(*uint64)(unsafe.Pointer(&res[64]))
	b.gemm.plans[key] = p
	return p, nil
}

// matmul queues d = x·wᵀ (+ bias when bias != 0) through cuBLASLt.
func (b *Backend) matmul(d, x, w uintptr, bias uintptr, key gemmKey) error {
	p, err := b.plan(key)
	if err != nil {
		return err
	}
	lt := b.lt
	if key.bias {
		if err := lt.check("bias pointer", lt.cublasLtMatmulDescSetAttribute(p.desc, descBiasPointer, unsafe.Pointer(&bias), 8)); err != nil {
			return err
		}
	}
	code := lt.cublasLtMatmul(b.gemm.handle, p.desc, unsafe.Pointer(b.gemm.alpha), w, p.la, x, p.lb,
		unsafe.Pointer(b.gemm.beta), d, p.ld, d, p.ld, unsafe.Pointer(&p.algo[0]), b.gemm.ws, b.gemm.wsSize, 0)
	return lt.check(fmt.Sprintf("matmul %d×%d×%d", key.m, key.n, key.k), code)
}

// Linear is y = x·Wᵀ + b through cuBLASLt: f32 accumulation, the bias
// added in f32 in cuBLASLt's epilogue (or by the add kernel on the rounded
// product under RoundBeforeBias, or on an f32 product when the bias's
// format differs from the output's), one rounding to s.Out.
func (b *Backend) Linear(x, w, bias exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	shape, fill, err := b.linearFill(x, w, bias, s)
	if err != nil {
		return nil, err
	}
	return b.result(shape, s.Out, fill)
}

// linearFill checks a linear's arguments and returns its result's shape
// and the function that writes the result into out (a new tensor, or a
// view of a joined result's rows: fuse.go's joins of linears).
func (b *Backend) linearFill(x, w, bias exec.Tensor, s exec.Spec) ([]int, func(out *Tensor) error, error) {
	if err := s.Check(); err != nil {
		return nil, nil, fmt.Errorf("linear: %w", err)
	}
	if s.Has(exec.RoundAccum) {
		return nil, nil, exec.Unsupported(b.Name(), "linear", "%v (sums stored in %v one product at a time)", exec.RoundAccum, s.Out)
	}
	xt, err := b.get("linear", "x", x)
	if err != nil {
		return nil, nil, err
	}
	wt, err := b.get("linear", "weight", w)
	if err != nil {
		return nil, nil, err
	}
	bt, err := b.opt("linear", "bias", bias)
	if err != nil {
		return nil, nil, err
	}
	if len(wt.shape) != 2 || len(xt.shape) == 0 || xt.shape[len(xt.shape)-1] != wt.shape[1] {
		return nil, nil, fmt.Errorf("exec: linear: x %v and weight %v do not match ([..., in] and [out, in])", xt.shape, wt.shape)
	}
	nOut, nIn := wt.shape[0], wt.shape[1]
	if bt != nil && (len(bt.shape) != 1 || bt.shape[0] != nOut) {
		return nil, nil, fmt.Errorf("exec: linear: bias %v for %d outputs", bt.shape, nOut)
	}
	shape := append(append([]int(nil), xt.shape[:len(xt.shape)-1]...), nOut)
	m := exec.Numel(shape) / max(nOut, 1)
	outF := storage(s.Out)
	return shape, func(out *Tensor) error {
		if m == 0 || nOut == 0 {
			return nil
		}
		if nIn == 0 {
			return b.fillBias(out, bt, m, nOut)
		}
		var tmps []*buffer
		defer func() {
			for _, t := range tmps {
				b.release(t)
			}
		}()
		// A/B type: the common storage format, or f32 for a mixed pair.
		ab := storage(xt.format)
		xp, wp := xt.ptr(), wt.ptr()
		if storage(wt.format) != ab {
			ab = precision.F32
			for _, in := range []*Tensor{xt, wt} {
				if storage(in.format) == precision.F32 {
					continue
				}
				c, err := b.castTo(in, precision.F32)
				if err != nil {
					return err
				}
				tmps = append(tmps, c.buf)
				if in == xt {
					xp = c.ptr()
				} else {
					wp = c.ptr()
				}
			}
		}
		// D type: the output's, if cuBLASLt produces it from ab; else f32.
		dF := outF
		if dF != ab && dF != precision.F32 {
			dF = precision.F32
		}
		early := bt != nil && s.Has(exec.RoundBeforeBias)
		fused := bt != nil && !early && storage(bt.format) == dF && dF == outF
		if bt != nil && !early && !fused {
			dF = precision.F32 // the bias is added to the f32 product
		}
		key := gemmKey{m: m, n: nOut, k: nIn, ab: cudaType(ab), d: cudaType(dF), bias: fused}
		if dF == outF && (bt == nil || fused) {
			var bp uintptr
			if fused {
				bp = bt.ptr()
			}
			return b.matmul(out.ptr(), xp, wp, bp, key)
		}
		tmp, err := b.newTensor(shape, dF)
		if err != nil {
			return err
		}
		tmps = append(tmps, tmp.buf)
		if err := b.matmul(tmp.ptr(), xp, wp, 0, key); err != nil {
			return err
		}
		src := tmp
		if early && dF != outF {
			// Round the product to the output format first.
			r, err := b.newTensor(shape, s.Out)
			if err != nil {
				return err
			}
			tmps = append(tmps, r.buf)
			if err := b.ewInto(r, kernels.OpCast, src); err != nil {
				return err
			}
			src = r
		}
		if bt == nil {
			return b.ewInto(out, kernels.OpCast, src)
		}
		return b.ewInto(out, kernels.OpAdd, src, bt)
	}, nil
}

// castTo makes a converted copy of t (caller releases it).
func (b *Backend) castTo(t *Tensor, f precision.Format) (*Tensor, error) {
	c, err := b.newTensor(t.shape, f)
	if err != nil {
		return nil, err
	}
	if err := b.ewInto(c, kernels.OpCast, t); err != nil {
		b.release(c.buf)
		return nil, err
	}
	return c, nil
}

// ewInto runs a broadcast elementwise op into an existing output.
func (b *Backend) ewInto(out *Tensor, op int32, ins ...*Tensor) error {
	shapes := make([][]int, len(ins))
	for i, t := range ins {
		shapes[i] = t.shape
	}
	p, err := kernels.NewEW(out.shape, shapes...)
	if err != nil {
		return exec.Unsupported(b.Name(), "elementwise", "%v", err)
	}
	p.Op = op
	return b.elementwise(out, p, ins...)
}

// fillBias writes a K = 0 product: the bias (or zeros) in every row.
func (b *Backend) fillBias(out *Tensor, bt *Tensor, m, n int) error {
	if bt == nil {
		return b.d.check("cuMemsetD8", b.d.cuMemsetD8(out.ptr(), 0, uint64(m*n*esize(out.format))))
	}
	return b.ewInto(out, kernels.OpCast, bt)
}
