package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// sineLayout is how a sinusoid table of positions lays out its columns:
// the sinusoid op's [sin | cos] or [cos | sin] halves, or those halves
// interleaved (sin₀ cos₀ sin₁ cos₁ …).
type sineLayout struct {
	flip, interleaved bool
	shift             float32
}

func (l sineLayout) String() string {
	first := "sin"
	if l.flip {
		first = "cos"
	}
	how := "halves"
	if l.interleaved {
		how = "interleaved"
	}
	return fmt.Sprintf("%s first, %s, shift %g", first, how, l.shift)
}

// sinusoidAdded explains t [.., S, D] as c·a + P, a value a of t's shape
// scaled by a constant plus a sinusoid table P of positions 0…S−1
// computed in the forward (CTRL's and the original Transformer's
// positional encoding: no parameter, no module of its own). The table's
// layout is searched and its frequencies read from the values: the angles
// t − c·a shows at position 1 give the period of the geometric frequency
// ladder, tried beside 10000. Tried only once every other form has failed.
func (s *synth) sinusoidAdded(t *val, vals []*val) *val {
	if len(t.shape) < 2 || len(t.shape) > 3 || t.integral() {
		return nil
	}
	d, n := t.shape[len(t.shape)-1], t.shape[len(t.shape)-2]
	if d%2 != 0 || d < 4 || n < 2 {
		return nil
	}
	var ops []*val
	for _, v := range sameShape(t, vals) {
		if !v.opaque && !v.param {
			ops = append(ops, v)
		}
	}
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	if len(ops) == 0 {
		return nil
	}
	pos := &val{shape: []int{n}, data: make([]float32, n), format: precision.F32, origin: t.origin + "/positions"}
	for i := range pos.data {
		pos.data[i] = float32(i)
	}
	tableShape := slices.Clone(t.shape)
	for i := 0; i < len(tableShape)-2; i++ {
		tableShape[i] = 1
	}
	label := func(l sineLayout, period float32) string {
		return fmt.Sprintf("sinusoid of positions, %s, period %g", l, period)
	}
	table := func(l sineLayout, period float32) *val {
		p := exec.TimestepParams{Dim: d, FlipSinToCos: l.flip, FreqShift: l.shift, Scale: 1, MaxPeriod: period}
		v := s.derive(&expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{pos}, out: precision.F32,
			label: label(l, period)})
		if v != nil && l.interleaved {
			v = s.reshape(v, []int{n, 2, d / 2})
			v = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{v}, out: v.format, label: "interleave"})
		}
		return s.reshape(v, tableShape)
	}
	var layouts []sineLayout
	for _, inter := range []bool{false, true} {
		for _, flip := range []bool{false, true} {
			for _, shift := range []float32{0, 1} {
				layouts = append(layouts, sineLayout{flip: flip, interleaved: inter, shift: shift})
			}
		}
	}
	var ev []semantics.Candidate
	for _, a := range ops {
		for _, l := range layouts {
			// the scale from position 0, where every layout's table is
			// sin 0 = 0 and cos 0 = 1 whatever its frequencies
			periods := []float32{10000}
			if c0, ok := rowZeroScale(t, a, l); ok {
				if p, ok := readPeriod(t, a, c0, l); ok && p != 10000 {
					periods = append(periods, p)
				}
			}
			for _, period := range periods {
				tab := table(l, period)
				if tab == nil {
					continue
				}
				c, ok := fitScalar(a, minusTable(t, tab))
				if !ok {
					continue
				}
				var sum *expr
				if c == 1 {
					sum = &expr{op: program.OpAdd, args: []*val{a, tab}, out: t.format, label: label(l, period)}
				} else {
					scaled := s.derive(&expr{op: program.OpMul, args: []*val{a, s.constant(c)}, out: t.format, label: "scaled"})
					if scaled == nil {
						continue
					}
					sum = &expr{op: program.OpAdd, args: []*val{scaled, tab}, out: t.format, label: label(l, period)}
				}
				w, cands := s.best(t, []*expr{sum})
				ev = append(ev, cands...)
				if w == nil {
					continue
				}
				// the evidence: every layout and period scored on the same
				// value, each with its own fitted scale
				ev = ev[:0]
				runnerUp := math.Inf(1)
				for _, l2 := range layouts {
					ps := []float32{10000}
					if period != 10000 {
						ps = append(ps, period)
					}
					for _, p2 := range ps {
						sc := s.sineScore(t, a, table(l2, p2))
						ev = append(ev, semantics.Candidate{Value: label(l2, p2), Score: finite(sc)})
						if (l2 != l || p2 != period) && sc < runnerUp {
							runnerUp = sc
						}
					}
				}
				win := relRMS(t.format, w.data, t.data)
				s.em.constant(pos, fmt.Sprintf("positions 0…%d (made from the request's shape) of a sinusoid table added to a value ×%g: %s, max period %g (periods read %v), rel-RMS %.3g, margin ×%.3g over the runner-up; every candidate scored: %s",
					n-1, c, l, period, periods, win, runnerUp/math.Max(win, 1e-30), candidateList(ev)))
				return w
			}
		}
	}
	return nil
}

// sinCol reports whether column i of a table under layout l holds a sine.
func sinCol(l sineLayout, i, d int) bool {
	sin := i < d/2
	if l.interleaved {
		sin = i%2 == 0
	}
	return sin != l.flip
}

// rowZeroScale fits c in t ≈ c·a + P at position 0 (every batch entry),
// where P is 0 in the sine columns and 1 in the cosine ones.
func rowZeroScale(t, a *val, l sineLayout) (float64, bool) {
	d, n := t.shape[len(t.shape)-1], t.shape[len(t.shape)-2]
	var aa, at float64
	for b := 0; b < len(t.data)/(n*d); b++ {
		for i := range d {
			k := b*n*d + i
			p := 1.0
			if sinCol(l, i, d) {
				p = 0
			}
			x := float64(a.data[k])
			aa += x * x
			at += x * (float64(t.data[k]) - p)
		}
	}
	if aa == 0 {
		return 0, false
	}
	return at / aa, true
}

// minusTable is t − tab, tab broadcast over t's leading axes.
func minusTable(t, tab *val) *val {
	r := make([]float32, len(t.data))
	m := len(tab.data)
	for i := range r {
		r[i] = t.data[i] - tab.data[i%m]
	}
	return &val{shape: t.shape, data: r, format: t.format}
}

// readPeriod reads the max period of a geometric frequency ladder
// f_j = P^(−j/(D/2 − shift)) off the angles of t − c·a at position 1
// (its first batch entry), under layout l: each column pair's angle is
// atan2(sin, cos), f_j itself where it is below π; ln P by least squares
// over j, rounded to 3 significant digits.
func readPeriod(t, a *val, c float64, l sineLayout) (float32, bool) {
	d, n := t.shape[len(t.shape)-1], t.shape[len(t.shape)-2]
	if n < 2 {
		return 0, false
	}
	half := d / 2
	row := make([]float64, d)
	for i := range row {
		k := d + i // position 1 of the first batch entry
		row[i] = float64(t.data[k]) - c*float64(a.data[k])
	}
	var sx, sy, sxx, sxy, cnt float64
	for j := 1; j < half; j++ {
		si, ci := j, half+j
		if l.interleaved {
			si, ci = 2*j, 2*j+1
		}
		if l.flip {
			si, ci = ci, si
		}
		f := math.Atan2(row[si], row[ci])
		if !(f > 0.02 && f < 3) {
			// below, the angle is lost in the rounding of c·a
			continue
		}
		x := float64(j) / (float64(half) - float64(l.shift))
		y := -math.Log(f)
		sx, sy, sxx, sxy, cnt = sx+x, sy+y, sxx+x*x, sxy+x*y, cnt+1
	}
	if cnt < 2 {
		return 0, false
	}
	// y = x·ln P through the origin (f_0 = 1)
	lnP := sxy / sxx
	p := math.Exp(lnP)
	if !(p > 1) || math.IsInf(p, 0) {
		return 0, false
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(p, 'g', 3, 64), 64)
	if err != nil {
		return 0, false
	}
	return float32(r), true
}

// candidateList names each candidate with its score.
func candidateList(ev []semantics.Candidate) string {
	var out string
	for i, c := range ev {
		if i > 0 {
			out += "; "
		}
		out += fmt.Sprintf("%v %.3g", c.Value, c.Score)
	}
	return out
}

// sineScore is the rel-RMS of c·a + tab against t, c fitted by least
// squares (no snapping), computed in f32 as the ops would; +Inf where tab
// is nil.
func (s *synth) sineScore(t, a, tab *val) float64 {
	if tab == nil {
		return math.Inf(1)
	}
	r := minusTable(t, tab)
	var aa, ar float64
	for i, x := range a.data {
		aa += float64(x) * float64(x)
		ar += float64(x) * float64(r.data[i])
	}
	if aa == 0 {
		return math.Inf(1)
	}
	c := float32(ar / aa)
	m := len(tab.data)
	fit := make([]float32, len(t.data))
	for i := range fit {
		fit[i] = float32(c*a.data[i]) + tab.data[i%m] // the conversion keeps the product rounded (no fused multiply-add)
	}
	return relRMS(t.format, fit, t.data)
}
