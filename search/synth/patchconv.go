package synth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// kernelLabel is a kernel's sizes, "2" or "1x2x2".
func kernelLabel(k []int) string {
	parts := make([]string, len(k))
	for i, n := range k {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, "x")
}

// fitConvBlocks explains a convolution whose kernel equals its stride
// over one, two or three axes (w [O, C, k₁…kₙ] over x [B, C, s₁…sₙ],
// each size a multiple of its kernel): each k₁×…×kₙ block of x a row of
// C·k₁·…·kₙ channels, blocks in (s₁, …, sₙ) order, through a linear of
// w's rows, channels first again. Tried where fitConv's one-frame square
// patches and the stride-1 forms do not fit (a 1-D patch embedding, a
// 3-D one spanning several frames, kernels that differ between axes).
func (s *synth) fitConvBlocks(x *val, params []*val, t *val) *val {
	w, bias := convParams(params)
	r := len(w.shape)
	if r < 3 || len(x.shape) != r || len(t.shape) != r {
		return nil
	}
	n := r - 2 // spatial axes
	B, C, O := x.shape[0], x.shape[1], w.shape[0]
	k := w.shape[2:]
	if C != w.shape[1] || t.shape[0] != B || t.shape[1] != O {
		return nil
	}
	split := []int{B, C} // x as [B, C, s₁/k₁, k₁, …]
	perm := []int{0}     // blocks first, then C and the kernel offsets
	var inner []int      // C's and the kernel offsets' axes of split
	rows, width := 1, C  // blocks per sample, channels per block
	for i := range n {
		si := x.shape[2+i]
		if si%k[i] != 0 || t.shape[2+i] != si/k[i] {
			return nil
		}
		split = append(split, si/k[i], k[i])
		perm = append(perm, 2+2*i)
		inner = append(inner, 3+2*i)
		rows *= si / k[i]
		width *= k[i]
	}
	perm = append(append(perm, 1), inner...)
	blocks := s.reshape(x, split)
	if blocks == nil {
		return nil
	}
	flat := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{blocks}, out: x.format, label: "kernel blocks"})
	flat = s.reshape(flat, []int{B * rows, width})
	wm := s.reshape(w, []int{O, width})
	if flat == nil || wm == nil {
		return nil
	}
	label := "blocks " + kernelLabel(k)
	y := s.derive(&expr{op: program.OpLinear, args: []*val{flat, wm, bias}, out: t.format, label: label})
	y = s.reshape(y, []int{B, rows, O})
	if y == nil {
		return nil
	}
	y = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{y}, out: t.format, label: "channels first"})
	y = s.reshape(y, t.shape)
	if y == nil || relRMS(t.format, y.data, t.data) > tolerance(t.format) {
		return nil
	}
	y.fit = &leafFit{kind: "conv", candidates: []semantics.Candidate{{Value: label, Score: relRMS(t.format, y.data, t.data)}}}
	return y
}

// fitConvTransposed explains a transposed convolution whose kernel equals
// its stride (w [Cin, Cout, k₁…kₙ] over x [B, Cin, s₁…sₙ] to t [B, Cout,
// s₁·k₁, …]: an unpatchify): every position of x a row of Cin channels
// through one linear of w's columns (Cout·k₁·…·kₙ outputs, the bias
// repeated over the kernel offsets), each output row then spread back
// over its k₁×…×kₙ block, channels first. Blocks do not overlap, so each
// output is one sum of Cin products plus the bias, as the linear makes it.
func (s *synth) fitConvTransposed(x *val, params []*val, t *val) *val {
	w, bias := convParams(params)
	r := len(w.shape)
	if r < 3 || len(x.shape) != r || len(t.shape) != r {
		return nil
	}
	n := r - 2
	B, Cin, Cout := x.shape[0], x.shape[1], w.shape[1]
	k := w.shape[2:]
	if w.shape[0] != Cin || t.shape[0] != B || t.shape[1] != Cout || bias != nil && bias.shape[0] != Cout {
		return nil
	}
	K, rows := 1, 1
	wperm := []int{1}        // w as [Cout, k₁…kₙ, Cin]
	xperm := []int{0}        // x channels last
	grid := []int{B}         // y as [B, s₁…sₙ, Cout, k₁…kₙ]
	yperm := []int{0, 1 + n} // then [B, Cout, s₁, k₁, …]
	for i := range n {
		si := x.shape[2+i]
		if t.shape[2+i] != si*k[i] {
			return nil
		}
		K *= k[i]
		rows *= si
		wperm = append(wperm, 2+i)
		xperm = append(xperm, 2+i)
		grid = append(grid, si)
		yperm = append(yperm, 1+i, 2+n+i)
	}
	wperm = append(wperm, 0)
	xperm = append(xperm, 1)
	grid = append(append(grid, Cout), k...)
	wt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: wperm}, args: []*val{w}, out: w.format, label: "kernel as a linear's rows"})
	wm := s.reshape(wt, []int{Cout * K, Cin})
	cols := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: xperm}, args: []*val{x}, out: x.format, label: "channels last"})
	cols = s.reshape(cols, []int{B * rows, Cin})
	if wm == nil || cols == nil {
		return nil
	}
	var b *val
	if bias != nil {
		b = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: K, Axis: 1}, args: []*val{s.reshape(bias, []int{Cout, 1})}, out: bias.format, label: "the bias over the kernel offsets"})
		if b = s.reshape(b, []int{Cout * K}); b == nil {
			return nil
		}
	}
	label := "transposed blocks " + kernelLabel(k)
	y := s.derive(&expr{op: program.OpLinear, args: []*val{cols, wm, b}, out: t.format, label: label})
	y = s.reshape(y, grid)
	if y == nil {
		return nil
	}
	y = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: yperm}, args: []*val{y}, out: t.format, label: "blocks spread back, channels first"})
	v, ev := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: t.format, label: label}})
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// convParams is a convolution call's weight and its bias (nil when the
// second parameter is not a vector).
func convParams(params []*val) (w, bias *val) {
	w = params[0]
	if len(params) > 1 && len(params[1].shape) == 1 {
		bias = params[1]
	}
	return w, bias
}
