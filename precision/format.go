package precision

import (
	"errors"
	"fmt"
	"strings"
)

// Format is a floating-point storage format.
type Format uint8

// The formats. The zero Format is invalid, so a missing setting is caught
// rather than read as f32.
const (
	F32 Format = iota + 1
	BF16
	F16
	F64
)

// ErrUnknownFormat is returned by ParseFormat for a name it does not know.
var ErrUnknownFormat = errors.New("precision: unknown format")

// String is the short name: "f32", "bf16", "f16", "f64".
func (f Format) String() string {
	switch f {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case F64:
		return "f64"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Valid reports whether f is one of the defined formats.
func (f Format) Valid() bool { return f >= F32 && f <= F64 }

// ParseFormat accepts the short names and the usual PyTorch/NumPy spellings
// ("bfloat16", "float16", "half", "fp32", "double", ...), case-insensitive.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f32", "fp32", "float32", "float":
		return F32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "f16", "fp16", "float16", "half":
		return F16, nil
	case "f64", "fp64", "float64", "double":
		return F64, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownFormat, s)
}

// Round returns x rounded to f (round to nearest, ties to even) and widened
// back to float32. F32 and F64 return x unchanged: every float32 is
// representable in both. Round panics on an invalid Format, which is a
// programming error, not bad input.
func (f Format) Round(x float32) float32 {
	switch f {
	case F32, F64:
		return x
	case BF16:
		return RoundBF16(x)
	case F16:
		return RoundF16(x)
	}
	panic("precision: Round on invalid " + f.String())
}

// Representable reports whether x is exactly a value of f (NaN counts as
// representable: every format has NaNs).
func (f Format) Representable(x float32) bool {
	r := f.Round(x)
	return r == x || r != r
}

// BitExact reports whether a and b, rounded to f, are the same value of f:
// equal bit patterns, except that +0 and -0 are equal and NaN is never
// equal to anything (callers count NaN pairs separately).
func BitExact(f Format, a, b float32) bool {
	// Rounding is monotone and the formats are sub-lattices of f32, so
	// equal rounded floats are equal bit patterns up to the sign of zero.
	return f.Round(a) == f.Round(b)
}
