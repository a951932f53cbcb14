package trace

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

	"github.com/zflow/zflow/precision"
)

// Tensor is one tensor's data. For a stored entry Bytes is a view into the
// file mapping: read-only, valid until the Trace is closed.
type Tensor struct {
	Info
	data   []byte
	view   bool
	file   string
	stream *inflater // Values of a deflated entry: data decoded as read
}

// Bytes is the raw little-endian data (nil when Streamed).
func (t *Tensor) Bytes() []byte { return t.data }

// IsView reports whether the data is the file mapping itself (no copy).
func (t *Tensor) IsView() bool { return t.view }

// aligned reports whether the data may be viewed as elements of size n.
func (t *Tensor) aligned(n uintptr) bool {
	return len(t.data) == 0 || uintptr(unsafe.Pointer(&t.data[0]))%n == 0
}

// Float32View returns the data as []float32 without copying, when the
// tensor is f32 and its data is 4-byte aligned in the file (traces that
// zflow writes always are). ok is false otherwise; use Float32.
func (t *Tensor) Float32View() (v []float32, ok bool) {
	if t.DType != Float32 || t.stream != nil || !t.aligned(4) {
		return nil, false
	}
	if len(t.data) == 0 {
		return []float32{}, true
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.data[0])), len(t.data)/4), true
}

// Scalars is the number of real values: Len, twice that for complex types
// (whose values read as interleaved real and imaginary parts).
func (t *Tensor) Scalars() int64 { return t.Len() * int64(t.DType.Components()) }

// Float32 returns the values as float32: the view when Float32View can
// give one, otherwise a widened copy. Widening is exact; a value that
// float32 cannot hold (a large int32, any float64 that is not a float32)
// gives ErrInexact. Complex values give Scalars() values, real and
// imaginary parts interleaved.
func (t *Tensor) Float32() ([]float32, error) {
	if v, ok := t.Float32View(); ok {
		return v, nil
	}
	out := make([]float32, t.Scalars())
	return out, t.ReadFloat32(out, 0)
}

// Float32Rounded is Float32, except that a value float32 cannot hold (a
// float64 or complex128 table, a large integer) is rounded to the
// nearest float32 instead of refused: for readers that compare within a
// tolerance (discovery), so that a reference keeping a table in float64
// is still read.
func (t *Tensor) Float32Rounded() ([]float32, error) {
	v, err := t.Float32()
	if !errors.Is(err, ErrInexact) {
		return v, err
	}
	w, err := t.Float64()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(w))
	for i, x := range w {
		out[i] = float32(x)
	}
	return out, nil
}

// ReadFloat32 widens real values [from, from+len(dst)) into dst, so a
// large tensor can be streamed in chunks.
func (t *Tensor) ReadFloat32(dst []float32, from int64) error {
	n := int64(len(dst))
	size := int64(t.DType.Size() / t.DType.Components())
	// Bounded by the data itself, not only the shape, so that a read never
	// reaches past the entry whatever the header claims.
	have := min(t.Scalars(), int64(len(t.data))/max(1, size))
	if t.stream != nil {
		have = min(t.Scalars(), t.stream.e.Bytes/max(1, size))
	}
	if from < 0 || from > have || n > have-from {
		return errf(t.file, t.Key, ErrNotFound, "values [%d, %d) out of range (%d)", from, from+n, have)
	}
	if t.stream != nil {
		return t.readStreamed(dst, from, size)
	}
	return t.widen(dst, t.data[from*size:(from+n)*size], from)
}

// widen converts src, the raw values from index from on, into dst.
func (t *Tensor) widen(dst []float32, src []byte, from int64) error {
	switch t.DType {
	case BFloat16:
		precision.BF16ToF32Slice(dst, u16s(src))
		return nil
	case Float16:
		precision.F16ToF32Slice(dst, u16s(src))
		return nil
	case Float32, Complex64:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return nil
	}
	for i := range dst {
		v := t.at(src, i)
		f := float32(v)
		if float64(f) != v && !math.IsNaN(v) {
			return errf(t.file, t.Key, ErrInexact, "element %d (%v) is not representable in float32", from+int64(i), v)
		}
		dst[i] = f
	}
	return nil
}

// Float64 returns the values widened to float64. Every dtype widens exactly
// except 64-bit integers beyond 2^53, which give ErrInexact.
func (t *Tensor) Float64() ([]float64, error) {
	if t.stream != nil {
		w, err := t.whole()
		if err != nil {
			return nil, err
		}
		return w.Float64()
	}
	out := make([]float64, t.Scalars())
	switch t.DType {
	case BFloat16, Float16:
		f := make([]float32, t.Len())
		if err := t.ReadFloat32(f, 0); err != nil {
			return nil, err
		}
		for i, v := range f {
			out[i] = float64(v)
		}
		return out, nil
	}
	for i := range out {
		out[i] = t.at(t.data, i)
		if t.DType == Int64 || t.DType == Uint64 {
			if math.Abs(out[i]) > 1<<53 {
				return nil, errf(t.file, t.Key, ErrInexact, "element %d exceeds 2^53", i)
			}
		}
	}
	return out, nil
}

// at decodes element i of src as float64 (every dtype but bf16 and f16).
func (t *Tensor) at(src []byte, i int) float64 {
	le := binary.LittleEndian
	switch t.DType {
	case Bool, Uint8:
		return float64(src[i])
	case Int8:
		return float64(int8(src[i]))
	case Int16:
		return float64(int16(le.Uint16(src[2*i:])))
	case Uint16:
		return float64(le.Uint16(src[2*i:]))
	case Int32:
		return float64(int32(le.Uint32(src[4*i:])))
	case Uint32:
		return float64(le.Uint32(src[4*i:]))
	case Int64:
		return float64(int64(le.Uint64(src[8*i:])))
	case Uint64:
		return float64(le.Uint64(src[8*i:]))
	case Float32, Complex64:
		return float64(math.Float32frombits(le.Uint32(src[4*i:])))
	case Float64, Complex128:
		return math.Float64frombits(le.Uint64(src[8*i:]))
	}
	return math.NaN()
}

// u16s reinterprets little-endian bytes as uint16s (no copy when aligned;
// every platform zflow runs on is little-endian).
func u16s(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}
