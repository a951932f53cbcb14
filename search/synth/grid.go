package synth

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"gonum.org/v1/gonum/stat"
)

// gridQuantised explains t as a value x of the scope brought to a grid
// and back (a fake quantisation: TAESD's latents stored as bytes, scaled,
// clamped, ×255, rounded, /255, unscaled): t's values lie on a lattice
// u₀ + α·k of whole k, and k = round(clamp(β·x + γ)) for one x. The
// lattice is read off t's sorted values; β and γ off the entries inside
// the clamp (least squares, then the simplest numbers every entry
// allows); the clamp's bounds, where some entry lies past them, from k's
// least and greatest. Only where every entry agrees exactly; in f32 (a
// narrower format's rounding blurs the lattice: gridRoundTrip reads it).
func (s *synth) gridQuantised(t *val, vals []*val) *val {
	if t.numel() < 16 {
		return nil
	}
	if t.format != precision.F32 {
		return s.gridRoundTrip(t, vals)
	}
	u0, alpha, ks, ok := latticeOf(t.data)
	if !ok {
		return nil
	}
	kmin, kmax := slices.Min(ks), slices.Max(ks)
	for _, x := range vals {
		if x.param || x.opaque || x == t || x.numel() != t.numel() || x.integral() {
			continue
		}
		beta, gamma, lo, hi, ok := gridMap(x.data, ks, kmin, kmax)
		if !ok {
			continue
		}
		if v := s.gridExpr(x, t, beta, gamma, lo, hi, u0, alpha); v != nil {
			return v
		}
	}
	return nil
}

// latticeOf reads values as u₀ + α·k, k whole from 0: u₀ the least, α
// the least gap between distinct values, refined by least squares. ok
// where there are three or more levels, the lattice is coarse (α at least
// 1/4096 of the range, and far above f32's spacing) and every value lies
// on it within 1/1000 of a step.
func latticeOf(data []float32) (u0, alpha float64, ks []float64, ok bool) {
	levels := slices.Clone(data)
	slices.Sort(levels)
	levels = slices.Compact(levels)
	if len(levels) < 3 || math.IsNaN(float64(levels[0])) || math.IsInf(float64(levels[0]), 0) || math.IsInf(float64(levels[len(levels)-1]), 0) {
		return 0, 0, nil, false
	}
	u0 = float64(levels[0])
	span := float64(levels[len(levels)-1]) - u0
	alpha = math.Inf(1)
	for i := 1; i < len(levels); i++ {
		alpha = min(alpha, float64(levels[i])-float64(levels[i-1]))
	}
	big := math.Max(math.Abs(u0), math.Abs(float64(levels[len(levels)-1])))
	if alpha < span/4096 || alpha < big*1e-4 {
		return 0, 0, nil, false
	}
	var num, den float64
	for _, l := range levels {
		k := math.Round((float64(l) - u0) / alpha)
		num += k * (float64(l) - u0)
		den += k * k
	}
	alpha = num / den
	ks = make([]float64, len(data))
	for i, x := range data {
		q := (float64(x) - u0) / alpha
		k := math.Round(q)
		if math.Abs(q-k) > 1e-3 {
			return 0, 0, nil, false
		}
		ks[i] = k
	}
	return u0, alpha, ks, true
}

// gridMap finds β and γ with round(β·x + γ) = k for every entry inside
// (kmin, kmax), and the clamp: lo = kmin where some entry at kmin lies
// below kmin − ½ (NaN where none does: no clamp seen), hi likewise. The
// least-squares line, then for β near it the interval of γ every entry
// allows, then the simplest numbers inside both.
func gridMap(x []float32, ks []float64, kmin, kmax float64) (beta, gamma, lo, hi float64, ok bool) {
	var xs, ys []float64
	for i, k := range ks {
		if k > kmin && k < kmax {
			xs = append(xs, float64(x[i]))
			ys = append(ys, k)
		}
	}
	if len(xs) < 8 {
		return 0, 0, 0, 0, false
	}
	g0, b0 := stat.LinearRegression(xs, ys, nil, false)
	if b0 == 0 || math.IsNaN(b0) || math.IsInf(b0, 0) {
		return 0, 0, 0, 0, false
	}
	// γ's interval for a β: every interior entry's k − ½ ≤ β·x + γ < k + ½
	gammaRange := func(b float64) (float64, float64) {
		lo, hi := math.Inf(-1), math.Inf(1)
		for i, xv := range xs {
			lo = max(lo, ys[i]-0.5-b*xv)
			hi = min(hi, ys[i]+0.5-b*xv)
		}
		return lo, hi
	}
	// the allowed (β, γ) are a convex set, so the width of γ's interval
	// is concave in β: its widest β by golden sections near the
	// least-squares one, then the ends of the allowed β by bisection,
	// then the simplest numbers inside
	width := func(b float64) float64 { lo, hi := gammaRange(b); return hi - lo }
	best := goldenMin(func(b float64) float64 { return -width(b) }, b0-math.Abs(b0)/4, b0+math.Abs(b0)/4, 80)
	if width(best) <= 0 {
		return 0, 0, 0, 0, false
	}
	edge := func(inside, outside float64) float64 {
		for range 60 {
			mid := (inside + outside) / 2
			if width(mid) > 0 {
				inside = mid
			} else {
				outside = mid
			}
		}
		return inside
	}
	blo, bhi := edge(best, b0-math.Abs(b0)/4), edge(best, b0+math.Abs(b0)/4)
	beta = simplestIn(blo, math.Nextafter(bhi, math.Inf(1)), best)
	glo, ghi := gammaRange(beta)
	if glo >= ghi {
		return 0, 0, 0, 0, false
	}
	gamma = simplestIn(glo, ghi, g0)
	lo, hi = math.NaN(), math.NaN()
	for i, k := range ks {
		p := beta*float64(x[i]) + gamma
		switch {
		case k > kmin && k < kmax:
		case k == kmin && p < kmin-0.5:
			lo = kmin
		case k == kmax && p >= kmax+0.5:
			hi = kmax
		case math.Round(p) != k:
			return 0, 0, 0, 0, false
		}
	}
	return beta, gamma, lo, hi, true
}

// roundSignificant rounds v to the given number of significant digits.
func roundSignificant(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, float64(digits)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// simplestIn is the number of fewest significant digits in [lo, hi),
// the nearest to near among equals (near itself past nine digits).
func simplestIn(lo, hi, near float64) float64 {
	for digits := 1; digits <= 9; digits++ {
		for _, c := range []float64{roundSignificant(near, digits), roundSignificant((lo+hi)/2, digits)} {
			if c >= lo && c < hi {
				return c
			}
		}
	}
	return (lo + hi) / 2
}

// gridExpr builds gridQuantised's reading in f32: β·x + γ, clamped where
// lo and hi are numbers, rounded half to even, then u₀ + α·k.
func (s *synth) gridExpr(x, t *val, beta, gamma, lo, hi, u0, alpha float64) *val {
	p := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(beta)}, out: precision.F32, label: fmt.Sprintf("× %g (onto the grid)", beta)})
	p = s.derive(&expr{op: program.OpAdd, args: []*val{p, s.constant(gamma)}, out: precision.F32, label: fmt.Sprintf("+ %g", gamma)})
	if !math.IsNaN(lo) {
		p = s.derive(&expr{op: program.OpMaximum, args: []*val{p, s.constant(lo)}, out: precision.F32, label: fmt.Sprintf("at least %g", lo)})
	}
	if !math.IsNaN(hi) {
		p = s.derive(&expr{op: program.OpMinimum, args: []*val{p, s.constant(hi)}, out: precision.F32, label: fmt.Sprintf("at most %g", hi)})
	}
	k := s.derive(&expr{op: program.OpRound, args: []*val{p}, out: precision.F32, label: "the grid's level"})
	back := s.derive(&expr{op: program.OpMul, args: []*val{k, s.constant(alpha)}, out: precision.F32, label: fmt.Sprintf("× %.8g (the grid's step)", alpha)})
	back = s.derive(&expr{op: program.OpAdd, args: []*val{back, s.constant(u0)}, out: precision.F32, label: fmt.Sprintf("+ %.8g (its least level)", u0)})
	if back == nil || relRMS(t.format, back.data, t.data) > looseFloor(t.format) {
		return nil
	}
	return back
}

// gridLevels are the grids' top levels a round trip through whole numbers
// is read with: a byte's, and the other widths of an unsigned integer.
var gridLevels = []float64{255, 127, 65535, 15, 31, 63, 511, 1023, 4095}

// gridRoundTrip explains t, of a narrow format, as a value x of the scope
// stored on a grid of L+1 levels and read back, every step rounded to
// t's format: k = round(clamp(x/M + s, 0, 1)·L), t = (k/L − s)·M (TAESD's
// bf16 latents: x/6 + ½, ×255, rounded; /255, −½, ×6). The format blurs
// the lattice that gridQuantised reads in f32 (k/L is rounded before it is
// scaled back), so the reading is searched instead: x is t within a few
// steps wherever t is not at a bound, the step α = M/L is about √12 times
// their rms difference (a grid's uniform error), L is one of gridLevels,
// M a number of one or two significant digits near α·L, s ½ or 0. Each
// is tried on t's first entries in scalar arithmetic, and the first that
// reproduces them is built whole and kept only where it reproduces t bit
// for bit (all but one entry in a thousand, a tie's rounding).
func (s *synth) gridRoundTrip(t *val, vals []*val) *val {
	f := t.format
	for _, x := range vals {
		if x.param || x.opaque || x == t || x.numel() != t.numel() || x.integral() {
			continue
		}
		alpha, ok := gridStep(x.data, t.data)
		if !ok {
			continue
		}
		for _, levels := range gridLevels {
			for _, scale := range simpleNear(alpha*levels, 3) {
				for _, shift := range []float64{0.5, 0} {
					for _, addFirst := range []bool{false, true} {
						if !tripHolds(x.data, t.data, f, levels, scale, shift, addFirst) {
							continue
						}
						v := s.gridTrip(x, f, levels, scale, shift, addFirst)
						if v != nil && exactShare(v.data, t.data) >= 0.999 {
							return v
						}
					}
				}
			}
		}
	}
	return nil
}

// gridStep is a grid's step read off x and t, t x brought to the grid:
// √12 times their rms difference where t is not at its least or greatest
// value (a clamp's bounds). ok where such entries are an eighth of
// them, they differ somewhere, and nowhere by more than a tenth of t's
// range (t is x, coarsened).
func gridStep(x, t []float32) (float64, bool) {
	lo, hi := slices.Min(t), slices.Max(t)
	span := float64(hi) - float64(lo)
	if !(span > 0) || math.IsInf(span, 0) {
		return 0, false
	}
	var sum float64
	n := 0
	for i, tv := range t {
		if tv == lo || tv == hi {
			continue
		}
		d := float64(x[i]) - float64(tv)
		if math.Abs(d) > span/10 {
			return 0, false
		}
		sum += d * d
		n++
	}
	if n < max(len(t)/8, 8) || sum == 0 {
		return 0, false
	}
	return math.Sqrt(12 * sum / float64(n)), true
}

// simpleNear are the numbers of one, then two, significant digits within
// a factor of c, nearest c first among equals.
func simpleNear(c, factor float64) []float64 {
	if !(c > 0) || math.IsInf(c, 0) {
		return nil
	}
	lo, hi := c/factor, c*factor
	var out []float64
	for _, digits := range []int{1, 2} {
		var these []float64
		for p := math.Floor(math.Log10(lo)) - 1; p <= math.Ceil(math.Log10(hi)); p++ {
			unit := math.Pow(10, p)
			first, last := math.Pow(10, float64(digits-1)), math.Pow(10, float64(digits))-1
			for m := first; m <= last; m++ {
				v := roundSignificant(m*unit, digits)
				if v >= lo && v <= hi && !slices.Contains(out, v) && !slices.Contains(these, v) {
					these = append(these, v)
				}
			}
		}
		slices.SortFunc(these, func(a, b float64) int {
			return cmp.Compare(math.Abs(math.Log(a/c)), math.Abs(math.Log(b/c)))
		})
		out = append(out, these...)
	}
	return out
}

// tripHolds reports whether gridTrip's round trip, in scalar arithmetic
// rounded to f as torch's elementwise kernels round it (each op in f32,
// stored in f), reproduces t's first entries (up to 64).
func tripHolds(x, t []float32, f precision.Format, levels, scale, shift float64, addFirst bool) bool {
	r := f.Round
	L, M, S := float32(levels), float32(scale), float32(shift)
	for i := range min(len(t), 64) {
		var p float32
		if addFirst {
			p = r(r(x[i]+r(S*M)) / M)
		} else {
			p = r(r(x[i]/M) + S)
		}
		p = min(max(p, 0), 1)
		k := r(float32(math.RoundToEven(float64(r(p * L)))))
		if r(r(r(k/L)-S)*M) != t[i] {
			return false
		}
	}
	return true
}

// gridTrip builds the round trip of gridRoundTrip in format f: x/M + s
// (or (x + s·M)/M where addFirst), clamped to [0, 1], ×L, rounded to a
// whole level; then /L, −s, ×M.
func (s *synth) gridTrip(x *val, f precision.Format, levels, scale, shift float64, addFirst bool) *val {
	step := func(op program.Op, a *val, c float64, label string) *val {
		return s.derive(&expr{op: op, args: []*val{a, s.constant(c)}, out: f, label: label})
	}
	var p *val
	if addFirst {
		p = step(program.OpAdd, x, shift*scale, fmt.Sprintf("+ %g", shift*scale))
		p = step(program.OpDiv, p, scale, fmt.Sprintf("/ %g (onto [0, 1])", scale))
	} else {
		p = step(program.OpDiv, x, scale, fmt.Sprintf("/ %g", scale))
		p = step(program.OpAdd, p, shift, fmt.Sprintf("+ %g (onto [0, 1])", shift))
	}
	p = step(program.OpMaximum, p, 0, "at least 0")
	p = step(program.OpMinimum, p, 1, "at most 1")
	p = step(program.OpMul, p, levels, fmt.Sprintf("× %g (the grid's levels)", levels))
	k := s.derive(&expr{op: program.OpRound, args: []*val{p}, out: f, label: "the grid's level"})
	back := step(program.OpDiv, k, levels, fmt.Sprintf("/ %g", levels))
	back = step(program.OpSub, back, shift, fmt.Sprintf("− %g", shift))
	return step(program.OpMul, back, scale, fmt.Sprintf("× %g (back to x's range)", scale))
}
