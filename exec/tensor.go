package exec

import (
	"fmt"

	"github.com/zflow/zflow/precision"
)

// Tensor is a backend's handle to a stored tensor: a shape and a storage
// format. Each backend has its own concrete type; passing one backend's
// tensor to another is refused with an error.
type Tensor interface {
	// Shape is the tensor's shape; callers must not modify it.
	Shape() []int
	// Format is the storage format: every value is exactly a value of it.
	Format() precision.Format
}

// Numel is the number of elements of a shape (1 for a scalar, []int{}).
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// CheckShape returns an error if shape has a negative dimension or more
// elements than an int can count.
func CheckShape(shape []int) error {
	n := 1
	for i, d := range shape {
		if d < 0 {
			return fmt.Errorf("exec: shape %v: dimension %d is negative", shape, i)
		}
		if d != 0 && n > (1<<62)/d {
			return fmt.Errorf("exec: shape %v: too many elements", shape)
		}
		n *= d
	}
	return nil
}

// Axis resolves a possibly negative axis against rank.
func Axis(axis, rank int) (int, error) {
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return 0, fmt.Errorf("exec: axis %d out of range for rank %d", axis, rank)
	}
	return axis, nil
}

// Broadcast returns the NumPy broadcast of shapes a and b.
func Broadcast(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("exec: shapes %v and %v do not broadcast", a, b)
		}
	}
	return out, nil
}

// ShapeString formats a shape as [1 36 64].
func ShapeString(shape []int) string { return fmt.Sprint(shape) }

// ResolveShape returns the shape a reshape of from to to gives, with one
// -1 in to inferred; the element count must not change.
func ResolveShape(from, to []int) ([]int, error) {
	out := append([]int(nil), to...)
	n := Numel(from)
	known, infer := 1, -1
	for i, d := range out {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, fmt.Errorf("exec: reshape %v to %v: bad dimension %d", from, to, d)
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, fmt.Errorf("exec: reshape %v to %v: cannot infer -1", from, to)
		}
		out[infer] = n / known
		known *= out[infer]
	}
	if known != n {
		return nil, fmt.Errorf("exec: reshape %v (%d elements) to %v", from, n, to)
	}
	return out, nil
}

// PermuteShape checks torch.permute's rule (perm names each axis once;
// negative axes count from the end) and returns the result's shape and
// perm with its axes resolved: output axis i is input axis axes[i].
func PermuteShape(shape, perm []int) (out, axes []int, err error) {
	r := len(shape)
	if len(perm) != r {
		return nil, nil, fmt.Errorf("exec: permute %v by %v: rank mismatch", shape, perm)
	}
	seen := make([]bool, r)
	out, axes = make([]int, r), make([]int, r)
	for i, a := range perm {
		a, err := Axis(a, r)
		if err != nil || seen[a] {
			return nil, nil, fmt.Errorf("exec: permute %v by %v: not a permutation", shape, perm)
		}
		seen[a] = true
		axes[i], out[i] = a, shape[a]
	}
	return out, axes, nil
}

// Strides are the row-major element strides of shape.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// ConcatShape checks torch.cat's rules for inputs of the given shapes and
// formats (one format, equal ranks, equal sizes off the axis) and returns
// the result's shape and the resolved axis.
func ConcatShape(shapes [][]int, formats []precision.Format, axis int) ([]int, int, error) {
	if len(shapes) == 0 {
		return nil, 0, fmt.Errorf("exec: concat: no tensors")
	}
	first := shapes[0]
	ax, err := Axis(axis, len(first))
	if err != nil {
		return nil, 0, fmt.Errorf("concat: %w", err)
	}
	shape := append([]int(nil), first...)
	shape[ax] = 0
	for i, s := range shapes {
		if formats[i] != formats[0] {
			return nil, 0, fmt.Errorf("exec: concat: input %d is %v, input 0 is %v", i, formats[i], formats[0])
		}
		if len(s) != len(first) {
			return nil, 0, fmt.Errorf("exec: concat: input %d %v and input 0 %v differ in rank", i, s, first)
		}
		for d := range s {
			if d != ax && s[d] != first[d] {
				return nil, 0, fmt.Errorf("exec: concat on axis %d: input %d %v and input 0 %v differ on axis %d", ax, i, s, first, d)
			}
		}
		shape[ax] += s[ax]
	}
	return shape, ax, nil
}
