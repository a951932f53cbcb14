// Package rotary reads RoPE tables back into what made them: the angle of
// every rotating pair, the integer position ids and the frequencies behind
// those angles, θ, and the pattern the ids follow (a grid or a sequence).
// Structure discovery and the program search both read tables this way,
// so a model whose tables come from its request's shape (no position ids
// among any call's arguments) is read by the same rules in both.
package rotary

import (
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/semantics"
)

// Wrap maps an angle into (−π, π].
func Wrap(a float64) float64 {
	a = math.Mod(a+math.Pi, 2*math.Pi)
	if a < 0 {
		a += 2 * math.Pi
	}
	return a - math.Pi
}

// ComplexAngles reads a complex table (rows of pairs (re, im), pairs per
// row) as angles [rows][pairs].
func ComplexAngles(z []float32, pairs int) [][]float64 {
	if pairs <= 0 {
		return nil
	}
	rows := len(z) / (2 * pairs)
	out := make([][]float64, rows)
	for r := range out {
		out[r] = make([]float64, pairs)
		for j := range pairs {
			out[r][j] = math.Atan2(float64(z[2*(r*pairs+j)+1]), float64(z[2*(r*pairs+j)]))
		}
	}
	return out
}

// Angles reads real cos and sin tables of width channels per row as
// angles [rows][width/2]: atan2(sin, cos) at the first element of each
// rotating pair, the pairs being adjacent channels (interleaved) or the
// two halves (half), whichever carry equal cos values. ok is false when
// neither or both do (a layout that cannot be told apart).
func Angles(cos, sin []float32, width int) (angles [][]float64, interleaved, ok bool) {
	if width <= 0 || width%2 != 0 || len(cos) != len(sin) || len(cos)%width != 0 {
		return nil, false, false
	}
	rows := len(cos) / width
	inter, half := true, true
	for r := range rows {
		for j := 0; j < width/2; j++ {
			if cos[r*width+2*j] != cos[r*width+2*j+1] {
				inter = false
			}
			if cos[r*width+j] != cos[r*width+j+width/2] {
				half = false
			}
		}
	}
	if inter == half {
		return nil, false, false
	}
	out := make([][]float64, rows)
	for r := range out {
		out[r] = make([]float64, width/2)
		for j := range width / 2 {
			k := j
			if inter {
				k = 2 * j
			}
			out[r][j] = math.Atan2(float64(sin[r*width+k]), float64(cos[r*width+k]))
		}
	}
	return out, inter, true
}

// Positions is what ReadPositions finds in a set of tables.
type Positions struct {
	IDs   [][][]int // per table, [rows][axes]
	Pairs []int     // rotating pairs per axis
	Freq  []float64 // per pair: the angle step of one position (+Inf where no step shows)
}

// AxesDims are the channels per axis (two per pair).
func (p *Positions) AxesDims() []int {
	out := make([]int, len(p.Pairs))
	for i, n := range p.Pairs {
		out[i] = 2 * n
	}
	return out
}

// ReadPositions reads integer position ids back from RoPE angles (one
// [rows][pairs] array per table, all rotating by the same frequencies): a
// pair's frequency is the smallest angle step between consecutive rows;
// frequencies fall within an axis and stop falling where the next axis
// starts (an axis of one pair is one frequency, 1); an axis's ids are its reading pair's angle over its frequency
// (the pair turned furthest without wrapping), checked against every pair of the axis.
func ReadPositions(tabs [][][]float64) (*Positions, bool) { return ReadPositionsWithin(tabs, 0) }

// ReadPositionsWithin is ReadPositions of angles known to within noise
// radians (angles read back from rounded values, not tables): a step
// between two rows no larger than 2·noise is not a frequency's step.
func ReadPositionsWithin(tabs [][][]float64, noise float64) (*Positions, bool) {
	if len(tabs) == 0 || len(tabs[0]) == 0 {
		return nil, false
	}
	freq, ok := steps(tabs, max(1e-6, 2*noise), true)
	if !ok {
		return nil, false
	}
	axes := fallingRuns(freq, noise > 0)
	out := make([][][]int, len(tabs))
	for ti, t := range tabs {
		out[ti] = make([][]int, len(t))
		for r := range t {
			out[ti][r] = make([]int, len(axes))
		}
	}
	first := 0
	for a, n := range axes {
		slow := reading(tabs, freq, first, first+n-1)
		refit(tabs, freq, first, first+n-1, slow, noise > 0)
		for ti, t := range tabs {
			for r := range t {
				var id int
				if !math.IsInf(freq[slow], 1) {
					x := t[r][slow] / freq[slow]
					id = int(math.Round(x))
					if math.Abs(x-float64(id)) > max(0.05, 3*noise/freq[slow]) {
						return nil, false
					}
				}
				for j := first; j < first+n; j++ {
					want := 0.0
					if !math.IsInf(freq[j], 1) {
						want = float64(id) * freq[j]
					}
					if math.Abs(Wrap(want-t[r][j])) > max(1e-2, 3*noise) {
						return nil, false
					}
				}
				out[ti][r][a] = id
			}
		}
		first += n
	}
	return &Positions{IDs: out, Pairs: axes, Freq: freq}, true
}

// reading is the pair of the axis first…last whose angles read the ids:
// from the slowest pair, each faster one whose angles the ids read so far
// say stay under 0.9·π (unwrapped) takes over, its ids read again: the
// pair turned furthest without wrapping, where a narrow format's rounding
// (an absolute error on cos and sin) is smallest against the angle.
func reading(tabs [][][]float64, freq []float64, first, last int) int {
	maxID := func(j int) float64 {
		m := 0.0
		for _, t := range tabs {
			for r := range t {
				m = math.Max(m, math.Abs(t[r][j]))
			}
		}
		return m / freq[j]
	}
	j := last
	for j > first && math.IsInf(freq[j], 1) {
		j--
	}
	if math.IsInf(freq[j], 1) {
		return last
	}
	ids := maxID(j)
	for k := j - 1; k >= first; k-- {
		if math.IsInf(freq[k], 1) {
			continue
		}
		if ids*freq[k] >= 0.9*math.Pi {
			break
		}
		j, ids = k, maxID(k)
	}
	return j
}

// refit refines the frequencies of the axis of pairs first…last by least
// squares over every row: the ids its reading pair slow gives, then each
// pair's angles, unwrapped against id·f, fitted as id·f. One step between
// two rows of a table stored in a narrow format (bf16 cos and sin) is a
// few per cent off, and so would be every id read with it; where the
// angles are exact the fit returns the same frequencies. With noisy
// angles, a pair whose step the noise hid is fitted from the ids too.
func refit(tabs [][][]float64, freq []float64, first, last, slow int, noisy bool) {
	if math.IsInf(freq[slow], 1) {
		return
	}
	id := func(x float64) float64 { return math.Round(x / freq[slow]) }
	for range 2 {
		var num, den float64
		for _, t := range tabs {
			for r := range t {
				k := id(t[r][slow])
				num += t[r][slow] * k
				den += k * k
			}
		}
		if den > 0 && num > 0 {
			freq[slow] = num / den
		}
	}
	for j := first; j <= last; j++ {
		if j == slow || math.IsInf(freq[j], 1) && !noisy {
			continue
		}
		f := freq[j]
		if math.IsInf(f, 1) {
			f = 0 // a pair whose step the noise hid: fitted from the ids alone
		}
		var num, den float64
		for _, t := range tabs {
			for r := range t {
				k := id(t[r][slow])
				want := k * f
				u := want - Wrap(want-t[r][j]) // the angle unwrapped next to id·f
				num += u * k
				den += k * k
			}
		}
		if den > 0 && num > 0 {
			freq[j] = num / den
		}
	}
}

// steps is each pair's frequency: its smallest angle step between
// consecutive rows over every table larger than floor (+Inf where no step
// shows); ok is false where the tables' widths differ. Where consistent,
// the smallest step that every other step is a whole multiple of,
// wrapped: a jump of several positions wraps past 2π to a step smaller
// than one position's (ids 0…7 along one axis, then back to 0 where the
// next run starts: 7 radians wrap to 0.72), which no other step is a
// multiple of; where no step is consistent the smallest is taken.
func steps(tabs [][][]float64, floor float64, consistent bool) ([]float64, bool) {
	p := len(tabs[0][0])
	freq := make([]float64, p)
	for j := range p {
		var seen []float64
		for _, t := range tabs {
			if len(t) > 0 && len(t[0]) != p {
				return nil, false
			}
			for r := 1; r < len(t); r++ {
				if s := math.Abs(Wrap(t[r][j] - t[r-1][j])); s > floor {
					seen = append(seen, s)
				}
			}
		}
		freq[j] = math.Inf(1)
		if len(seen) == 0 {
			continue
		}
		slices.Sort(seen)
		seen = slices.CompactFunc(seen, func(a, b float64) bool { return math.Abs(b-a) <= floor })
		freq[j] = seen[0]
		for _, f := range seen {
			if !consistent {
				break
			}
			if stepsOf(f, seen, floor) {
				freq[j] = f
				break
			}
		}
	}
	return freq, true
}

// maxStepMultiple bounds the positions one step between consecutive rows
// may jump for stepsOf: more multiples would let a wrong step pass by
// chance.
const maxStepMultiple = 64

// stepsOf reports whether every step in seen is a whole multiple of f,
// wrapped into [0, π], to within floor and f32's error in f times the
// multiple.
func stepsOf(f float64, seen []float64, floor float64) bool {
	for _, d := range seen {
		ok := false
		for k := 1; k <= maxStepMultiple && !ok; k++ {
			ok = math.Abs(math.Abs(Wrap(float64(k)*f))-d) <= floor+1e-6*float64(k)
		}
		if !ok {
			return false
		}
	}
	return true
}

// fallingRuns splits the pairs into axes: within an axis the frequencies
// fall strictly (θ^(−2i/d)); one that does not, or a step after pairs
// that never turn, starts the next; with noisy angles, a pair whose step
// does not show continues the axis of the turning pair before it. The
// result is pairs per axis.
func fallingRuns(freq []float64, noisy bool) []int {
	var axes []int
	for j := range freq {
		if noisy && j > 0 && math.IsInf(freq[j], 1) && !math.IsInf(freq[j-1], 1) {
			// read from noisy angles: a pair too slow for its step to
			// show above the noise continues its axis's fall
			axes[len(axes)-1]++
			continue
		}
		if j == 0 || freq[j] > freq[j-1]*(1-1e-3) || math.IsInf(freq[j-1], 1) && !math.IsInf(freq[j], 1) {
			axes = append(axes, 0)
		}
		axes[len(axes)-1]++
	}
	return axes
}

// Theta estimates θ from each axis's frequencies (f_i = θ^(−2i/d) for an
// axis of d channels), the median over the axes, to 3 significant digits;
// 0 when no axis shows one.
func Theta(freq []float64, axesDims []int) float64 {
	var est []float64
	first := 0
	for _, d := range axesDims {
		if first+d/2 > len(freq) {
			break // no frequencies read for this axis
		}
		var sum float64
		n := 0
		for i := 1; i < d/2; i++ {
			if f := freq[first+i]; f > 1e-3 && f < math.Pi && !math.IsInf(f, 0) {
				sum += -math.Log(f) * float64(d) / float64(2*i)
				n++
			}
		}
		if n > 0 {
			est = append(est, math.Exp(sum/float64(n)))
		}
		first += d / 2
	}
	if len(est) == 0 {
		return 0
	}
	slices.Sort(est)
	v, _ := strconv.ParseFloat(strconv.FormatFloat(est[len(est)/2], 'g', 3, 64), 64)
	return v
}

// Pattern reads rows of ids as a row-major grid (preferred when
// preferGrid) or a sequence start + i·step.
func Pattern(rows [][]int, preferGrid bool) (semantics.PositionSource, bool) {
	g, gok := grid(rows)
	s, sok := sequence(rows)
	switch {
	case gok && (preferGrid || !sok):
		return g, true
	case sok:
		return s, true
	}
	return semantics.PositionSource{}, false
}

func grid(rows [][]int) (semantics.PositionSource, bool) {
	if len(rows) == 0 {
		return semantics.PositionSource{}, false
	}
	axes := len(rows[0])
	lo, hi := slices.Clone(rows[0]), slices.Clone(rows[0])
	for _, r := range rows {
		for a, v := range r {
			lo[a], hi[a] = min(lo[a], v), max(hi[a], v)
		}
	}
	g := make([]int, axes)
	n := 1
	for a := range axes {
		g[a] = hi[a] - lo[a] + 1
		n *= g[a]
	}
	if n != len(rows) {
		return semantics.PositionSource{}, false
	}
	idx := make([]int, axes)
	for _, r := range rows {
		for a := range axes {
			if r[a] != lo[a]+idx[a] {
				return semantics.PositionSource{}, false
			}
		}
		for a := axes - 1; a >= 0; a-- {
			if idx[a]++; idx[a] < g[a] {
				break
			}
			idx[a] = 0
		}
	}
	return semantics.PositionSource{From: "grid", Grid: g, Origin: lo}, true
}

func sequence(rows [][]int) (semantics.PositionSource, bool) {
	if len(rows) == 0 {
		return semantics.PositionSource{}, false
	}
	axes := len(rows[0])
	start, step := slices.Clone(rows[0]), make([]int, axes)
	if len(rows) > 1 {
		for a := range axes {
			step[a] = rows[1][a] - rows[0][a]
		}
	}
	for i, r := range rows {
		for a := range axes {
			if r[a] != start[a]+i*step[a] {
				return semantics.PositionSource{}, false
			}
		}
	}
	return semantics.PositionSource{From: "sequence", Start: start, Step: step}, true
}

// Estimate reads θ and the split into axes off tables that rope_table did
// not make (tables given by the request, a ladder of free frequencies, a
// constant): each pair's frequency is its smallest angle step between
// consecutive rows, axes split where frequencies stop falling, and θ is
// read per axis from its first two frequencies, (f₀/f₁)^(d/2) for an
// axis of d channels (the leading frequencies are the ones scaled RoPE
// variants leave alone). Only axes whose whole ladder is geometric count
// (a scaled ladder, YaRN's or NTK's, tells no θ this way): the median over
// them at 3 significant digits. ok is false where no axis is one.
func Estimate(cos, sin []float32, width int) (theta float64, axesDims []int, ok bool) {
	if theta, axesDims, ok = estimateOne(cos, sin, width); !ok {
		return estimateJoined(cos, sin, width)
	}
	return theta, axesDims, ok
}

// estimateOne is Estimate over tables of one layout across the width.
func estimateOne(cos, sin []float32, width int) (theta float64, axesDims []int, ok bool) {
	ang, _, ok := Angles(cos, sin, width)
	if !ok {
		return 0, nil, false
	}
	if len(ang) < 2 {
		return 0, nil, false
	}
	freq, _ := steps([][][]float64{ang}, 1e-6, false) // the estimate as it was read: a declared figure, never decisive
	axes := fallingRuns(freq, false)
	var geometric []float64
	first := 0
	for _, n := range axes {
		f := freq[first : first+n]
		first += n
		axesDims = append(axesDims, 2*n)
		if n < 2 || math.IsInf(f[1], 1) || f[1] <= 0 {
			continue
		}
		est := math.Pow(f[0]/f[1], float64(n))
		geo := true
		for i := 2; i < n && !math.IsInf(f[i], 1); i++ {
			geo = geo && math.Abs(f[i]/f[i-1]-f[1]/f[0]) < 1e-3*f[1]/f[0]
		}
		if geo {
			geometric = append(geometric, est)
		}
	}
	if len(geometric) == 0 {
		return 0, nil, false
	}
	slices.Sort(geometric)
	theta, _ = strconv.ParseFloat(strconv.FormatFloat(geometric[len(geometric)/2], 'g', 3, 64), 64)
	return theta, axesDims, theta > 1
}

// estimateJoined reads tables joined along the channels from one table per
// axis, each laid out on its own (half layouts side by side, which no
// single layout of the whole width reads): the split into two or three
// even runs whose every run reads as one axis; θ as Estimate reads it,
// the median over the runs.
func estimateJoined(cos, sin []float32, width int) (float64, []int, bool) {
	rows := len(cos) / width
	if rows < 2 || width%2 != 0 {
		return 0, nil, false
	}
	// the leading rows tell the frequencies; every split re-reads them,
	// so a real-width table is read at this many only
	rows = min(rows, 64)
	run := func(lo, hi int) (float64, bool) {
		d := hi - lo
		c, s := make([]float32, 0, rows*d), make([]float32, 0, rows*d)
		for r := range rows {
			c = append(c, cos[r*width+lo:r*width+hi]...)
			s = append(s, sin[r*width+lo:r*width+hi]...)
		}
		theta, axes, ok := estimateOne(c, s, d) // one level: runs are not split again
		return theta, ok && len(axes) == 1
	}
	for k := 2; k <= 3; k++ {
		for _, cuts := range evenCuts(width, k) {
			var thetas []float64
			var dims []int
			lo := 0
			for _, hi := range append(cuts, width) {
				t, ok := run(lo, hi)
				if !ok {
					break
				}
				thetas, dims, lo = append(thetas, t), append(dims, hi-lo), hi
			}
			if len(dims) == k {
				slices.Sort(thetas)
				return thetas[len(thetas)/2], dims, true
			}
		}
	}
	return 0, nil, false
}

// evenCuts are the ways to cut [0, width) into k runs of even width ≥ 4,
// as the k−1 inner cut points.
func evenCuts(width, k int) [][]int {
	if k == 1 {
		return [][]int{nil}
	}
	var out [][]int
	for first := 4; first <= width-4*(k-1); first += 2 {
		for _, rest := range evenCuts(width-first, k-1) {
			cut := []int{first}
			for _, r := range rest {
				cut = append(cut, first+r)
			}
			out = append(out, cut)
		}
	}
	return out
}
