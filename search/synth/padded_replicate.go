package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// replicatePadded explains t as a value of the scope grown at the end of some
// axes by copies of its last slice along each (F.pad's "replicate" mode on
// the trailing side, as a convolution's input is padded to a multiple of
// its kernel): for each axis t is longer on, the last slice repeated and
// joined after, axis by axis from the last. Only where t holds the value
// unchanged at its leading corner.
func (s *synth) replicatePadded(t *val, vals []*val) *val {
	for _, x := range vals {
		if x.opaque || len(x.shape) != len(t.shape) || x.numel() >= t.numel() || x.format != t.format {
			continue
		}
		grown := false
		ok := true
		for a := range x.shape {
			if x.shape[a] > t.shape[a] || x.shape[a] == 0 {
				ok = false
				break
			}
			grown = grown || x.shape[a] < t.shape[a]
		}
		if !ok || !grown || !leadingCorner(x, t) {
			continue
		}
		v := x
		for a := len(x.shape) - 1; a >= 0 && v != nil; a-- {
			v = s.padEdge(v, a, t.shape[a]-x.shape[a])
		}
		if v != nil && relRMS(t.format, v.data, t.data) <= tolerance(t.format) && s.everyStep(v, t, tolerance(t.format)) {
			return v
		}
	}
	return nil
}

// leadingCorner reports whether t's leading corner of x's shape equals x.
func leadingCorner(x, t *val) bool {
	r := len(x.shape)
	idx := make([]int, r)
	for i, xv := range x.data {
		// x's flat index i → t's flat index
		rem := i
		for a := r - 1; a >= 0; a-- {
			idx[a] = rem % x.shape[a]
			rem /= x.shape[a]
		}
		j := 0
		for a := range r {
			j = j*t.shape[a] + idx[a]
		}
		if xv != t.data[j] {
			return false
		}
	}
	return true
}

// padEdge joins pad copies of v's last slice along axis a after v (nil
// where that cannot run; v itself where pad is 0).
func (s *synth) padEdge(v *val, a, pad int) *val {
	if v == nil || pad == 0 {
		return v
	}
	n := v.shape[a]
	last := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: a, Start: n - 1, End: n}, args: []*val{v}, out: v.format, label: "last slice"})
	rep := last
	if pad > 1 && last != nil {
		rep = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: pad, Axis: a}, args: []*val{last}, out: v.format, label: "edge copies"})
	}
	if rep == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: a}, args: []*val{v, rep}, out: v.format, label: "replicate padding"})
}

// poolKernels are the block sizes gridPooledPiece tries per axis.
var poolKernels = []int{1, 2, 4, 8}

// gridPooledPiece explains the rows of t from off along axis 0 as a value
// v [N, C] whose rows are a grid T×H×W (row-major) averaged over blocks of
// kt×kh×kw grid cells, each axis first grown to a multiple of its block
// by copies of its last slice (a table of per-position features brought
// to the grid of a strided convolution's tokens: replicate padding, then
// average pooling): every grid of N rows and blocks of 1, 2, 4 or 8 cells
// per axis, the pooled rows compared with t's at every step.
func (s *synth) gridPooledPiece(t *val, off int, vals []*val) *val {
	if len(t.shape) != 2 {
		return nil
	}
	C, tol := t.shape[1], tolerance(t.format)
	for _, v := range vals {
		if v.opaque || len(v.shape) != 2 || v.shape[1] != C || v.shape[0] < 2 {
			continue
		}
		N := v.shape[0]
		for T := 1; T <= N; T++ {
			if N%T != 0 {
				continue
			}
			for H := 1; H <= N/T; H++ {
				if (N/T)%H != 0 {
					continue
				}
				W := N / T / H
				for _, kt := range poolKernels {
					for _, kh := range poolKernels {
						for _, kw := range poolKernels {
							if kt*kh*kw == 1 {
								continue
							}
							Tp, Hp, Wp := (T+kt-1)/kt, (H+kh-1)/kh, (W+kw-1)/kw
							n := Tp * Hp * Wp
							if n >= N || off+n > t.shape[0] {
								continue
							}
							if !firstPooledRow(v, t, off, T, H, W, kt, kh, kw) {
								continue // checked on one row before anything is derived
							}
							sub := s.part(t, 0, off, off+n)
							if w := s.gridPool(v, T, H, W, kt, kh, kw); w != nil && relRMS(t.format, w.data, sub.data) <= tol && s.everyStep(w, sub, tol) {
								return w
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// gridPool is v [T·H·W, C] laid out as a grid, each axis padded with
// copies of its last slice to a multiple of its block, averaged over
// blocks of kt×kh×kw cells: [T'·H'·W', C].
func (s *synth) gridPool(v *val, T, H, W, kt, kh, kw int) *val {
	C := v.shape[1]
	g := s.reshape(v, []int{T, H, W, C})
	Tp, Hp, Wp := (T+kt-1)/kt, (H+kh-1)/kh, (W+kw-1)/kw
	g = s.padEdge(g, 0, Tp*kt-T)
	g = s.padEdge(g, 1, Hp*kh-H)
	g = s.padEdge(g, 2, Wp*kw-W)
	g = s.reshape(g, []int{Tp, kt, Hp, kh, Wp, kw, C})
	if g == nil {
		return nil
	}
	g = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 4, 6, 1, 3, 5}}, args: []*val{g}, out: v.format, label: "pooling blocks"})
	g = s.reshape(g, []int{Tp * Hp * Wp, C, kt * kh * kw})
	if g == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 2}, args: []*val{g, nil}, out: v.format, label: fmt.Sprintf("average over %dx%dx%d blocks", kt, kh, kw)})
}

// firstPooledRow reports whether t's row off is, to 1e-3 of its scale,
// the first block's average of v [T·H·W, C] (cells past an axis's end
// read its last slice, as replicate padding does).
func firstPooledRow(v, t *val, off, T, H, W, kt, kh, kw int) bool {
	C := v.shape[1]
	var num, den float64
	for c := range C {
		var sum float64
		for dt := range kt {
			for dh := range kh {
				for dw := range kw {
					r := (min(dt, T-1)*H+min(dh, H-1))*W + min(dw, W-1)
					sum += float64(v.data[r*C+c])
				}
			}
		}
		d := sum/float64(kt*kh*kw) - float64(t.data[off*C+c])
		num += d * d
		den += float64(t.data[off*C+c]) * float64(t.data[off*C+c])
	}
	return num <= 1e-6*den+1e-12
}
