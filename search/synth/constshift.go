package synth

import (
	"fmt"
	"math"
	"strconv"

	"github.com/zflow/zflow/exec/program"
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
// eight values. Tried once every other form failed: it is the weakest
// explanation glue has.
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
		stride := t.numel()
		for ax, n := range t.shape {
			stride /= n
			if n > maxConstChannels || t.numel() < 8*n {
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
// n) and returns k and m = −b/k, so that t = (x − m)·k; ok is false where a
// channel's x is constant (k undetermined) or k is 0.
func fitChannelAffine(x, t []float32, n, stride int) (k, m []float64, ok bool) {
	var sx, sy, sxx, sxy, cnt = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, xv := range x {
		c := (i / stride) % n
		a, b := float64(xv), float64(t[i])
		sx[c] += a
		sy[c] += b
		sxx[c] += a * a
		sxy[c] += a * b
		cnt[c]++
	}
	k, m = make([]float64, n), make([]float64, n)
	for c := range n {
		vx := sxx[c] - sx[c]*sx[c]/cnt[c]
		if !(vx > 0) {
			return nil, nil, false
		}
		k[c] = (sxy[c] - sx[c]*sy[c]/cnt[c]) / vx
		if k[c] == 0 {
			return nil, nil, false
		}
		b := (sy[c] - k[c]*sx[c]) / cnt[c]
		m[c] = -b / k[c]
	}
	return k, m, true
}

// affineOf makes (v − m)·k along axis ax of t, leaving out a shift of
// zero and a scale of one, each constant at the shortest decimal within
// 1e-6 of its fit (a literal of the model's code: 0.4488, not the fit's
// 0.44880006), and keeps it where it explains t.
func (s *synth) affineOf(v, t *val, ax int, k, m []float64) *val {
	n := t.shape[ax]
	col := make([]int, len(t.shape)-ax) // [n, 1, …, 1]: broadcast along ax
	for i := range col {
		col[i] = 1
	}
	col[0] = n
	unit, zero := true, true
	kd, md := make([]float32, n), make([]float32, n)
	for c := range n {
		kd[c], md[c] = float32(shortDecimal(k[c])), float32(shortDecimal(m[c]))
		if math.Abs(k[c]-1) > 1e-6 {
			unit = false
		} else {
			kd[c] = 1
		}
		if math.Abs(m[c]) > 1e-7*math.Max(1, rms(t.data)) {
			zero = false
		} else {
			md[c] = 0
		}
	}
	if unit && zero {
		return nil // t is v: not this form's to explain
	}
	w := v
	name := fmt.Sprintf("%s/channel constants %d", t, s.seq+1)
	if !zero {
		neg := make([]float32, n)
		for c, x := range md {
			neg[c] = -x
		}
		c := s.relConst(name+" shift", col, neg, fmt.Sprintf("%d constants subtracted along axis %d, read off the captured values (the trace holds no such tensor)", n, ax))
		if w = s.derive(&expr{op: program.OpAdd, args: []*val{w, c}, out: t.format, label: "minus a constant per channel"}); w == nil {
			return nil
		}
	}
	if !unit {
		c := s.relConst(name+" scale", col, kd, fmt.Sprintf("%d constant factors along axis %d, read off the captured values (the trace holds no such tensor)", n, ax))
		if w = s.derive(&expr{op: program.OpMul, args: []*val{w, c}, out: t.format, label: "times a constant per channel"}); w == nil {
			return nil
		}
	}
	if relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStep(w, t, tolerance(t.format)) {
		return nil
	}
	return w
}

// shortDecimal is x at the fewest significant decimal digits (up to 8)
// that stay within 1e-6 of it, relative.
func shortDecimal(x float64) float64 {
	if x == 0 {
		return 0
	}
	for d := 1; d <= 8; d++ {
		r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', d, 64), 64)
		if err == nil && math.Abs(r-x) <= 1e-6*math.Abs(x) {
			return r
		}
	}
	return x
}
