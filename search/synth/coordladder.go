package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/internal/simple"
)

// coordReading is one reading of RoPE tables made from float position
// coordinates: per axis the affine map u = 2·m/max − 1 of the coordinate
// m (max 0: u = m, angles through zero), and the f32 frequency of every
// angle slot (in slot order), the angle of slot j at row r being
// u[r][axis(j)]·freq[j], each product rounded to f32.
type coordReading struct {
	maxes  []float32
	freqs  []float32
	shared bool // one ladder read over every axis together
}

// coordSample is one angle of a slot: the row's u, the wrapped angle,
// and how far the tables' storage may have moved it (0 for f32 tables).
type coordSample struct{ u, phi, noise float64 }

// readCoordRope reads the affine map and the ladder from wrapped angles
// phi [rows][k] at coordinates m [rows][A], k = F·A slots, slot(i, a)
// the slot of frequency i on axis a. Frequencies form a ladder from one
// end of the slots (ascending from i = 0, or from i = F−1); the end
// frequency turns by less than π, so its angles are read unwrapped and a
// line in m gives the map (slope α·f, intercept −f: the map's centre and
// scale); each later frequency is read on the lattice (φ + 2πk)/u that
// every row allows, the first by enumeration, the others by the ratio
// of the two before. Readings: the maxima snapped to integers, else to
// short decimals, where within 1e-4, and as read; nil where the angles
// allow none. noise is how far the tables' storage format may move an
// angle (angleNoise): 0 for f32 tables, whose angles are read to the
// product's rounding.
func readCoordRope(phi [][]float64, m [][]float32, a, f int, slot func(i, ax int) int, noise float64) []coordReading {
	rows := len(phi)
	if rows < 2 || a < 1 || f < 1 {
		return nil
	}
	for _, base := range []int{0, f - 1} {
		dir := 1
		if base > 0 {
			dir = -1
		}
		raw, snapped, ok := coordMaxes(phi, m, a, func(ax int) int { return slot(base, ax) }, noise)
		if !ok {
			continue
		}
		var out []coordReading
		for _, maxes := range [][]float32{snapped, raw} {
			if slices.ContainsFunc(out, func(c coordReading) bool { return slices.Equal(c.maxes, maxes) }) {
				continue
			}
			for _, r := range readLadders(phi, coordU(m, maxes), a, f, base, dir, slot, noise) {
				r.maxes = maxes
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			return out
		}
		if f == 1 {
			break
		}
	}
	return nil
}

// coordMaxes reads each axis's map from its end slot's angles, a line in
// m: φ = (2f/max)·m − f. An intercept of zero leaves max 0 (u = m).
func coordMaxes(phi [][]float64, m [][]float32, a int, end func(ax int) int, noise float64) (raw, snapped []float32, ok bool) {
	raw, snapped = make([]float32, a), make([]float32, a)
	for ax := range a {
		j := end(ax)
		var sx, sy, sxx, sxy float64
		n := float64(len(phi))
		lo, hi := math.Inf(1), math.Inf(-1)
		for r := range phi {
			x, y := float64(m[r][ax]), phi[r][j]
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		den := n*sxx - sx*sx
		if !(hi > lo) || den == 0 {
			return nil, nil, false // one coordinate on this axis: no line
		}
		slope := (n*sxy - sx*sy) / den
		icept := (sy - slope*sx) / n
		for r := range phi {
			if math.Abs(phi[r][j]-slope*float64(m[r][ax])-icept) > 1e-5+2*noise {
				return nil, nil, false // not a line: wrapped, or no affine map
			}
		}
		if math.Abs(icept) < 1e-6+noise {
			continue // through zero: u = m
		}
		mx := -2 * icept / slope
		if !(mx > 0) || math.IsInf(mx, 0) {
			return nil, nil, false
		}
		raw[ax], snapped[ax] = float32(mx), float32(mx)
		if r := math.Round(mx); r > 0 && math.Abs(r-mx) <= 1e-4*mx {
			snapped[ax] = float32(r)
		} else if c := simple.Snap(mx, func(x float64) bool { return math.Abs(x-mx) <= 1e-4*mx }); c != mx {
			// a short decimal (a base size over a scale: 20/0.32 = 62.5)
			snapped[ax] = float32(c)
		}
	}
	return raw, snapped, true
}

// coordU is u = 2·(m/max) − 1 per row and axis in f32 (the division
// first, as the tables' makers write it), or m where max is 0.
func coordU(m [][]float32, maxes []float32) [][]float64 {
	u := make([][]float64, len(m))
	for r := range m {
		u[r] = make([]float64, len(maxes))
		for ax, mx := range maxes {
			v := m[r][ax]
			if mx != 0 {
				v = float32(float32(v/mx)*2) - 1
			}
			u[r][ax] = float64(v)
		}
	}
	return u
}

// readLadders reads the frequencies of every slot: ladders over every
// axis together where any fits them all (each a reading), else one
// ladder per axis.
func readLadders(phi [][]float64, u [][]float64, a, f, base, dir int, slot func(i, ax int) int, noise float64) []coordReading {
	samples := func(i int, axes []int) []coordSample {
		var out []coordSample
		for r := range phi {
			for _, ax := range axes {
				out = append(out, coordSample{u[r][ax], phi[r][slot(i, ax)], noise})
			}
		}
		return out
	}
	all := make([]int, a)
	for ax := range a {
		all[ax] = ax
	}
	var out []coordReading
	for _, l := range readLadder(func(i int) []coordSample { return samples(i, all) }, f, base, dir) {
		freqs := make([]float32, a*f)
		for i := range f {
			for ax := range a {
				freqs[slot(i, ax)] = l[i]
			}
		}
		out = append(out, coordReading{freqs: freqs, shared: true})
	}
	if len(out) > 0 || a == 1 {
		return out
	}
	freqs := make([]float32, a*f)
	for ax := range a {
		ls := readLadder(func(i int) []coordSample { return samples(i, []int{ax}) }, f, base, dir)
		if ls == nil {
			return nil
		}
		for i := range f {
			freqs[slot(i, ax)] = ls[0][i]
		}
	}
	return []coordReading{{freqs: freqs}}
}

// readLadder reads f frequencies from base outwards (dir ±1): the base
// unwrapped, the next by enumeration (every lattice value all samples
// allow, the 8 that reproduce them best in f32, each followed on), the
// rest predicted by the ratio of the two before and taken on the lattice
// nearest; each value the f32 that reproduces the angles best. Every
// ladder read, the best first; nil where none reads every frequency.
func readLadder(samples func(i int) []coordSample, f, base, dir int) [][]float32 {
	s0 := samples(base)
	f0, ok := unwrappedFreq(s0)
	if !ok {
		return nil
	}
	if f == 1 {
		return [][]float32{{refineFreq(s0, f0)}}
	}
	type ladder struct {
		fs  []float32
		res float64
	}
	var out []ladder
	first := base + dir
	for _, f1 := range latticeFreqs(samples(first), f0) {
		fs := make([]float64, f)
		fs[base], fs[first] = f0, f1
		ok := true
		for i := first + dir; i >= 0 && i < f; i += dir {
			v, fit := nearestLattice(samples(i), fs[i-dir]*fs[i-dir]/fs[i-2*dir])
			if !fit {
				ok = false
				break
			}
			fs[i] = v
		}
		if !ok {
			continue
		}
		l := ladder{fs: make([]float32, f)}
		for i, v := range fs {
			l.fs[i] = refineFreq(samples(i), v)
			l.res = math.Max(l.res, residual32(samples(i), l.fs[i]))
		}
		out = append(out, l)
	}
	if noisy(s0) {
		// the ladder of the lowest frequencies first (latticeFreqs)
		slices.SortStableFunc(out, func(a, b ladder) int { return cmpAbs(maxAbs(a.fs), maxAbs(b.fs)) })
	} else {
		slices.SortStableFunc(out, func(a, b ladder) int { return cmpAbs(a.res, b.res) })
	}
	var ls [][]float32
	for _, l := range out[:min(len(out), 4)] {
		ls = append(ls, l.fs)
	}
	return ls
}

// angleTol is how far a read angle may sit from fl(u·f): the tables'
// rounding and the product's half ulp, with room.
func angleTol(x float64) float64 { return 2e-6 + 3e-7*math.Abs(x) }

// angleNoise is how far storing cos and sin in format f may move the
// angle atan2(sin, cos): each rounded to a relative error of at most half
// an ulp, the angle moves by at most cos·sin times their difference,
// under one ulp's relative size; doubled for room. 0 for f32 (and wider).
func angleNoise(f precision.Format) float64 {
	switch f {
	case precision.BF16:
		return 2 * 0x1p-8
	case precision.F16:
		return 2 * 0x1p-11
	}
	return 0
}

// wrap maps an angle to (−π, π].
func wrap(x float64) float64 { return x - 2*math.Pi*math.Round(x/(2*math.Pi)) }

// fits reports whether f reproduces every sample's wrapped angle.
func fits(ss []coordSample, f float64) bool {
	for _, s := range ss {
		if math.Abs(wrap(s.phi-f*s.u)) > angleTol(f*s.u)+s.noise {
			return false
		}
	}
	return true
}

// unwrappedFreq is f by least squares over angles taken as they are.
func unwrappedFreq(ss []coordSample) (float64, bool) {
	var num, den float64
	for _, s := range ss {
		num, den = num+s.u*s.phi, den+s.u*s.u
	}
	if den == 0 {
		return 0, false
	}
	f := num / den
	return f, f != 0 && fits(ss, f)
}

// latticeFreqs are the values beyond prev (same sign, up to 10⁶ times
// it) that every sample allows, at most 8, those whose f32 products
// reproduce the angles best first: (φ + 2πk)/u at the sample of largest
// |u|, each checked against all. Where every u is an integer, only the
// first 64 allowed values (the lowest) are refined and ranked: such
// samples cannot tell f from f + 2π (every alias fits them: an axis of
// integer positions 0 and 1 allows all million), and refining each is
// where the time of a grid reading that cannot succeed went.
const maxLattice = 64

func latticeFreqs(ss []coordSample, prev float64) []float64 {
	pivot := slices.MaxFunc(ss, func(a, b coordSample) int { return cmpAbs(a.u, b.u) })
	if pivot.u == 0 {
		return nil
	}
	lo, hi := prev*pivot.u, prev*1e6*pivot.u
	if lo > hi {
		lo, hi = hi, lo
	}
	integral := !slices.ContainsFunc(ss, func(s coordSample) bool { return s.u != math.Round(s.u) })
	type cand struct{ f, res float64 }
	var cs []cand
	k0, k1 := math.Ceil((lo-pivot.phi)/(2*math.Pi)), math.Floor((hi-pivot.phi)/(2*math.Pi))
	k1 = math.Min(k1, k0+1e6) // at most 10⁶ values tried
	for k := k0; k <= k1; k++ {
		fv := (pivot.phi + 2*math.Pi*k) / pivot.u
		if fv == prev || !fits(ss, fv) {
			continue
		}
		fv = lsqLattice(ss, fv)
		cs = append(cs, cand{fv, residual32(ss, refineFreq(ss, fv))})
		if integral && len(cs) >= maxLattice {
			break
		}
	}
	if noisy(ss) {
		// angles known only to the storage's noise: many aliases of a
		// grid's rational coordinates fit as well as the frequency does,
		// and the residual no longer tells them apart; the lowest
		// frequencies, nearest the one before, are followed first
		slices.SortStableFunc(cs, func(a, b cand) int { return cmpAbs(a.f, b.f) })
	} else {
		slices.SortStableFunc(cs, func(a, b cand) int { return cmpAbs(a.res, b.res) })
	}
	var out []float64
	for _, c := range cs[:min(len(cs), 8)] {
		out = append(out, c.f)
	}
	return out
}

// nearestLattice is the lattice value nearest pred that every sample
// allows, refined by least squares.
func nearestLattice(ss []coordSample, pred float64) (float64, bool) {
	pivot := slices.MaxFunc(ss, func(a, b coordSample) int { return cmpAbs(a.u, b.u) })
	if pivot.u == 0 {
		return 0, false
	}
	k := math.Round((pred*pivot.u - pivot.phi) / (2 * math.Pi))
	for _, dk := range []float64{0, -1, 1} {
		if fv := (pivot.phi + 2*math.Pi*(k+dk)) / pivot.u; fits(ss, fv) {
			return lsqLattice(ss, fv), true
		}
	}
	return 0, false
}

// lsqLattice refines f over every sample's angle unwrapped by f.
func lsqLattice(ss []coordSample, f float64) float64 {
	var num, den float64
	for _, s := range ss {
		p := s.phi + 2*math.Pi*math.Round((f*s.u-s.phi)/(2*math.Pi))
		num, den = num+s.u*p, den+s.u*s.u
	}
	return num / den
}

// residual32 is the largest wrapped angle error of the f32 products
// u·f over the samples.
func residual32(ss []coordSample, f float32) float64 {
	var r float64
	for _, s := range ss {
		r = math.Max(r, math.Abs(wrap(s.phi-float64(float32(float32(s.u)*f)))))
	}
	return r
}

// refineFreq is the f32 within 16 ulps of fv whose f32 products with u
// reproduce the angles best (the tables' own rounding).
func refineFreq(ss []coordSample, fv float64) float32 {
	c := float32(fv)
	best, bestErr := c, math.Inf(1)
	for d := -16; d <= 16; d++ {
		g := math.Float32frombits(uint32(int32(math.Float32bits(c)) + int32(d)))
		var e float64
		for _, s := range ss {
			x := wrap(s.phi - float64(float32(float32(s.u)*g)))
			e += x * x
		}
		if e < bestErr {
			best, bestErr = g, e
		}
	}
	return best
}

// noisy reports whether the samples' angles are known only to a
// storage format's noise.
func noisy(ss []coordSample) bool { return len(ss) > 0 && ss[0].noise > 0 }

// maxAbs is the largest |f|.
func maxAbs(fs []float32) float64 {
	m := 0.0
	for _, f := range fs {
		m = math.Max(m, math.Abs(float64(f)))
	}
	return m
}

func cmpAbs(a, b float64) int {
	switch {
	case math.Abs(a) < math.Abs(b):
		return -1
	case math.Abs(a) > math.Abs(b):
		return 1
	}
	return 0
}
