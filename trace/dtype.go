package trace

import (
	"fmt"

	"github.com/zflow/zflow/precision"
)

// DType is the element type of a stored tensor.
type DType uint8

// The dtypes a trace may hold. BF16 is stored in npz as little-endian uint16
// bit patterns and named "bfloat16" in the manifest's dtypes map.
const (
	Invalid DType = iota
	Bool
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float16
	BFloat16
	Float32
	Float64
	Complex64  // pairs of float32 (real, imaginary)
	Complex128 // pairs of float64
)

// lastDType is the last valid DType.
const lastDType = Complex128

type dtypeInfo struct {
	name  string // manifest / PyTorch-style name
	npy   string // npy descr, little-endian
	st    string // safetensors dtype
	size  int
	float bool
}

var dtypes = [...]dtypeInfo{
	Invalid:    {"invalid", "", "", 0, false},
	Bool:       {"bool", "|b1", "BOOL", 1, false},
	Int8:       {"int8", "|i1", "I8", 1, false},
	Int16:      {"int16", "<i2", "I16", 2, false},
	Int32:      {"int32", "<i4", "I32", 4, false},
	Int64:      {"int64", "<i8", "I64", 8, false},
	Uint8:      {"uint8", "|u1", "U8", 1, false},
	Uint16:     {"uint16", "<u2", "U16", 2, false},
	Uint32:     {"uint32", "<u4", "U32", 4, false},
	Uint64:     {"uint64", "<u8", "U64", 8, false},
	Float16:    {"float16", "<f2", "F16", 2, true},
	BFloat16:   {"bfloat16", "<u2", "BF16", 2, true},
	Float32:    {"float32", "<f4", "F32", 4, true},
	Float64:    {"float64", "<f8", "F64", 8, true},
	Complex64:  {"complex64", "<c8", "C64", 8, true},
	Complex128: {"complex128", "<c16", "C128", 16, true},
}

// String is the manifest name ("bfloat16", "float32", ...).
func (d DType) String() string {
	if int(d) < len(dtypes) {
		return dtypes[d].name
	}
	return fmt.Sprintf("DType(%d)", d)
}

// Size is the element size in bytes (0 for Invalid).
func (d DType) Size() int {
	if int(d) < len(dtypes) {
		return dtypes[d].size
	}
	return 0
}

// Components is the number of real scalars per element: 2 for complex
// types, 1 otherwise.
func (d DType) Components() int {
	if d == Complex64 || d == Complex128 {
		return 2
	}
	return 1
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return int(d) < len(dtypes) && dtypes[d].float }

// NpyDescr is the npy descr that stores d (bf16 as "<u2").
func (d DType) NpyDescr() string { return dtypes[d].npy }

// SafetensorsName is the safetensors dtype string ("BF16", "F32", ...).
func (d DType) SafetensorsName() string { return dtypes[d].st }

// ParseDType maps a manifest dtype name to a DType.
func ParseDType(name string) (DType, error) {
	for d := Bool; d <= lastDType; d++ {
		if dtypes[d].name == name {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q", name)
}

// dtypeFromNpy maps an npy descr to a DType. "=" and "<" are little-endian
// on every platform zflow runs on; big-endian data is refused.
func dtypeFromNpy(descr string) (DType, error) {
	if len(descr) >= 3 && (descr[0] == '=' || descr[0] == '|') {
		descr = "<" + descr[1:]
	}
	for d := Bool; d <= lastDType; d++ {
		if d == BFloat16 {
			continue
		}
		npy := dtypes[d].npy
		if npy[0] == '|' {
			npy = "<" + npy[1:]
		}
		if npy == descr {
			return d, nil
		}
	}
	if len(descr) > 0 && descr[0] == '>' {
		return Invalid, fmt.Errorf("big-endian dtype %q is not supported", descr)
	}
	return Invalid, fmt.Errorf("unsupported npy dtype %q", descr)
}

// dtypeFromSafetensors maps a safetensors dtype string to a DType.
func dtypeFromSafetensors(s string) (DType, error) {
	for d := Bool; d <= lastDType; d++ {
		if dtypes[d].st == s {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("unsupported safetensors dtype %q", s)
}

// Format is the number format a dtype's values are computed in by a
// reader that widens to float32: bf16 and f16 as themselves, everything
// else (f32, f64, integers, booleans) as f32.
func (d DType) Format() precision.Format {
	switch d {
	case BFloat16:
		return precision.BF16
	case Float16:
		return precision.F16
	}
	return precision.F32
}
