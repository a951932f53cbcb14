//go:build linux

package cuda

import (
	"fmt"
	"unsafe"
)

// cublasLt is the part of cuBLASLt the backend uses.
type cublasLt struct {
	cublasLtCreate                       func(h *uintptr) int32
	cublasLtGetVersion                   func() uint64
	cublasLtGetStatusString              func(status int32) *byte
	cublasLtMatmulDescCreate             func(desc *uintptr, compute, scale int32) int32
	cublasLtMatmulDescSetAttribute       func(desc uintptr, attr int32, buf unsafe.Pointer, size uint64) int32
	cublasLtMatrixLayoutCreate           func(l *uintptr, typ int32, rows, cols uint64, ld int64) int32
	cublasLtMatmulPreferenceCreate       func(p *uintptr) int32
	cublasLtMatmulPreferenceSetAttribute func(p uintptr, attr int32, buf unsafe.Pointer, size uint64) int32
	cublasLtMatmulAlgoGetHeuristic       func(h, desc, a, b, c, d, pref uintptr, requested int32, results unsafe.Pointer, returned *int32) int32
	cublasLtMatmul                       func(h, desc uintptr, alpha unsafe.Pointer, a, adesc, b, bdesc uintptr, beta unsafe.Pointer,
		c, cdesc, d, ddesc uintptr, algo unsafe.Pointer, ws uintptr, wsSize uint64, stream uintptr) int32

	path string
}

// cuBLAS / cuBLASLt constants (cublas_api.h, cublasLt.h, library_types.h).
const (
	cublasCompute32F = 68 // CUBLAS_COMPUTE_32F: plain f32, no TF32
	cudaR32F         = 0
	cudaR16F         = 2
	cudaR16BF        = 14

	descTransA         = 3
	descTransB         = 4
	descEpilogue       = 7
	descBiasPointer    = 8
	descBiasDataType   = 26
	opN                = 0
	opT                = 1
	epilogueDefault    = 1
	epilogueBias       = 4
	prefMaxWorkspace   = 1
	heuristicResultLen = 96 // sizeof(cublasLtMatmulHeuristicResult_t)
)

func loadCublasLt() (*cublasLt, error) {
	lib, path, err := openLib("cuBLASLt (libcublasLt.so)", "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so")
	if err != nil {
		return nil, err
	}
	l := &cublasLt{path: path}
	if err := bind(lib, path, l, nil); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *cublasLt) check(what string, code int32) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("cuda: cublasLt: %s: %s (status %d)", what, cString(l.cublasLtGetStatusString(code)), code)
}
