package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// fitMaxPool explains a parameterless call's result t [B, C, Ho, Wo] as a
// max pool of x [B, C, H, W]: a k×k window of stride s, padded p with
// −∞, floor or ceil mode, every candidate whose output size is t's
// scored (hierarchical encoders' downsampling pools and ResNet stems).
// Each result is one of x's values, so a right reading is exact in any
// format, and the windows that shape the same output compete on values.
func (s *synth) fitMaxPool(x, t *val) *val {
	if len(x.shape) != 4 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() {
		return nil
	}
	if slices.Equal(x.shape, t.shape) && slices.Equal(x.data, t.data) {
		return nil // x itself (a window of one cell reads the same): not a pool
	}
	if !valuesOf(x.data, t.data) {
		return nil // a pool picks x's own values; an activation does not
	}
	var cands []*expr
	for _, k := range []int{2, 3, 4, 5, 7} {
		for _, st := range slices.Compact([]int{1, 2, k}) {
			for p := 0; p <= k/2; p++ {
				for _, ceil := range []bool{false, true} {
					a := program.ConvParams{Kernel: k, Stride: st, Pad: p, Ceil: ceil}
					if !poolFits(x.shape, t.shape, a) || ceil && poolFits(x.shape, t.shape, program.ConvParams{Kernel: k, Stride: st, Pad: p}) {
						continue // the floor reading, already a candidate
					}
					label := fmt.Sprintf("max pool %d stride %d pad %d", k, st, p)
					if ceil {
						label += " ceil"
					}
					cands = append(cands, &expr{op: program.OpMaxPool2D, attrs: program.Attrs{Conv: a}, args: []*val{x}, out: x.format, label: label})
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "glue", candidates: ev}
	}
	return v
}

// poolFits reports whether a pool configured by a maps x to y's shape.
func poolFits(x, y []int, a program.ConvParams) bool {
	out, err := program.PoolShape(x, a)
	return err == nil && slices.Equal(out, y)
}

// valuesOf reports whether every one of up to 256 evenly spaced values of
// t occurs among x's values (a screen before any pool is run).
func valuesOf(x, t []float32) bool {
	if len(t) == 0 {
		return false
	}
	held := make(map[float32]bool, len(x))
	for _, v := range x {
		held[v] = true
	}
	step := max(len(t)/256, 1)
	for i := 0; i < len(t); i += step {
		if !held[t[i]] {
			return false
		}
	}
	return true
}

// adaptiveWindows are torch's adaptive pool windows of n cells to m: cell
// i reads [⌊i·n/m⌋, ⌈(i+1)·n/m⌉), as the index of each of the longest
// window's j taps (tap-major), a short window repeating its last cell.
func adaptiveWindows(n, m int) (taps int, idx []float32) {
	lo := func(i int) int { return i * n / m }
	hi := func(i int) int { return ((i+1)*n + m - 1) / m }
	for i := range m {
		taps = max(taps, hi(i)-lo(i))
	}
	idx = make([]float32, taps*m)
	for j := range taps {
		for i := range m {
			idx[j*m+i] = float32(min(lo(i)+j, hi(i)-1))
		}
	}
	return taps, idx
}

// fitAdaptiveMaxPool explains a parameterless call's result t [B, C, Ho,
// Wo] as x [B, C, H, W] max-pooled adaptively where the sizes do not
// divide (windows of unequal lengths that may overlap; the dividing
// sizes are fitMaxPool's windows): along each axis, each window's taps
// gathered and their maximum taken.
func (s *synth) fitAdaptiveMaxPool(x, t *val) *val {
	if len(x.shape) != 4 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() ||
		x.shape[2]%t.shape[2] == 0 && x.shape[3]%t.shape[3] == 0 || !valuesOf(x.data, t.data) {
		return nil
	}
	cur := x
	for _, a := range []int{3, 2} {
		n, m := cur.shape[a], t.shape[a]
		if n == m {
			continue
		}
		taps, idx := adaptiveWindows(n, m)
		ids := s.relConst(fmt.Sprintf("adaptive[%d→%d]", n, m), []int{taps * m}, idx,
			fmt.Sprintf("the cells of each of %d adaptive windows over %d cells, the longest's %d taps (made from the sizes)", m, n, taps))
		ids.intType = true
		g := s.gatherAlong(cur, a, ids, "each window's taps")
		if g == nil {
			return nil
		}
		shape := slices.Concat(g.shape[:a], []int{taps, m}, g.shape[a+1:])
		mx := s.maxPooled(g, shape, a, x.format)
		if mx == nil {
			return nil
		}
		if cur = s.reshape(mx, slices.Concat(g.shape[:a], []int{m}, g.shape[a+1:])); cur == nil {
			return nil
		}
	}
	if cur == x || cur.from == nil {
		return nil
	}
	cur.from.label = fmt.Sprintf("adaptive max pool %dx%d to %dx%d", x.shape[2], x.shape[3], t.shape[2], t.shape[3])
	return s.bestFit(t, []*expr{cur.from}, "glue")
}
