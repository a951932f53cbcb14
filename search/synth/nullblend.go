package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// nullBlended explains t as a whole as a blend with a learned null
// vector (nullBlendedPiece over all of t's last axis).
func (s *synth) nullBlended(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	return s.nullBlendedPiece(t, len(t.shape)-1, 0, vals)
}

// nullBlendedPiece explains t's entries from off on along its last axis
// as x·m + (1 − m)·n: where a mask m of zeros and ones (a value of the
// scope with one entry per row of t) is 1, a value x of the scope or
// sinusoids of a value's entries (fourierSources); where it is 0, a
// learned vector n (a parameter; the piece is as wide as n). A pipeline
// pads its objects to a fixed count and the model swaps the padded ones'
// features for null features (GLIGEN's phrases and boxes). Nil when no
// mask and vector fit.
func (s *synth) nullBlendedPiece(t *val, ax, off int, vals []*val) *val {
	last := len(t.shape) - 1
	if ax != last || last < 1 {
		return nil
	}
	rows := t.shape[:last]
	nrows := exec.Numel(rows)
	var masks, nulls []*val
	for _, v := range vals {
		switch {
		case v.opaque || v.numel() == 0:
		case v.param && len(v.shape) == 1 && v.shape[0] <= t.shape[last]-off:
			nulls = append(nulls, v)
		case !v.param && v.numel() == nrows && zeroOneMask(v.data):
			masks = append(masks, v)
		}
	}
	if len(masks) == 0 || len(nulls) == 0 {
		return nil
	}
	tol := tolerance(t.format)
	for _, m := range masks {
		for _, n := range nulls {
			w := n.shape[0]
			piece := t
			if off > 0 || w < t.shape[last] {
				piece = s.part(t, last, off, off+w)
			}
			if relRMS(t.format, maskedRows(piece.data, m.data, w, false), repeatRow(n.data, countZeros(m.data))) > tol {
				continue // the rows the mask drops do not hold the vector
			}
			mk := s.reshape(m, append(slices.Clone(rows), 1))
			if mk == nil {
				continue
			}
			for _, x := range s.blendSources(piece, m, vals) {
				if v := s.blend(x, mk, n, piece); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// blend is x·m + (1 − m)·n (torch's order: the kept values, then the
// null's share) when it reproduces piece at every step.
func (s *synth) blend(x, m, n, piece *val) *val {
	kept := s.derive(&expr{op: program.OpMul, args: []*val{x, m}, out: piece.format, label: "x·mask"})
	drop := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), m}, out: m.format, label: "1 − mask"})
	if kept == nil || drop == nil {
		return nil
	}
	null := s.derive(&expr{op: program.OpMul, args: []*val{drop, n}, out: piece.format, label: "(1 − mask)·" + n.origin})
	if null == nil {
		return nil
	}
	v, _ := s.best(piece, []*expr{{op: program.OpAdd, args: []*val{kept, null}, out: piece.format, label: "x·mask + (1 − mask)·null"}})
	return v
}

// blendSources are the values that may make piece's rows where the mask
// m is 1: values of the scope of piece's shape equal to it there, then
// sinusoids of a value's entries (fourierSources).
func (s *synth) blendSources(piece, m *val, vals []*val) []*val {
	w := piece.shape[len(piece.shape)-1]
	want := maskedRows(piece.data, m.data, w, true)
	var out []*val
	for _, v := range vals {
		if !v.opaque && slices.Equal(v.shape, piece.shape) && relRMS(piece.format, maskedRows(v.data, m.data, w, true), want) <= tolerance(piece.format) {
			out = append(out, v)
		}
	}
	return append(out, s.fourierSources(piece, m, vals)...)
}

// fourierSources explains piece's rows where m is 1 as sinusoids of the
// D entries of each row of a value b [rows…, D]: every entry's K
// frequencies' sines and cosines, the three axes (frequency, sin or cos,
// entry) laid out in any order along the row (a box's coordinates
// embedded as Fourier features: GLIGEN's K frequencies outermost, the
// four coordinates innermost). The sinusoid is fitted as a timestep
// embedding of the kept rows' entries (fitSinusoid: its period, scale
// and layout), then made of all of b's entries and laid out as the
// piece. Each fit is returned; the blend decides.
func (s *synth) fourierSources(piece, m *val, vals []*val) []*val {
	last := len(piece.shape) - 1
	rows, w := piece.shape[:last], piece.shape[last]
	kept := keptRows(m.data)
	if len(kept) == 0 {
		return nil
	}
	var out []*val
	for _, b := range vals {
		if b.opaque || b.param || len(b.shape) != len(piece.shape) || !slices.Equal(b.shape[:last], rows) {
			continue
		}
		d := b.shape[last]
		if d < 1 || w%(2*d) != 0 || w/(2*d) < 2 {
			continue
		}
		k := w / (2 * d)
		src := &val{shape: []int{len(kept) * d}, format: b.format}
		for _, r := range kept {
			src.data = append(src.data, b.data[r*d:(r+1)*d]...)
		}
		sizes := [3]int{k, 2, d} // frequency, sin or cos, entry
		for _, order := range permutations(3) {
			// the kept rows as timestep-embedding rows: one per entry,
			// its sin-or-cos halves of k frequencies each
			tab := &val{shape: []int{len(kept) * d, 2 * k}, format: piece.format}
			tab.data = make([]float32, 0, len(kept)*w)
			for _, r := range kept {
				row := piece.data[r*w : (r+1)*w]
				for e := range d {
					for h := range 2 {
						for f := range k {
							tab.data = append(tab.data, row[layoutIndex(order, sizes, [3]int{f, h, e})])
						}
					}
				}
			}
			split := s.fourierTable(b, src, tab, kept, rows, d, k)
			if split == nil {
				continue
			}
			// split's axes after the rows: entry, sin or cos, frequency
			at := [3]int{last + 2, last + 1, last}
			perm := make([]int, 0, last+3)
			for i := range last {
				perm = append(perm, i)
			}
			for _, a := range order {
				perm = append(perm, at[a])
			}
			moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{split}, out: split.format, label: "sinusoids laid out as the row"})
			if x := s.reshape(moved, piece.shape); x != nil {
				out = append(out, x)
			}
		}
	}
	return out
}

// fourierTable is the sinusoids of every entry of b as a table
// [rows…, D, 2, K] (entry, sin or cos, frequency), fitted on the kept
// rows (src, one entry each, and tab, its 2K sines and cosines): a
// timestep embedding (fitSinusoid), or, where none reproduces them, the
// frequencies' products and their sines and cosines each rounded to the
// table's format (fourierProducts). Nil when neither fits.
func (s *synth) fourierTable(b, src, tab *val, kept, rows []int, d, k int) *val {
	var all *val
	if fit := s.fitSinusoid(src, tab); fit != nil {
		all = s.sameSinusoid(fit, src, s.reshape(b, []int{exec.Numel(rows) * d}))
	} else {
		all = s.fourierProducts(b, src, tab, kept, rows, d, k)
	}
	if all == nil {
		return nil
	}
	return s.reshape(all, append(slices.Clone(rows), d, 2, k))
}

// fourierProducts is the sinusoid table of b's entries computed as a
// narrow-format model computes it (GLIGEN's boxes in bf16: the
// frequencies cast to the boxes' dtype, then x·f rounded, then sin and
// cos): the frequencies f_i = P^(−i/(K − shift)) of each period P the
// kept rows show (sinusoidPeriods), each rounded to the format and
// moved by up to one step of it where that fits its own columns better,
// then [sin | cos] (or [cos | sin]) of b·f, [rows…·D, 2K]. Nil when no
// table reproduces tab.
func (s *synth) fourierProducts(b, src, tab *val, kept, rows []int, d, k int) *val {
	f := tab.format
	tol := tolerance(f)
	for _, flip := range []bool{false, true} {
		for _, shift := range []float32{0, 1} {
			p := exec.TimestepParams{Dim: 2 * k, FlipSinToCos: flip, FreqShift: shift, Scale: 1, MaxPeriod: 10000}
			for _, period := range s.sinusoidPeriods(src, tab, p) {
				for _, m := range []exec.Math{exec.MathPrecise, exec.MathCUDASinCos} {
					freqs := fourierFreqs(src.data, tab.data, k, period, shift, flip, f, m)
					x := s.reshape(b, []int{exec.Numel(rows) * d, 1})
					fr := &val{shape: []int{k}, data: freqs, format: f, origin: b.origin + "/frequencies", constNote: fmt.Sprintf("sinusoid frequencies %g^(−i/%g), i < %d, in %s", period, float32(k)-shift, k, f)}
					ang := s.derive(&expr{op: program.OpMul, args: []*val{x, fr}, out: f, label: "x·f"})
					sin := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSin}, args: []*val{ang}, out: f, math: m, label: "sin"})
					cos := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActCos}, args: []*val{ang}, out: f, math: m, label: "cos"})
					halves := []*val{sin, cos}
					if flip {
						halves = []*val{cos, sin}
					}
					table := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: halves, out: f, label: "sinusoids"})
					if table == nil {
						continue
					}
					if relRMS(f, keptOf(table.data, kept, d, 2*k), tab.data) <= tol {
						return table
					}
				}
			}
		}
	}
	return nil
}

// keptOf is the rows of a table over all of a value's entries (d per
// row of the value, w columns each) that the value's kept rows' entries
// are.
func keptOf(table []float32, kept []int, d, w int) []float32 {
	out := make([]float32, 0, len(kept)*d*w)
	for _, r := range kept {
		if (r+1)*d*w > len(table) {
			return nil
		}
		out = append(out, table[r*d*w:(r+1)*d*w]...)
	}
	return out
}

// fourierFreqs are K frequencies P^(−i/(K − shift)) rounded to f, each
// moved by up to one step of f where its own sines and cosines (columns
// i and K+i of tab, over the entries x) come nearer, under math m.
func fourierFreqs(x, tab []float32, k int, period, shift float32, flip bool, f precision.Format, m exec.Math) []float32 {
	sinAt, cosAt := 0, k
	if flip {
		sinAt, cosAt = k, 0
	}
	out := make([]float32, k)
	for i := range out {
		base := f.Round(float32(math.Pow(float64(period), -float64(i)/float64(float32(k)-shift))))
		best, bestErr := base, math.Inf(1)
		for _, c := range []float32{base, nextIn(f, base, 1), nextIn(f, base, -1)} {
			e := 0.0
			for n, xn := range x {
				sn, cs := sinCos32(f.Round(xn*c), m)
				row := tab[n*2*k : (n+1)*2*k]
				e += sq(float64(f.Round(sn)-row[sinAt+i])) + sq(float64(f.Round(cs)-row[cosAt+i]))
			}
			if e < bestErr {
				best, bestErr = c, e
			}
		}
		out[i] = best
	}
	return out
}

func sq(x float64) float64 { return x * x }

// sinCos32 are sin a and cos a in f32 as the act op computes them under
// m (CUDA's sinf and cosf, or correctly rounded).
func sinCos32(a float32, m exec.Math) (float32, float32) {
	if m&exec.MathCUDASinCos != 0 {
		return exec.SinCUDA(a), exec.CosCUDA(a)
	}
	return float32(math.Sin(float64(a))), float32(math.Cos(float64(a)))
}

// nextIn is the value of f next to c (c itself in f) in direction dir
// (+1 up, −1 down).
func nextIn(f precision.Format, c float32, dir float32) float32 {
	if c == 0 {
		return c
	}
	delta := float32(math.Abs(float64(c))) * 0x1p-24 * dir
	for range 32 {
		if n := f.Round(c + delta); n != c {
			return n
		}
		delta *= 2
	}
	return c
}

// layoutIndex is the position in a row laid out with the axes in order
// (outermost first; sizes and at by axis) of the element at at.
func layoutIndex(order []int, sizes, at [3]int) int {
	i := 0
	for _, a := range order {
		i = i*sizes[a] + at[a]
	}
	return i
}

// zeroOneMask reports whether every entry is 0 or 1, with both present.
func zeroOneMask(d []float32) bool {
	zero, one := false, false
	for _, x := range d {
		switch x {
		case 0:
			zero = true
		case 1:
			one = true
		default:
			return false
		}
	}
	return zero && one
}

// maskedRows are the rows of data (w entries each) where mask is 1
// (keep) or 0 (not keep), end to end.
func maskedRows(data, mask []float32, w int, keep bool) []float32 {
	var out []float32
	for r, x := range mask {
		if (x == 1) == keep && (r+1)*w <= len(data) {
			out = append(out, data[r*w:(r+1)*w]...)
		}
	}
	return out
}

// keptRows are the indices where mask is 1.
func keptRows(mask []float32) []int {
	var out []int
	for r, x := range mask {
		if x == 1 {
			out = append(out, r)
		}
	}
	return out
}

func countZeros(d []float32) int {
	n := 0
	for _, x := range d {
		if x == 0 {
			n++
		}
	}
	return n
}

// repeatRow is row n times, end to end.
func repeatRow(row []float32, n int) []float32 {
	out := make([]float32, 0, n*len(row))
	for range n {
		out = append(out, row...)
	}
	return out
}
