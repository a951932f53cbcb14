package synth

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// fixedFilter1D explains t [B, C, L'] as x [B, C, L] filtered channel by
// channel by a k-tap kernel no parameter holds (a buffer: a resampler's
// fixed low-pass, Dance Diffusion's "cubic" Downsample1d), its borders
// padded by zeros or by a mode (reflect, replicate, circular), then
// strided. The taps are read off the values: for every geometry whose
// lengths give L', t is linear in them, so they are solved by least
// squares at up to 4096 entries and snapped to the simplest common
// denominator that keeps them, else used as solved; the convolution is
// then read as a leaf's (fitConv1D), which must reproduce t. Tried where
// a parameterless call's other forms fail.
func (s *synth) fixedFilter1D(x, t *val) *val {
	if len(x.shape) != 3 || len(t.shape) != 3 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() || x.numel() > blurMaxEntries {
		return nil
	}
	c, l, lo := x.shape[1], x.shape[2], t.shape[2]
	for k := 2; k <= 8; k++ {
		for st := 1; st <= 2; st++ {
			for p := 0; p < k; p++ {
				if l+2*p < k || (l+2*p-k)/st+1 != lo {
					continue
				}
				for _, mode := range append([]string{"zeros"}, padModes...) {
					xp := x
					if mode != "zeros" {
						if p == 0 {
							continue
						}
						if xp = s.modePadded(x, 1, p, mode); xp == nil {
							continue
						}
					}
					taps := filterTaps(xp, t, k, st, p, mode == "zeros")
					if taps == nil {
						continue
					}
					for _, kern := range [][]float32{snappedTaps(taps), taps} {
						if kern == nil {
							continue
						}
						kc := &val{shape: []int{c, 1, k}, data: make([]float32, c*k), format: x.format, origin: fmt.Sprintf("filter%d", k)}
						for ch := range c {
							for i, v := range kern {
								kc.data[ch*k+i] = x.format.Round(v)
							}
						}
						if v := s.fitConv1D(xp, []*val{kc}, t); v != nil {
							s.em.constant(kc, fmt.Sprintf("a fixed %d-tap filter applied to each channel (a buffer of the module: no parameter holds it), %s-padded %d, stride %d, its taps %v read off the values", k, mode, p, st, kern))
							return v
						}
					}
				}
			}
		}
	}
	return nil
}

// filterTaps solves t[b, c, i] ≈ Σ_j K_j·x[b, c, st·i + j − p] for the k
// taps K (zeros outside x where zeroPad, else x already padded by p and
// read from 0); nil where the system is singular.
func filterTaps(x, t *val, k, st, p int, zeroPad bool) []float32 {
	l, lo := x.shape[2], t.shape[2]
	return solveTaps(t, k, func(e, j int) float64 {
		bc, i := e/lo, e%lo
		src := st*i + j
		if zeroPad {
			src -= p
		}
		if src < 0 || src >= l {
			return 0
		}
		return float64(x.data[bc*l+src])
	})
}

// solveTaps solves t ≈ Σ_j K_j·basis(e, j) for the k taps K by least
// squares at up to 4096 evenly spaced entries e of t; nil where the
// system is singular.
func solveTaps(t *val, k int, basis func(e, j int) float64) []float32 {
	n := t.numel()
	rows := min(n, 4096)
	a := mat.NewDense(rows, k, nil)
	y := mat.NewVecDense(rows, nil)
	for r := range rows {
		e := r * n / rows
		y.SetVec(r, float64(t.data[e]))
		for j := range k {
			a.Set(r, j, basis(e, j))
		}
	}
	var sol mat.VecDense
	if err := sol.SolveVec(a, y); err != nil {
		return nil
	}
	taps := make([]float32, k)
	for i := range taps {
		taps[i] = float32(sol.AtVec(i))
	}
	return taps
}

// fixedUpFilter1D is fixedFilter1D's upsampling twin: t [B, C, L'] as x
// padded (zeros or a mode), then a transposed convolution of stride 2 to
// 4 by a k-tap kernel per channel that no parameter holds (Dance
// Diffusion's Upsample1d: reflect padding, then conv_transpose1d by a
// diagonal weight of its buffer's taps). The taps are solved and snapped
// as fixedFilter1D's; the convolution is read as a leaf's
// (fitConvTransposed2D, the kernel laid on the diagonal of a [C, C, k]
// weight), which must reproduce t.
func (s *synth) fixedUpFilter1D(x, t *val) *val {
	if len(x.shape) != 3 || len(t.shape) != 3 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() || x.numel() > blurMaxEntries || t.shape[2] <= x.shape[2] {
		return nil
	}
	c, l, lo := x.shape[1], x.shape[2], t.shape[2]
	for st := 2; st <= 4; st++ {
		for k := st; k <= 8; k++ {
			for p := 0; p <= k/2; p++ {
				// P, the transposed padding, from the lengths
				twoP := (l+2*p-1)*st + k - lo
				if twoP < 0 || twoP%2 != 0 || twoP/2 >= k+p*st {
					continue
				}
				tp := twoP / 2
				for _, mode := range append([]string{"zeros"}, padModes...) {
					// zeros padded first are the transposed padding's
					// (P less p·st): only a mode pads here
					if (p > 0) != (mode != "zeros") {
						continue
					}
					xp := x
					if p > 0 {
						if xp = s.modePadded(x, 1, p, mode); xp == nil {
							continue
						}
					}
					taps := upFilterTaps(xp, t, k, st, tp)
					if taps == nil {
						continue
					}
					for _, kern := range [][]float32{snappedTaps(taps), taps} {
						if kern == nil {
							continue
						}
						kc := &val{shape: []int{c, c, k}, data: make([]float32, c*c*k), format: x.format, origin: fmt.Sprintf("upfilter%d", k)}
						for ch := range c {
							for i, v := range kern {
								kc.data[(ch*c+ch)*k+i] = x.format.Round(v)
							}
						}
						if v := s.fitConvTransposed2D(xp, []*val{kc}, t); v != nil {
							s.em.constant(kc, fmt.Sprintf("a fixed %d-tap filter on the diagonal of a transposed convolution's weight (a buffer of the module: no parameter holds it), %s-padded %d, stride %d, its taps %v read off the values", k, mode, p, st, kern))
							return v
						}
					}
				}
			}
		}
	}
	return nil
}

// upFilterTaps solves t[b, c, o] ≈ Σ_j K_j·x[b, c, (o + P − j)/st] (the
// terms whose index is whole and inside x) for the k taps K; nil where
// the system is singular.
func upFilterTaps(x, t *val, k, st, pad int) []float32 {
	l, lo := x.shape[2], t.shape[2]
	return solveTaps(t, k, func(e, j int) float64 {
		bc, o := e/lo, e%lo
		if m := o + pad - j; m >= 0 && m%st == 0 && m/st < l {
			return float64(x.data[bc*l+m/st])
		}
		return 0
	})
}
