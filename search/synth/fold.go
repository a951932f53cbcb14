package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// window is a sliding window along one axis: k taps d apart, the axis
// padded by p zero cells on each side, moved by st (torch's unfold and
// fold).
type window struct{ k, d, p, st int }

func (w window) String() string {
	return fmt.Sprintf("kernel %d dilation %d pad %d stride %d", w.k, w.d, w.p, w.st)
}

// count is how many windows fit along n cells (0 where none does).
func (w window) count(n int) int {
	span := n + 2*w.p - w.d*(w.k-1)
	if span < 1 {
		return 0
	}
	return (span-1)/w.st + 1
}

// source is the cell tap i of window o reads, and whether it lies inside
// the n cells (outside it reads the padding's zero).
func (w window) source(o, i, n int) (int, bool) {
	c := o*w.st + i*w.d - w.p
	return c, c >= 0 && c < n
}

// windowsOf are the windows of k taps whose counts along h and w multiply
// to l: dilation 1 to 3, stride 1 to min(k+1, 8) or 2k, every padding up
// to the kernel's reach.
func windowsOf(k, h, w, l int) []window {
	var strides []int
	for st := 1; st <= min(k+1, 8); st++ {
		strides = append(strides, st)
	}
	if 2*k > min(k+1, 8) {
		strides = append(strides, 2*k)
	}
	var out []window
	for d := 1; d <= 3; d++ {
		for _, st := range strides {
			for p := 0; p <= d*(k-1); p++ {
				win := window{k, d, p, st}
				if oh, ow := win.count(h), win.count(w); oh > 0 && ow > 0 && oh*ow == l {
					out = append(out, win)
				}
			}
		}
	}
	return out
}

// selection is the [k·o, n] matrix whose row (i, j) picks the cell tap i
// of window j reads along n cells (a zero row where it reads padding):
// unfold along one axis as a product, exact in any format.
func selection(n int, w window) []float32 {
	o := w.count(n)
	m := make([]float32, w.k*o*n)
	for i := range w.k {
		for j := range o {
			if c, in := w.source(j, i, n); in {
				m[(i*o+j)*n+c] = 1
			}
		}
	}
	return m
}

// matrixT is the [c, r] transpose of the row-major [r, c] matrix m.
func matrixT(m []float32, r, c int) []float32 {
	out := make([]float32, len(m))
	for i := range r {
		for j := range c {
			out[j*r+i] = m[i*c+j]
		}
	}
	return out
}

// alongAxis is v multiplied along axis a by the [m, n] matrix mat (n = the
// axis's length): the axis moved first, the product, moved back.
func (s *synth) alongAxis(v *val, a int, mat *val, out precision.Format, label string) *val {
	return s.alongFirst(v, a, mat.shape[0], out, func(rows *val) *val {
		return s.derive(&expr{op: program.OpMatMul, args: []*val{mat, rows}, out: out, label: label})
	})
}

// selectionConst is selection(n, w) (or its transpose, for fold) as a
// constant of the search.
func (s *synth) selectionConst(n int, w window, fold bool) *val {
	o := w.count(n)
	m, shape, what := selection(n, w), []int{w.k * o, n}, "the cell each tap of each window reads"
	if fold {
		m, shape, what = matrixT(m, w.k*o, n), []int{n, w.k * o}, "the taps of the windows that read each cell"
	}
	name := fmt.Sprintf("windows[%d,%s,fold=%v]", n, w, fold)
	return s.relConst(name, shape, m, fmt.Sprintf("%s, %d cells, %s (made from the sizes)", what, n, w))
}

// unfoldedMap is x [B, C, H, W] unfolded (torch's unfold: each window's
// k×k cells as channels, [B, C·k², L]): a selection along each axis, the
// taps then moved beside the channels.
func (s *synth) unfoldedMap(x *val, w window) *val {
	b, c, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	oh, ow := w.count(h), w.count(wd)
	cur := s.alongAxis(x, 2, s.selectionConst(h, w, false), x.format, "each window's rows")
	cur = s.alongAxis(cur, 3, s.selectionConst(wd, w, false), x.format, "each window's columns")
	cur = s.reshape(cur, []int{b, c, w.k, oh, w.k, ow})
	if cur == nil {
		return nil
	}
	cur = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 2, 4, 3, 5}}, args: []*val{cur}, out: x.format, label: "taps beside the channels"})
	return s.reshape(cur, []int{b, c * w.k * w.k, oh * ow})
}

// foldedMap is y [B, C·k², L] folded onto an h×w map (torch's fold: each
// window's taps summed back onto the cells they came from, [B, C, h, w]):
// the taps moved beside their windows, then the transposed selection
// along each axis, the columns' sum in f32 and the rows' rounded to out.
func (s *synth) foldedMap(y *val, c, h, wd int, w window, out precision.Format) *val {
	b := y.shape[0]
	oh, ow := w.count(h), w.count(wd)
	cur := s.reshape(y, []int{b, c, w.k, w.k, oh, ow})
	if cur == nil {
		return nil
	}
	cur = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 2, 4, 3, 5}}, args: []*val{cur}, out: y.format, label: "taps beside their windows"})
	cur = s.reshape(cur, []int{b, c, w.k * oh, w.k * ow})
	cur = s.alongAxis(cur, 3, s.selectionConst(wd, w, true), precision.F32, "the columns' taps summed")
	return s.alongAxis(cur, 2, s.selectionConst(h, w, true), out, "the rows' taps summed")
}

// fitUnfold explains a parameterless call's result t [B, C·k², L] as x
// [B, C, H, W] unfolded (nn.Unfold: T2T-ViT's soft split, VOLO's outlook
// attention's values): every window of a square kernel whose counts give
// L, checked exactly on the host first (an unfold moves values).
func (s *synth) fitUnfold(x, t *val) *val {
	if len(x.shape) != 4 || len(t.shape) != 3 || x.shape[0] != t.shape[0] || x.integral() {
		return nil
	}
	k := squareTaps(t.shape[1], x.shape[1])
	if k == 0 {
		return nil
	}
	for _, w := range windowsOf(k, x.shape[2], x.shape[3], t.shape[2]) {
		if !slices.Equal(unfoldHost(x.data, x.shape, w), t.data) {
			continue
		}
		if v := s.unfoldedMap(x, w); v != nil {
			if v := s.bestFit(t, []*expr{v.from}, "glue"); v != nil {
				v.fit.label = "unfolded, " + w.String()
				return v
			}
		}
	}
	return nil
}

// fitFold explains a parameterless call's result t [B, C, H, W] as x
// [B, C·k², L] folded (nn.Fold, F.fold): every square window whose counts
// over H×W give L, screened on the host, then scored.
func (s *synth) fitFold(x, t *val) *val {
	if len(x.shape) != 3 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.integral() {
		return nil
	}
	c := t.shape[1]
	k := squareTaps(x.shape[1], c)
	if k == 0 {
		return nil
	}
	tol := tolerance(t.format)
	var cands []*expr
	for _, w := range windowsOf(k, t.shape[2], t.shape[3], x.shape[2]) {
		if relRMS(t.format, foldHost(x.data, t.shape, w), t.data) > 2*tol {
			continue
		}
		if v := s.foldedMap(x, c, t.shape[2], t.shape[3], w, t.format); v != nil {
			v.from.label = "folded, " + w.String()
			cands = append(cands, v.from)
		}
	}
	return s.bestFit(t, cands, "glue")
}

// squareTaps is k where wide = c·k² (an unfolded value's channels over
// its map's), or 0 where no whole k is.
func squareTaps(wide, c int) int {
	if c <= 0 || wide%c != 0 {
		return 0
	}
	if k := isqrt(wide / c); k > 0 && k*k*c == wide {
		return k
	}
	return 0
}

// unfoldHost is torch's unfold of x [B, C, H, W] on the host.
func unfoldHost(x []float32, shape []int, w window) []float32 {
	b, c, h, wd := shape[0], shape[1], shape[2], shape[3]
	oh, ow := w.count(h), w.count(wd)
	out := make([]float32, 0, b*c*w.k*w.k*oh*ow)
	for bi := range b {
		for ci := range c {
			for i := range w.k {
				for j := range w.k {
					for y := range oh {
						for z := range ow {
							r, in1 := w.source(y, i, h)
							q, in2 := w.source(z, j, wd)
							v := float32(0)
							if in1 && in2 {
								v = x[((bi*c+ci)*h+r)*wd+q]
							}
							out = append(out, v)
						}
					}
				}
			}
		}
	}
	return out
}

// foldHost is torch's fold of y [B, C·k², L] onto shape [B, C, H, W] on
// the host, summed in float64.
func foldHost(y []float32, shape []int, w window) []float32 {
	b, c, h, wd := shape[0], shape[1], shape[2], shape[3]
	oh, ow := w.count(h), w.count(wd)
	acc := make([]float64, b*c*h*wd)
	n := 0
	for bi := range b {
		for ci := range c {
			for i := range w.k {
				for j := range w.k {
					for yy := range oh {
						for z := range ow {
							r, in1 := w.source(yy, i, h)
							q, in2 := w.source(z, j, wd)
							if in1 && in2 {
								acc[((bi*c+ci)*h+r)*wd+q] += float64(y[n])
							}
							n++
						}
					}
				}
			}
		}
	}
	out := make([]float32, len(acc))
	for i, a := range acc {
		out[i] = float32(a)
	}
	return out
}
