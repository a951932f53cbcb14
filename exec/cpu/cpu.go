// Package cpu is zflow's reference backend: pure Go, every op of
// exec.Backend, f32 arithmetic with bf16/f16 storage emulated bit for bit
// (every stored value is a float32 that is exactly a value of the tensor's
// format). Work is spread over goroutines by rows.
package cpu

import (
	"fmt"
	"math"
	"runtime"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Backend is the CPU backend. The zero value is not usable; call New.
type Backend struct {
	exec.Fallback // Chunk, Patchify, Unpatchify, TimestepEmbed, RopeTable
	workers       int
	micro         microKernel // GEMM micro-kernel (bit-identical variants)
}

var _ exec.Backend = (*Backend)(nil)

// New returns a CPU backend using workers goroutines (0: GOMAXPROCS).
func New(workers int) *Backend {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &Backend{workers: workers, micro: microFast()}
	b.Fallback = exec.Fallback{B: b}
	return b
}

// Name is "cpu".
func (b *Backend) Name() string { return "cpu" }

// Workers is the number of goroutines an op uses.
func (b *Backend) Workers() int { return b.workers }

// Tensor is the CPU backend's tensor: a shape, a storage format and the
// values as float32, each exactly a value of the format.
type Tensor struct {
	shape  []int
	format precision.Format
	data   []float32
}

// Shape is the tensor's shape (do not modify).
func (t *Tensor) Shape() []int { return t.shape }

// Format is the storage format.
func (t *Tensor) Format() precision.Format { return t.format }

// Data is the values, row-major; read-only (ops never write an input, and
// Reshape shares storage).
func (t *Tensor) Data() []float32 { return t.data }

func (t *Tensor) String() string { return fmt.Sprintf("cpu.Tensor(%v %v)", t.format, t.shape) }

// newTensor allocates a zeroed tensor.
func newTensor(shape []int, f precision.Format) *Tensor {
	return &Tensor{shape: append([]int(nil), shape...), format: f, data: make([]float32, exec.Numel(shape))}
}

// get checks that t is a live tensor of this backend.
func (b *Backend) get(op, name string, t exec.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, fmt.Errorf("exec: cpu: %s: %s is nil", op, name)
	}
	ct, ok := t.(*Tensor)
	if !ok {
		return nil, exec.Unsupported(b.Name(), op, "%s is a %T, not a cpu tensor", name, t)
	}
	if ct.data == nil && exec.Numel(ct.shape) != 0 {
		return nil, fmt.Errorf("exec: cpu: %s: %s was freed", op, name)
	}
	return ct, nil
}

// opt is get for an optional tensor: nil stays nil.
func (b *Backend) opt(op, name string, t exec.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, nil
	}
	return b.get(op, name, t)
}

// Upload copies data into a new tensor, rounding each value to f.
func (b *Backend) Upload(data []float32, shape []int, f precision.Format) (exec.Tensor, error) {
	if err := checkHost("upload", data, shape, f); err != nil {
		return nil, err
	}
	t := newTensor(shape, f)
	b.round(t.data, data, f)
	return t, nil
}

// Borrow is Upload without the copy where every value is already one of
// f, bit for bit (exec.Borrower): the tensor reads data itself, which the
// caller leaves unchanged while it lives (ops never write an input, and
// Free only drops the reference). Values f would round are rounded into a
// copy, as Upload does.
func (b *Backend) Borrow(data []float32, shape []int, f precision.Format) (exec.Tensor, error) {
	if err := checkHost("borrow", data, shape, f); err != nil {
		return nil, err
	}
	if f != precision.F32 && !holds(f, data) {
		t := newTensor(shape, f)
		b.round(t.data, data, f)
		return t, nil
	}
	return &Tensor{shape: append([]int(nil), shape...), format: f, data: data}, nil
}

// checkHost checks host values handed to op (upload, borrow): a valid
// shape and format, and as many values as the shape holds.
func checkHost(op string, data []float32, shape []int, f precision.Format) error {
	if err := exec.CheckShape(shape); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !f.Valid() {
		return fmt.Errorf("exec: cpu: %s: invalid format %v", op, f)
	}
	if n := exec.Numel(shape); n != len(data) {
		return fmt.Errorf("exec: cpu: %s: %d values for shape %v (%d elements)", op, len(data), shape, n)
	}
	return nil
}

// holds reports whether rounding to f leaves every value of data as it is,
// bit for bit (a NaN's payload included).
func holds(f precision.Format, data []float32) bool {
	for _, x := range data {
		if math.Float32bits(f.Round(x)) != math.Float32bits(x) {
			return false
		}
	}
	return true
}

// Download returns a copy of t's values.
func (b *Backend) Download(t exec.Tensor) ([]float32, error) {
	ct, err := b.get("download", "tensor", t)
	if err != nil {
		return nil, err
	}
	return append([]float32(nil), ct.data...), nil
}

// Free drops t's storage; later use of t is an error.
func (b *Backend) Free(t exec.Tensor) {
	if ct, ok := t.(*Tensor); ok {
		ct.data = nil
	}
}

// Cast rounds x to f.
func (b *Backend) Cast(x exec.Tensor, f precision.Format) (exec.Tensor, error) {
	xt, err := b.get("cast", "x", x)
	if err != nil {
		return nil, err
	}
	if !f.Valid() {
		return nil, fmt.Errorf("exec: cpu: cast: invalid format %v", f)
	}
	t := newTensor(xt.shape, f)
	b.round(t.data, xt.data, f)
	return t, nil
}

// round writes src rounded to f into dst, in parallel.
func (b *Backend) round(dst, src []float32, f precision.Format) {
	b.parallel(len(src), 1<<14, func(lo, hi int) {
		roundInto(dst[lo:hi], src[lo:hi], f)
	})
}

// roundInto writes src rounded to f into dst (same length; may alias).
func roundInto(dst, src []float32, f precision.Format) {
	switch f {
	case precision.BF16:
		precision.RoundSliceBF16(dst, src)
	case precision.F16:
		precision.RoundSliceF16(dst, src)
	default:
		copy(dst, src)
	}
}
