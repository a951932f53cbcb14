package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"

	"gonum.org/v1/gonum/mat"
)

// maxBlockCells bounds a block's cells m: the map is m×m unknowns, solved
// from one row per (sample, channel, block).
const maxBlockCells = 256

// fixedBlockMap explains t [B, C·m, *S'] as x [B, C, *S] patched by a
// fixed linear map on non-overlapping blocks of each channel that no
// parameter holds (a wavelet or DCT patcher: its filters are buffers).
// Every output channel (c, k) at a position is row k of one m×m matrix M
// applied to the m cells of channel c's block there, so M is solved by
// least squares over every (block, channel) and must reproduce t; see
// fixedBlock for the readings tried.
func (s *synth) fixedBlockMap(x, t *val) *val { return s.fixedBlock(x, t, true) }

// fixedBlockUnmap is fixedBlockMap's inverse direction: t [B, C, *S] as
// each block of channel c being M times the m channels (c, k) of x
// [B, C·m, *S'] at one position (a patcher's decoder side).
func (s *synth) fixedBlockUnmap(x, t *val) *val { return s.fixedBlock(x, t, false) }

// blockGeom is one reading of a patched value's positions against an
// unpatched value's cells: f, the block's size along each spatial axis;
// sp, the patched sizes; causal: along the first axis of a video, the
// first frame repeated f[0] times in front (a causal patcher's encoder),
// or the first f[0]−1 frames dropped (its decoder).
type blockGeom struct {
	f, sp  []int
	full   []int
	causal bool
}

// blockGeoms are the readings of the unpatched spatial sizes full against
// the patched sizes sp whose blocks hold m cells: every size a whole
// multiple, and for a video also the causal one, S₀ = f₀·(S'₀ − 1) + 1.
func blockGeoms(full, sp []int, m int) []blockGeom {
	var out []blockGeom
	for _, causal := range []bool{false, true} {
		if causal && len(full) != 3 {
			continue
		}
		f, n := make([]int, len(full)), 1
		for i := range full {
			a, b := full[i], sp[i]
			if causal && i == 0 {
				a, b = a-1, b-1
			}
			if b < 1 || a%b != 0 {
				n = 0
				break
			}
			f[i] = a / b
			n *= f[i]
		}
		if n == m && (!causal || f[0] > 1) {
			out = append(out, blockGeom{f: f, sp: slices.Clone(sp), full: slices.Clone(full), causal: causal})
		}
	}
	return out
}

// cell is the flat spatial index in the unpatched value of cell j of
// block β, and whether the unpatched value holds that cell itself (not
// where a causal reading repeats the first frame: index 0 along time).
func (g blockGeom) cell(beta, j int) (int, bool) {
	idx, held := 0, true
	bs, js := unflat(beta, g.sp), unflat(j, g.f)
	for i := range g.f {
		p := bs[i]*g.f[i] + js[i]
		if g.causal && i == 0 {
			if p -= g.f[0] - 1; p < 0 {
				p, held = 0, false
			}
		}
		idx = idx*g.full[i] + p
	}
	return idx, held
}

// unflat is i's row-major coordinates in shape.
func unflat(i int, shape []int) []int {
	out := make([]int, len(shape))
	for a := len(shape) - 1; a >= 0; a-- {
		out[a] = i % shape[a]
		i /= shape[a]
	}
	return out
}

// fixedBlock is fixedBlockMap (forward) or fixedBlockUnmap: for every
// block reading and both orders of the patched channel index (channel
// major c·m + k, or sub-band major k·C + c, as wavelet levels concatenate
// their bands), the inverses of the block maps read before are tried,
// then M solved, each snapped to simple fractions and as it is: the
// simplest within the format's tolerance is kept; nil where none
// reproduces t. A map whose channel index does not separate as (c, k)
// is not read.
func (s *synth) fixedBlock(x, t *val, forward bool) *val {
	un, pa := x, t
	if !forward {
		un, pa = t, x
	}
	r := len(un.shape)
	if r != 4 && r != 5 || len(pa.shape) != r || un.shape[0] != pa.shape[0] || un.shape[1] == 0 || pa.shape[1]%un.shape[1] != 0 || x.integral() || x.numel() > blurMaxEntries {
		return nil
	}
	c, m := un.shape[1], pa.shape[1]/un.shape[1]
	if m < 2 || m > maxBlockCells {
		return nil
	}
	var best filterFit
	inverses := s.invertedBlockMaps(m)
	for _, g := range blockGeoms(un.shape[2:], pa.shape[2:], m) {
		for _, chMajor := range []bool{true, false} {
			if !chMajor && c == 1 {
				continue // one channel: both orders are one
			}
			var kerns []blockKernel
			for _, inv := range inverses {
				kerns = append(kerns, blockKernels(inv, "the inverse of a block map read before, ")...)
			}
			if sol := solveBlockMap(un, pa, g, chMajor, forward); sol != nil {
				kerns = append(kerns, blockKernels(sol, "")...)
			}
			for _, k := range kerns {
				w := &val{shape: []int{m, m}, data: k.w, format: precision.F32, origin: fmt.Sprintf("blockmap%d", m)}
				if !slices.ContainsFunc(k.w, func(v float32) bool { return x.format.Round(v) != v }) {
					w.format = x.format // exact in x's format, as the forward casts its buffer
				}
				note := blockNote(g, chMajor, forward, k.what)
				v := s.blockMapped(x, w, g, chMajor, forward, t, note)
				if errOf(v, t) > tolerance(t.format) {
					continue
				}
				if best.offer(v, t, w, note) {
					return best.take(s)
				}
				break // the simplest kernel that reproduces t: the solved one only fits the roundings closer
			}
		}
	}
	return best.take(s)
}

// blockNote says what a block map is, for the document.
func blockNote(g blockGeom, chMajor, forward bool, what string) string {
	dims := make([]string, len(g.f))
	for i, f := range g.f {
		dims[i] = fmt.Sprint(f)
	}
	n := "a fixed linear map on " + strings.Join(dims, "×") + " blocks of each channel"
	if !forward {
		n = fmt.Sprintf("a fixed linear map from the %d channels at one position to a %s block of each channel (a block patcher's inverse)", exec.Numel(g.f), strings.Join(dims, "×"))
	}
	n += ", read off the values (no parameter holds it), " + what
	if g.causal && forward {
		n += fmt.Sprintf(", the first frame repeated %d times", g.f[0])
	} else if g.causal {
		n += fmt.Sprintf(", the first %d frames dropped", g.f[0]-1)
	}
	if chMajor {
		return n + ", channels channel-major (c·m + k)"
	}
	return n + ", channels sub-band-major (k·C + c)"
}

// solveBlockMap solves the m×m map M (row-major [out, in], a linear's
// weight) by least squares from one row per (sample, channel, block) at
// up to 4096 evenly spaced rows: forward, the block's cells in and the
// patched channels out; else the reverse. An unpatched block that holds
// a dropped frame (the decoder's causal reading) gives no row. Nil where
// the rows are fewer than m or the system is singular.
func solveBlockMap(un, pa *val, g blockGeom, chMajor, forward bool) []float32 {
	b, c, m := un.shape[0], un.shape[1], pa.shape[1]/un.shape[1]
	nb, ns := exec.Numel(g.sp), exec.Numel(g.full)
	var rows [][2]int // (sample·C + channel, block)
	for bc := range b * c {
		for beta := range nb {
			if !forward && g.causal {
				if _, held := g.cell(beta, 0); !held {
					continue
				}
			}
			rows = append(rows, [2]int{bc, beta})
		}
	}
	n := min(len(rows), 4096)
	if n < m {
		return nil
	}
	cells, bands := mat.NewDense(n, m, nil), mat.NewDense(n, m, nil)
	for i := range n {
		row := rows[i*len(rows)/n]
		bi, ci, beta := row[0]/c, row[0]%c, row[1]
		for j := range m {
			idx, _ := g.cell(beta, j)
			cells.Set(i, j, float64(un.data[row[0]*ns+idx]))
			ch := ci*m + j
			if !chMajor {
				ch = j*c + ci
			}
			bands.Set(i, j, float64(pa.data[(bi*c*m+ch)*nb+beta]))
		}
	}
	in, out := cells, bands
	if !forward {
		in, out = bands, cells
	}
	var sol mat.Dense // out ≈ in·Mᵀ
	if err := sol.Solve(in, out); err != nil {
		return nil
	}
	w := make([]float32, m*m)
	for k := range m {
		for j := range m {
			w[k*m+j] = float32(sol.At(j, k))
		}
	}
	return w
}

// blockKernel is one candidate map: its entries and what they are.
type blockKernel struct {
	w    []float32
	what string
}

// blockKernels are the solved map snapped to each power-of-two
// denominator up to 2¹² that holds every entry within a fifth of a step
// (a wavelet's ±2⁻ᵏ: solved from a narrow format's roundings, it sits too
// far off for snappedTaps' hundredth) unless that leaves it all zeros,
// then to the smallest denominator that holds every entry
// (snappedTaps), then as solved: simplest first; from says where sol
// came from.
func blockKernels(sol []float32, from string) []blockKernel {
	var out []blockKernel
	add := func(w []float32, what string) {
		if w == nil || !slices.ContainsFunc(w, func(v float32) bool { return v != 0 }) {
			return
		}
		for _, k := range out {
			if slices.Equal(k.w, w) {
				return
			}
		}
		out = append(out, blockKernel{w, from + what})
	}
	for e := 0; e <= 12; e++ {
		d := math.Ldexp(1, e)
		w := make([]float32, len(sol))
		for i, v := range sol {
			q := float64(v) * d
			if math.Abs(q-math.Round(q)) > 0.2 {
				w = nil
				break
			}
			w[i] = float32(math.Round(q) / d)
		}
		what := fmt.Sprintf("its entries multiples of 1/%g", d)
		if e == 0 {
			what = "its entries whole numbers"
		}
		add(w, what)
	}
	add(snappedTaps(sol), "its entries simple fractions")
	add(sol, "its entries as solved")
	return out
}

// blockMapped runs the map w [m, m] on x's blocks as ops of the
// vocabulary: forward, the causal frame repeat, the blocks' cells moved
// last, the linear, the bands moved to the channel axis; else the reverse
// and the dropped frames sliced off. Nil where an op cannot run or the
// result is not t's shape.
func (s *synth) blockMapped(x, w *val, g blockGeom, chMajor, forward bool, t *val, note string) *val {
	r := len(g.f)
	b, m := x.shape[0], w.shape[0]
	c := x.shape[1]
	if !forward {
		c /= m
	}
	nb := exec.Numel(g.sp)
	// the unpatched value's axes split into blocks: [B·C·S'₀, f₀, S'₁, f₁, …]
	split := []int{b * c * g.sp[0], g.f[0]}
	perm := []int{0} // the block's positions first, then its cells
	for i := 1; i < r; i++ {
		split = append(split, g.sp[i], g.f[i])
		perm = append(perm, 2*i)
	}
	for i := range r {
		perm = append(perm, 2*i+1)
	}
	moved := make([]int, len(split))
	for i, p := range perm {
		moved[i] = split[p]
	}
	bands := []int{0, 1, 3, 2} // [B, C, nb, m] ↔ [B, C, m, nb]
	lay := []int{b, c, m, nb}
	if !chMajor {
		bands, lay = []int{0, 3, 1, 2}, []int{b, m, c, nb} // [B, C, nb, m] → [B, m, C, nb]
	}
	perm4 := func(v *val, p []int) *val {
		if v == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: p}, args: []*val{v}, out: v.format, label: "a block's cells moved"})
	}
	linear := func(v *val) *val {
		return s.derive(&expr{op: program.OpLinear, args: []*val{s.reshape(v, []int{b * c * nb, m}), w, nil}, out: t.format, label: note})
	}
	var v *val
	if forward {
		xs := x
		if g.causal {
			first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: 1}, args: []*val{x}, out: x.format, label: "the first frame"})
			rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: g.f[0] - 1, Axis: 2}, args: []*val{first}, out: x.format, label: "the first frame repeated"})
			xs = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{rep, x}, out: x.format, label: "the first frame in front"})
		}
		cells := perm4(s.reshape(xs, split), perm)
		v = perm4(s.reshape(linear(cells), []int{b, c, nb, m}), bands)
	} else {
		cells := perm4(s.reshape(x, lay), inversePerm(bands))
		blocks := perm4(s.reshape(linear(cells), moved), inversePerm(perm))
		full := append([]int{b, c}, g.f[0]*g.sp[0])
		for i := 1; i < r; i++ {
			full = append(full, g.f[i]*g.sp[i])
		}
		v = s.reshape(blocks, full)
		if g.causal && v != nil {
			v = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: g.f[0] - 1, End: full[2]}, args: []*val{v}, out: v.format, label: "the repeated frames dropped"})
		}
	}
	if v == nil || v.numel() != t.numel() {
		return nil
	}
	return s.reshape(v, t.shape)
}

// invertedBlockMaps are the inverses of the m×m block maps this search
// has already declared: a patcher's decoder inverts its encoder, and
// its own values may not pin the map down (channels made by a
// convolution from a few span few directions of the m, so the solved
// map is off by far more than a step where a narrow format's roundings
// leave it room).
func (s *synth) invertedBlockMaps(m int) [][]float32 {
	var out [][]float32
	for _, name := range s.em.p.Order {
		v := s.em.p.Values[name]
		if v.Kind != program.Const || !strings.HasPrefix(name, "const:blockmap") || !slices.Equal(v.Shape, []int{m, m}) {
			continue
		}
		a := mat.NewDense(m, m, nil)
		for i, x := range v.Data {
			a.Set(i/m, i%m, float64(x))
		}
		var inv mat.Dense
		if err := inv.Inverse(a); err != nil {
			continue
		}
		w := make([]float32, m*m)
		for i := range w {
			w[i] = float32(inv.At(i/m, i%m))
		}
		out = append(out, w)
	}
	return out
}
