package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/precision"

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
	var best filterFit
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
					sys := filterTaps(xp, t, k, st, p, mode == "zeros")
					for _, kern := range sys.kernels(t.format) {
						kc := &val{shape: []int{c, 1, k}, data: make([]float32, c*k), format: x.format, origin: fmt.Sprintf("filter%d", k)}
						for ch := range c {
							for i, v := range kern {
								kc.data[ch*k+i] = x.format.Round(v)
							}
						}
						if best.offer(s.fitConv1D(xp, []*val{kc}, t), t, kc, fmt.Sprintf("a fixed %d-tap filter applied to each channel (a buffer of the module: no parameter holds it), %s-padded %d, stride %d, its taps %v read off the values", k, mode, p, st, kern)) {
							return best.take(s)
						}
					}
				}
			}
		}
	}
	return best.take(s)
}

// filterFit keeps the closest of the geometries and kernels whose
// convolution reproduces a filtered value: in a narrow format a shorter
// kernel solved by least squares can come within the format's tolerance
// of a longer one's output, and only the kernel the forward used is
// exact.
type filterFit struct {
	v, kernel *val
	note      string
	err       float64
}

// offer keeps v (a convolution by kernel, nil where it did not
// reproduce t) where it is closer to t than the fits before it; true
// where it is exact, so no other can be closer.
func (f *filterFit) offer(v, t, kernel *val, note string) bool {
	if v == nil {
		return false
	}
	e := errOf(v, t)
	if f.v == nil || e < f.err {
		*f = filterFit{v: v, kernel: kernel, note: note, err: e}
	}
	return e == 0
}

// take names the kept fit's kernel and returns its value (nil where none
// reproduced).
func (f *filterFit) take(s *synth) *val {
	if f.v == nil {
		return nil
	}
	s.em.constant(f.kernel, f.note)
	return f.v
}

// filterTaps is the system t[b, c, i] ≈ Σ_j K_j·x[b, c, st·i + j − p] of
// the k taps K (zeros outside x where zeroPad, else x already padded by p
// and read from 0).
func filterTaps(x, t *val, k, st, p int, zeroPad bool) *tapSystem {
	l, lo := x.shape[2], t.shape[2]
	return newTapSystem(t, k, func(e, j int) float64 {
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
	return newTapSystem(t, k, basis).solve()
}

// tapSystem is the least-squares system of a kernel's taps: a row per
// sampled entry of the filtered value, its column j the entry's input
// under tap j.
type tapSystem struct {
	a *mat.Dense
	y *mat.VecDense
}

func newTapSystem(t *val, k int, basis func(e, j int) float64) *tapSystem {
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
	return &tapSystem{a: a, y: y}
}

// solve is the least-squares taps; nil where the system is singular.
func (ts *tapSystem) solve() []float32 {
	var sol mat.VecDense
	if err := sol.SolveVec(ts.a, ts.y); err != nil {
		return nil
	}
	_, k := ts.a.Dims()
	taps := make([]float32, k)
	for i := range taps {
		taps[i] = float32(sol.AtVec(i))
	}
	return taps
}

// kernels are the kernels a solved system offers, in the order tried:
// its taps snapped to a common denominator, the binary fractions that
// round as a narrow format's forward did, and the taps as solved; nil
// where the system is singular.
func (ts *tapSystem) kernels(f precision.Format) [][]float32 {
	taps := ts.solve()
	if taps == nil {
		return nil
	}
	return slices.DeleteFunc([][]float32{snappedTaps(taps), ts.latticeTaps(taps, f), taps}, func(k []float32) bool { return k == nil })
}

// exactRows is how many of the system's first rows (at most 512) the
// kernel reproduces exactly once its sum is rounded to f.
func (ts *tapSystem) exactRows(kern []float32, f precision.Format) int {
	rows, k := ts.a.Dims()
	n := 0
	for r := range min(rows, 512) {
		sum := 0.0
		for j := range k {
			sum += float64(kern[j]) * ts.a.At(r, j)
		}
		if f.Round(float32(sum)) == float32(ts.y.AtVec(r)) {
			n++
		}
	}
	return n
}

// latticeTaps finds, where a narrow format's rounding leaves the solved
// taps ~10⁻³ off (too far for snappedTaps), the kernel of multiples of
// 2⁻ᵐ near them that reproduces the most sampled entries exactly, each
// tap that falls between two multiples tried at both (at most 2¹⁰
// kernels a lattice); nil where none reproduces more than the solved
// taps. A buffer's taps are short binary fractions (a resampler's cubic
// kernel is in 256ths) and only they give the forward's own roundings.
func (ts *tapSystem) latticeTaps(taps []float32, f precision.Format) []float32 {
	if taps == nil || f == precision.F32 {
		return nil
	}
	rows, _ := ts.a.Dims()
	all := min(rows, 512)
	best, bestN := []float32(nil), ts.exactRows(taps, f)
	for m := 4; m <= 12 && bestN < all; m++ {
		d := math.Ldexp(1, m)
		var choices [][]float32
		combos := 1
		for _, v := range taps {
			q := float64(v) * d
			if math.Abs(q-math.Round(q)) < 0.15 {
				choices = append(choices, []float32{float32(math.Round(q) / d)})
				continue
			}
			choices = append(choices, []float32{float32(math.Floor(q) / d), float32(math.Ceil(q) / d)})
			combos *= 2
		}
		if combos > 1<<10 {
			continue
		}
		kern := make([]float32, len(taps))
		for c := range combos {
			bit := 0
			for j, ch := range choices {
				kern[j] = ch[0]
				if len(ch) == 2 {
					kern[j] = ch[(c>>bit)&1]
					bit++
				}
			}
			if n := ts.exactRows(kern, f); n > bestN {
				best, bestN = slices.Clone(kern), n
			}
		}
	}
	return best
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
	var best filterFit
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
					sys := upFilterTaps(xp, t, k, st, tp)
					for _, kern := range sys.kernels(t.format) {
						kc := &val{shape: []int{c, c, k}, data: make([]float32, c*c*k), format: x.format, origin: fmt.Sprintf("upfilter%d", k)}
						for ch := range c {
							for i, v := range kern {
								kc.data[(ch*c+ch)*k+i] = x.format.Round(v)
							}
						}
						if best.offer(s.fitConvTransposed2D(xp, []*val{kc}, t), t, kc, fmt.Sprintf("a fixed %d-tap filter on the diagonal of a transposed convolution's weight (a buffer of the module: no parameter holds it), %s-padded %d, stride %d, its taps %v read off the values", k, mode, p, st, kern)) {
							return best.take(s)
						}
					}
				}
			}
		}
	}
	return best.take(s)
}

// upFilterTaps is the system t[b, c, o] ≈ Σ_j K_j·x[b, c, (o + P − j)/st]
// (the terms whose index is whole and inside x) of the k taps K.
func upFilterTaps(x, t *val, k, st, pad int) *tapSystem {
	l, lo := x.shape[2], t.shape[2]
	return newTapSystem(t, k, func(e, j int) float64 {
		bc, o := e/lo, e%lo
		if m := o + pad - j; m >= 0 && m%st == 0 && m/st < l {
			return float64(x.data[bc*l+m/st])
		}
		return 0
	})
}
