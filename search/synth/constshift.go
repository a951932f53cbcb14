package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"gonum.org/v1/gonum/stat"
)

// maxConstChannels bounds the constants a channelAffine fit may read off:
// a forward's own normalisation of its input (a mean per colour channel)
// holds a handful, never a table.
const maxConstChannels = 64

// channelAffine explains t as (v − m)·k, v a value of t's shape and m, k
// constants per index of one of t's axes that the trace does not hold (a
// model that normalises its pixels itself by a mean it keeps as a plain
// tensor attribute: (x − mean)·range). The constants are read off the
// captured values by least squares per channel; the fit must then
// reproduce t to the format's tolerance, each channel resting on at least
// eight values, and every constant be a short decimal (affineOf). Tried
// once every other form failed: it is the weakest explanation glue has,
// so per channel only for a value the request holds as it is (the model's
// own input): inside the model a per-channel affine map of a computed
// value is as likely a statistic of this run. A computed value is read
// so with one constant pair for all of it alone (a decoder's x·2 − 1).
func (s *synth) channelAffine(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.numel() < 16 {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	for _, v := range ops {
		if v.param || v.integral() {
			continue
		}
		input := s.requestInput(v)
		stride := t.numel()
		for ax, n := range t.shape {
			stride /= n
			if n > maxConstChannels || t.numel() < 8*n || !input && n > 1 {
				continue
			}
			k, m, ok := fitChannelAffine(v.data, t.data, n, stride)
			if !ok {
				continue
			}
			if w := s.affineOf(v, t, ax, k, m); w != nil {
				return w
			}
		}
	}
	return nil
}

// fitChannelAffine fits t ≈ k_c·x + b_c per channel c (c = (i/stride) mod
// n) by least squares (gonum's stat.LinearRegression) and returns k and
// m = −b/k, so that t = (x − m)·k; ok is false where a channel's x is
// constant (k undetermined) or k is 0.
func fitChannelAffine(x, t []float32, n, stride int) (k, m []float64, ok bool) {
	xs, ys := make([][]float64, n), make([][]float64, n)
	for i, xv := range x {
		c := (i / stride) % n
		xs[c] = append(xs[c], float64(xv))
		ys[c] = append(ys[c], float64(t[i]))
	}
	k, m = make([]float64, n), make([]float64, n)
	for c := range n {
		if stat.Variance(xs[c], nil) == 0 {
			return nil, nil, false
		}
		b, slope := stat.LinearRegression(xs[c], ys[c], nil, false)
		if slope == 0 || math.IsNaN(slope) {
			return nil, nil, false
		}
		k[c], m[c] = slope, -b/slope
	}
	return k, m, true
}

// affineOf makes (v − m)·k, or (v − m)/d where 1/k is the literal,
// along axis ax of t, leaving out a shift of zero and a scale of one, and
// keeps it where it explains t. Every constant must be a literal of the
// model's code, a decimal of at most four significant digits within 1e-6
// of its fit (0.4488, not the fit's 0.44880006): statistics of the
// captured data (a series standardised by its own mean) fit as well but
// are no constants, and would reproduce this run alone.
func (s *synth) affineOf(v, t *val, ax int, k, m []float64) *val {
	n := t.shape[ax]
	col := make([]int, len(t.shape)-ax) // [n, 1, …, 1]: broadcast along ax
	for i := range col {
		col[i] = 1
	}
	col[0] = n
	shift, scale, div := make([]float32, n), make([]float32, n), make([]float32, n)
	zero, unit, byK, byD := true, true, true, true
	// in a narrow format the fit is no closer than the format's rounding
	// allows, and any number is near a short decimal: the constants are
	// taken as fitted, and only the statistics test below guards them
	narrow := t.format != precision.F32
	for c := range n {
		lm, ok := literal(m[c])
		switch {
		case math.Abs(m[c]) <= 1e-7*math.Max(1, rms(t.data)):
			lm = 0
		case !ok && !narrow:
			return nil
		}
		shift[c] = -float32(lm)
		zero = zero && lm == 0
		lk, okK := literal(k[c])
		ld, okD := literal(1 / k[c])
		if narrow && !okK {
			lk, okK = k[c], true
		}
		scale[c], div[c] = float32(lk), float32(ld)
		unit = unit && okK && math.Abs(lk-1) <= 1e-6
		byK, byD = byK && okK, byD && okD
	}
	if ownStatistics(v, ax, m) {
		return nil
	}
	if !unit && !byK && !byD {
		return nil
	}
	if unit && zero {
		return nil // t is v: not this form's to explain
	}
	if narrow {
		return s.narrowAffine(v, t, ax, k, m, col)
	}
	w := v
	name := fmt.Sprintf("%s/channel constants %d", t, s.seq+1)
	if !zero {
		c := s.relConst(name+" shift", col, shift, fmt.Sprintf("%d constants subtracted along axis %d, read off the captured values (the trace holds no such tensor)", n, ax))
		if w = s.derive(&expr{op: program.OpAdd, args: []*val{w, c}, out: t.format, label: "minus a constant per channel"}); w == nil {
			return nil
		}
	}
	if !unit {
		op, data, label := program.OpMul, scale, "times a constant per channel"
		if !byK {
			op, data, label = program.OpDiv, div, "over a constant per channel"
		}
		c := s.relConst(name+" scale", col, data, fmt.Sprintf("%d constant factors along axis %d, read off the captured values (the trace holds no such tensor)", n, ax))
		if w = s.derive(&expr{op: op, args: []*val{w, c}, out: t.format, label: label}); w == nil {
			return nil
		}
	}
	if relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStep(w, t, tolerance(t.format)) {
		return nil
	}
	return w
}

// literal is x at the fewest significant decimal digits, at most four,
// that stay within 1e-6 of it, relative; ok is false where none does. 0
// is a literal.
func literal(x float64) (float64, bool) {
	if x == 0 {
		return 0, true
	}
	for d := 1; d <= 4; d++ {
		r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', d, 64), 64)
		if err == nil && math.Abs(r-x) <= 1e-6*math.Abs(x) {
			return r, true
		}
	}
	return x, false
}

// ownStatistics reports whether the shifts m are v's own means along axis
// ax, channel by channel, to a hundredth of each channel's deviation: a
// value standardised by its statistics, which no constant reproduces on
// another input.
func ownStatistics(v *val, ax int, m []float64) bool {
	n := v.shape[ax]
	stride := v.numel()
	for _, d := range v.shape[:ax+1] {
		stride /= d
	}
	xs := make([][]float64, n)
	for i, x := range v.data {
		c := (i / stride) % n
		xs[c] = append(xs[c], float64(x))
	}
	for c := range n {
		mean, sd := stat.MeanStdDev(xs[c], nil)
		if math.Abs(m[c]-mean) > 0.01*sd {
			return false
		}
	}
	return true
}

// requestInput reports whether v holds one of the request's inputs as it
// is (the same values, in any shape).
func (s *synth) requestInput(v *val) bool {
	if v.request {
		return true
	}
	for _, key := range s.tr.Manifest.Inputs {
		t, err := s.tr.Tensor(key)
		if err != nil || !t.DType.IsFloat() {
			continue
		}
		d, err := t.Float32Rounded()
		if err == nil && slices.Equal(d, v.data) {
			return true
		}
	}
	return false
}

// affineForm is one order of an affine map's two steps in a narrow format,
// each rounded: the shift first ((v + a)·k, (v + a)/d) or the scale first
// (v·k + b, v/d + b).
type affineForm struct {
	shiftFirst, divide bool
}

func (f affineForm) apply(r func(float32) float32, x, shift, scale float32) float32 {
	step := func(x float32) float32 {
		if f.divide {
			return r(x / scale)
		}
		return r(x * scale)
	}
	if f.shiftFirst {
		return step(r(x + shift))
	}
	return r(step(x) + shift)
}

// narrowAffine is affineOf in a narrow format: the forward's constants
// are short decimals a least-squares fit lands only near (1.0000135 for
// 1, 0.4999958 for ½), and its two steps are rounded in its order (x·2 −
// 1 is not (x − ½)·2 in bf16). Per channel the fitted constants and the
// numbers of one to three significant digits within 2⁻⁶ of them are
// tried in each order (affineForm), and the order, then the constants,
// that reproduce the most entries of t bit for bit are built; kept where
// the map explains t within the format's tolerance at every step.
func (s *synth) narrowAffine(v, t *val, ax int, k, m []float64, col []int) *val {
	n := t.shape[ax]
	stride := t.numel()
	for _, d := range t.shape[:ax+1] {
		stride /= d
	}
	r := t.format.Round
	forms := []affineForm{{true, false}, {true, true}, {false, false}, {false, true}}
	type choice struct{ shift, scale []float32 }
	best, bestN, bestForm := choice{}, -1, affineForm{}
	for _, f := range forms {
		ch := choice{make([]float32, n), make([]float32, n)}
		total := 0
		for c := range n {
			shift := -m[c] // shift first: v − m
			if !f.shiftFirst {
				shift = -m[c] * k[c] // scale first: v·k − m·k
			}
			scale := k[c]
			if f.divide {
				scale = 1 / k[c]
			}
			cn := -1
			for _, a := range nearLiterals(shift) {
				for _, b := range nearLiterals(scale) {
					if b == 0 {
						continue
					}
					hits := 0
					for i := c * stride; i < t.numel(); i += n * stride {
						for j := i; j < i+stride; j++ {
							if f.apply(r, v.data[j], float32(a), float32(b)) == t.data[j] {
								hits++
							}
						}
					}
					if hits > cn {
						cn, ch.shift[c], ch.scale[c] = hits, float32(a), float32(b)
					}
				}
			}
			total += cn
		}
		if total > bestN {
			best, bestN, bestForm = ch, total, f
		}
	}
	name := fmt.Sprintf("%s/channel constants %d", t, s.seq+1)
	shift := s.relConst(name+" shift", col, best.shift, fmt.Sprintf("%d constants added along axis %d, read off the captured values (the trace holds no such tensor)", n, ax))
	op, label := program.OpMul, "times a constant per channel"
	if bestForm.divide {
		op, label = program.OpDiv, "over a constant per channel"
	}
	scale := s.relConst(name+" scale", col, best.scale, fmt.Sprintf("%d constant factors along axis %d, read off the captured values (the trace holds no such tensor)", n, ax))
	var w *val
	if bestForm.shiftFirst {
		w = s.derive(&expr{op: program.OpAdd, args: []*val{v, shift}, out: t.format, label: "plus a constant per channel"})
		w = s.derive(&expr{op: op, args: []*val{w, scale}, out: t.format, label: label})
	} else {
		w = s.derive(&expr{op: op, args: []*val{v, scale}, out: t.format, label: label})
		w = s.derive(&expr{op: program.OpAdd, args: []*val{w, shift}, out: t.format, label: "plus a constant per channel"})
	}
	if w == nil || relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStep(w, t, tolerance(t.format)) {
		return nil
	}
	return w
}

// nearLiterals are x and the numbers of one to three significant digits
// within 2⁻⁶ of it (0 for an x within 2⁻¹⁴ of it).
func nearLiterals(x float64) []float64 {
	out := []float64{x}
	if math.Abs(x) <= 0x1p-14 {
		return append(out, 0)
	}
	for d := 1; d <= 3; d++ {
		if r := roundSignificant(x, d); math.Abs(r-x) <= math.Ldexp(math.Abs(x), -6) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
