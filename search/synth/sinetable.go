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
	// the table in f32, or stored in the activations' narrow format (a
	// buffer made in f32 and cast with the model, as CTRL's is when the
	// model is loaded in bf16): the sum tells which
	tableFormats := []precision.Format{precision.F32}
	if t.format != precision.F32 && t.format.Valid() {
		tableFormats = append(tableFormats, t.format)
	}
	table := func(l sineLayout, period float32, f precision.Format) *val {
		p := exec.TimestepParams{Dim: d, FlipSinToCos: l.flip, FreqShift: l.shift, Scale: 1, MaxPeriod: period}
		v := s.derive(&expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{pos}, out: f,
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
				tab := table(l, period, precision.F32)
				if tab == nil {
					continue
				}
				c, ok := fitScalar(a, minusTable(t, tab))
				if !ok {
					continue
				}
				scaled := a
				if c != 1 {
					if scaled = s.derive(&expr{op: program.OpMul, args: []*val{a, s.constant(c)}, out: t.format, label: "scaled"}); scaled == nil {
						continue
					}
				}
				var sums []*expr
				for _, f := range tableFormats {
					stored := tab
					if f != precision.F32 {
						if stored = table(l, period, f); stored == nil {
							continue
						}
					}
					sums = append(sums, &expr{op: program.OpAdd, args: []*val{scaled, stored}, out: t.format, label: fmt.Sprintf("%s, stored %s", label(l, period), f)})
				}
				w, cands := s.best(t, sums)
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
						sc := s.sineScore(t, a, table(l2, p2, precision.F32))
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

// fitPositionSinusoid explains t [.., D], the output of a call without
// parameters whose argument x holds integer positions of t's leading
// shape, as a sinusoid table of x + k (fairseq's positions, offset past
// the padding index: XGLM's and M2M's own position module). The layout
// is searched; for each, the frequency ladder is read from the angle
// each column pair turns between two rows one position apart, and the
// offset k from the angle of the first frequency (1) at the first row,
// checked on every frequency. Tried after fitSinusoid (1-D timesteps).
func (s *synth) fitPositionSinusoid(x, t *val) *val {
	if len(t.shape) != len(x.shape)+1 || !slices.Equal(x.shape, t.shape[:len(x.shape)]) || !x.integral() {
		return nil
	}
	d, n := t.shape[len(t.shape)-1], x.numel()
	if d%2 != 0 || d < 8 || n < 2 || t.integral() {
		return nil
	}
	// two rows one position apart (positions may run down: a table of
	// relative offsets from the farthest key ahead to the farthest behind)
	r0, r1 := -1, -1
	step := 0.0
	for i := 0; i+1 < n && r0 < 0; i++ {
		if d := x.data[i+1] - x.data[i]; d == 1 || d == -1 {
			r0, r1, step = i, i+1, float64(d)
		}
	}
	if r0 < 0 {
		return nil
	}
	half := d / 2
	flat := s.reshape(x, []int{n})
	if flat == nil {
		return nil
	}
	type reading struct {
		l sineLayout
		p float32
		k int
	}
	make1 := func(r reading) *expr {
		ids := flat
		if r.k != 0 {
			ids = s.derive(&expr{op: program.OpAdd, args: []*val{flat, s.constant(float64(r.k))}, out: flat.format, label: "offset"})
		}
		if ids == nil {
			return nil
		}
		lab := fmt.Sprintf("sinusoid of positions%+d, %s, period %g", r.k, r.l, r.p)
		tp := exec.TimestepParams{Dim: d, FlipSinToCos: r.l.flip, FreqShift: r.l.shift, Scale: 1, MaxPeriod: r.p}
		e := &expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: tp}, args: []*val{ids}, out: precision.F32, label: lab}
		if r.l.interleaved {
			v := s.reshape(s.derive(e), []int{n, 2, half})
			if v == nil {
				return nil
			}
			e = &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{v}, out: v.format, label: lab}
		}
		v := s.reshape(s.derive(e), t.shape)
		if v == nil {
			return nil
		}
		return &expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{v}, out: t.format, label: lab}
	}
	var cands []*expr
	var reads []reading
	for _, inter := range []bool{false, true} {
		for _, flip := range []bool{false, true} {
			l := sineLayout{flip: flip, interleaved: inter}
			ang := func(r, j int) float64 {
				si, ci := r*d+j, r*d+half+j
				if inter {
					si, ci = r*d+2*j, r*d+2*j+1
				}
				if flip {
					si, ci = ci, si
				}
				return math.Atan2(float64(t.data[si]), float64(t.data[ci]))
			}
			// the frequencies, f_j < π: the turn between the two rows
			freqs := make([]float64, half)
			for j := range freqs {
				freqs[j] = step * math.Remainder(ang(r1, j)-ang(r0, j), 2*math.Pi)
			}
			for _, shift := range []float32{0, 1} {
				l.shift = shift
				p, ok := ladderPeriod(freqs, half, shift)
				if !ok {
					continue
				}
				// the period read, and 10000 beside it (a narrow table's
				// rounding moves the angles read one row apart enough to
				// miss it, and the offset read at a far position with it)
				for _, p := range slices.Compact([]float32{p, 10000}) {
					ladder := make([]float64, half)
					for j := range ladder {
						ladder[j] = math.Pow(float64(p), -float64(j)/(float64(half)-float64(shift)))
					}
					k, ok := readOffset(ladder, float64(x.data[r0]), func(j int) float64 { return ang(r0, j) })
					if !ok {
						continue
					}
					if e := make1(reading{l, p, k}); e != nil {
						cands, reads = append(cands, e), append(reads, reading{l, p, k})
					}
				}
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	win := reads[slices.IndexFunc(cands, func(e *expr) bool { return e.label == v.from.label })]
	// the offset's evidence: the winner's layout and period at the
	// offsets around the one read
	var offsets []semantics.Candidate
	for k := win.k - 2; k <= win.k+2; k++ {
		sc := math.Inf(1)
		if e := make1(reading{win.l, win.p, k}); e != nil {
			_, sc = s.ev.score(e, t)
		}
		offsets = append(offsets, semantics.Candidate{Value: float64(k), Score: finite(sc)})
	}
	v.fit = &leafFit{kind: "position_sinusoid", candidates: offsets, label: fmt.Sprintf("offset %d read from the first frequency's angle at the first row; layout, period and offset read per layout and scored: %s", win.k, candidateList(ev)), timestep: exec.TimestepParams{Dim: d, FlipSinToCos: win.l.flip, FreqShift: win.l.shift, Scale: 1, MaxPeriod: win.p}}
	v.fit.offset = win.k
	return v
}

// readOffset reads the integer k with positions p0 + k at a row whose
// angles are at(j) under frequencies freqs (f_0 = 1): the smallest |k| ≤
// 4096 whose angles agree with at(j) within 0.02 at every frequency
// read.
func readOffset(freqs []float64, p0 float64, at func(j int) float64) (int, bool) {
	if math.Abs(freqs[0]-1) > 1e-3 {
		return 0, false
	}
	for m := 0; m <= 4096; m++ {
		for _, k := range []int{m, -m} {
			if m == 0 && k < 0 {
				continue
			}
			ok := true
			for j, f := range freqs {
				if math.Abs(math.Remainder((p0+float64(k))*f-at(j), 2*math.Pi)) > 0.02 {
					ok = false
					break
				}
			}
			if ok {
				return k, true
			}
		}
	}
	return 0, false
}

// ladderPeriod reads the max period P of frequencies f_j = P^(−j/(half −
// shift)) from f_j, j ≥ 1 (least squares of ln f_j through the origin),
// rounded to 3 significant digits; only f_j in (0.02, 3) are read (below,
// the angle is lost in the rounding of a bf16 table).
func ladderPeriod(freqs []float64, half int, shift float32) (float32, bool) {
	var sxx, sxy float64
	cnt := 0
	for j := 1; j < len(freqs); j++ {
		if !(freqs[j] > 0.02 && freqs[j] < 3) {
			// below, the angle is lost in the table's rounding
			continue
		}
		x := float64(j) / (float64(half) - float64(shift))
		y := -math.Log(freqs[j])
		sxx, sxy, cnt = sxx+x*x, sxy+x*y, cnt+1
	}
	if cnt < 2 {
		return 0, false
	}
	p := math.Exp(sxy / sxx)
	if !(p > 1) || math.IsInf(p, 0) {
		return 0, false
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(p, 'g', 3, 64), 64)
	if err != nil {
		return 0, false
	}
	return float32(r), true
}

// idsPositionSinusoid explains t [.., S, D], the output of a call without
// parameters handed the token ids (not positions: fairseq's and M2M's
// module makes them inside, cumsum of ids ≠ pad, past the padding
// index), as fitPositionSinusoid's table of positions 0…S−1 made from the
// request's shape, plus an offset read off the values. A request holding
// the padding id would need the ids themselves: then no offset fits and
// the form fails (never a silent approximation).
func (s *synth) idsPositionSinusoid(x, t *val) *val {
	if len(x.shape) == 0 || !x.integral() || len(t.shape) != len(x.shape)+1 || !slices.Equal(x.shape, t.shape[:len(x.shape)]) {
		return nil
	}
	n := x.shape[len(x.shape)-1]
	pos := &val{shape: slices.Clone(x.shape), data: make([]float32, x.numel()), format: precision.F32, origin: t.origin + "/positions", intType: true}
	for i := range pos.data {
		pos.data[i] = float32(i % n)
	}
	if slices.Equal(pos.data, x.data) {
		return nil // the argument is these positions: fitPositionSinusoid's
	}
	s.em.iota(pos)
	return s.fitPositionSinusoid(pos, t)
}

// shapePositionSinusoid explains t [.., n, D], the output of a call
// without parameters whose argument x is no positions (hidden states,
// whose shape alone it reads), as fitPositionSinusoid's table of
// positions made from the request's shape: 0, 1, …, n − 1 or 0, −1, …,
// −(n − 1) along the rows, each plus an offset read off the values (a
// table of relative offsets from the farthest key ahead to the farthest
// behind, n = 2·S − 1, runs S − 1 … −(S − 1): Transformer-XL's). Tried
// once every other form of a parameterless call has failed.
func (s *synth) shapePositionSinusoid(x, t *val) *val {
	if x == nil || x.integral() || t.integral() || len(t.shape) < 2 {
		return nil
	}
	n, d := t.shape[len(t.shape)-2], t.shape[len(t.shape)-1]
	if n < 2 || d%2 != 0 || d < 8 {
		return nil
	}
	lead := t.shape[:len(t.shape)-1]
	for _, step := range []float32{1, -1} {
		// declared in the program only where the table it makes is read
		note := fmt.Sprintf("positions 0…%d along the last axis (made from the request's shape)", n-1)
		if step < 0 {
			note = fmt.Sprintf("positions 0…−%d along the last axis, running down (made from the request's shape)", n-1)
		}
		s.seq++
		pos := &val{shape: slices.Clone(lead), data: make([]float32, prod(lead)), format: precision.F32, origin: t.origin + "/positions", intType: true, seq: s.seq, constNote: note}
		for i := range pos.data {
			pos.data[i] = step * float32(i%n)
		}
		if v := s.fitPositionSinusoid(pos, t); v != nil {
			return v
		}
	}
	return nil
}
