package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// Diff is one tapped value compared with the reference's tensor.
type Diff struct {
	Key    string
	Step   int
	Tap    Tap
	RelRMS float64
	Exact  float64 // fraction bit-exact in Format
	Format precision.Format
	N      int
}

// Compare is a Hooks.Observe that compares tapped values with a reference
// trace (those the filter accepts and the trace holds with as many
// values).
type Compare struct {
	B      exec.Backend
	Ref    *trace.Trace
	Filter func(Tap) bool
	Diffs  []Diff
}

// Observe compares one value.
func (c *Compare) Observe(step int, tp Tap, t exec.Tensor) error {
	if c.Filter != nil && !c.Filter(tp) {
		return nil
	}
	key := tp.Key(step)
	ref, ok, err := refValues(c.Ref, key, t.Shape())
	if err != nil || !ok {
		return err
	}
	ours, err := c.B.Download(t)
	if err != nil {
		return err
	}
	f := t.Format()
	rel, err := precision.RelRMS(f, ours, ref)
	if err != nil {
		return err
	}
	exact, err := precision.ExactFraction(f, ours, ref)
	if err != nil {
		return err
	}
	c.Diffs = append(c.Diffs, Diff{Key: key, Step: step, Tap: tp, RelRMS: rel, Exact: exact, Format: f, N: len(ours)})
	return nil
}

// Force is a Hooks.Override that feeds the reference's tensor into every
// input tap the filter accepts (teacher forcing).
type Force struct {
	B      exec.Backend
	Ref    *trace.Trace
	Filter func(Tap) bool
	Forced int
}

// Override uploads the reference's tensor for tp in like's shape and format.
func (f *Force) Override(step int, tp Tap, like exec.Tensor) (exec.Tensor, bool, error) {
	if f.Filter != nil && !f.Filter(tp) {
		return nil, false, nil
	}
	ref, ok, err := refValues(f.Ref, tp.Key(step), like.Shape())
	if err != nil || !ok {
		return nil, false, err
	}
	t, err := f.B.Upload(ref, like.Shape(), like.Format())
	if err != nil {
		return nil, false, err
	}
	f.Forced++
	return t, true, nil
}

// refValues reads the reference tensor at key when it holds real values
// in our element order (SameLayout); ok is false otherwise.
func refValues(ref *trace.Trace, key string, shape []int) ([]float32, bool, error) {
	info, err := ref.Info(key)
	if err != nil {
		return nil, false, nil
	}
	if info.DType.Components() != 1 || !SameLayout(info.Shape, shape) && !headsFirst(info.Shape, shape) {
		return nil, false, nil
	}
	t, err := ref.Tensor(key)
	if err != nil {
		return nil, false, fmt.Errorf("reference %s: %w", key, err)
	}
	v, err := RefFloat32(t)
	if err != nil {
		return nil, false, fmt.Errorf("reference %s: %w", key, err)
	}
	v, _ = Relayout(v, info.Shape, shape)
	return v, true, nil
}

// RefFloat32 reads a reference tensor as float32, the format program
// values are held in at most: exactly, except a float64 tensor (a
// sinusoid or a table the reference computed in f64 before its consumer
// cast it), whose values are rounded to the nearest float32. Every other
// value float32 cannot hold (a large integer) is refused (ErrInexact).
func RefFloat32(t *trace.Tensor) ([]float32, error) {
	if t.DType == trace.Float64 {
		return t.Float32Rounded()
	}
	return t.Float32()
}

// Relayout returns a reference tensor's values (of shape ref) in the
// element order of a value of shape ours: unchanged when SameLayout, the
// head and sequence axes swapped when the reference holds per-head rows
// heads first ([..., H, S, D] for our [..., S, H·D] or [..., S, H, D], the
// layout attention code makes with view + transpose(1, 2)); ok is false
// for any other pair of shapes.
func Relayout(v []float32, ref, ours []int) ([]float32, bool) {
	if SameLayout(ref, ours) {
		return v, true
	}
	if !headsFirst(ref, ours) {
		return nil, false
	}
	r := squeeze(ref)
	n := len(r)
	h, s, d := r[n-3], r[n-2], r[n-1]
	block := h * s * d
	out := make([]float32, len(v))
	for b := 0; b+block <= len(v); b += block {
		for hi := range h {
			for si := range s {
				copy(out[b+(si*h+hi)*d:][:d], v[b+(hi*s+si)*d:][:d])
			}
		}
	}
	return out, true
}

// headsFirstOrder is Relayout's inverse: values in our sequence-first
// order rearranged into the reference's heads-first shape ref.
func headsFirstOrder(v []float32, ref []int) []float32 {
	r := squeeze(ref)
	n := len(r)
	h, s, d := r[n-3], r[n-2], r[n-1]
	block := h * s * d
	out := make([]float32, len(v))
	for b := 0; b+block <= len(v); b += block {
		for hi := range h {
			for si := range s {
				copy(out[b+(hi*s+si)*d:][:d], v[b+(si*h+hi)*d:][:d])
			}
		}
	}
	return out
}

// headsFirst reports whether ref is [..., H, S, D] (H, S > 1) and ours the
// same rows sequence first: [..., S, H·D] or [..., S, H, D].
func headsFirst(ref, ours []int) bool {
	r, o := squeeze(ref), squeeze(ours)
	n := len(r)
	if n < 3 {
		return false
	}
	h, s, d := r[n-3], r[n-2], r[n-1]
	lead := r[:n-3]
	for _, want := range [][]int{append(slices.Clone(lead), s, h*d), append(slices.Clone(lead), s, h, d)} {
		if slices.Equal(o, want) {
			return true
		}
	}
	return false
}

// SameLayout reports whether tensors of shapes a and b hold their elements
// in the same order: equal once dimensions of size 1 are dropped and
// adjacent dimensions of one are merged to match the other's ([1, 36, 4,
// 16] and [1, 36, 64] do; [1, 2, 16, 16] (heads first) and [1, 16, 32] do
// not, though they have as many elements).
func SameLayout(a, b []int) bool {
	a, b = squeeze(a), squeeze(b)
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		i, j = i+1, j+1
		// One side's consecutive dimensions make up one of the other's.
		if x < y {
			for x < y && i < len(a) {
				x *= a[i]
				i++
			}
		} else {
			for y < x && j < len(b) {
				y *= b[j]
				j++
			}
		}
		if x != y {
			return false
		}
	}
	return i == len(a) && j == len(b)
}

func squeeze(s []int) []int {
	out := make([]int, 0, len(s))
	for _, d := range s {
		if d != 1 {
			out = append(out, d)
		}
	}
	return out
}
