package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxChannelScans bounds the operand assignments channelScanned derives a
// scan for, over every rate matrix (a Mamba-1 mixer's scope holds a few
// dozen); a scope with more is not searched this way.
const maxChannelScans = 4096

// channelScanned explains t [B, L, W] as a selective scan whose W channels
// are its heads (width 1, program.OpSSMScan with A [W, N]: one decay rate per
// channel and state, Mamba-1's), optionally times a gate value g:
//
//	t = ssm_scan(x, softplus(d), −exp(a), B, C, D) · g
//
// x and g values of t's size laid [B, L, W] or channels first [B, W, L]; d
// a value [B, L, W] (a projection with its bias inside); a a 2-D value
// [W, N]; B and C [B, L, N] (shared by every channel) each a value of that
// width, or the last 2N columns of a wider one, in either order; D a vector
// [W] or none. Tried after ssmScanned fails.
func (s *synth) channelScanned(t *val, sc *scope, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) != 3 {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	if w < 2 {
		return nil
	}
	usable := func(v *val) bool { return v != nil && !v.opaque && v.data != nil }
	rows := func(v *val, width int) bool { return usable(v) && slices.Equal(v.shape, []int{bs, l, width}) }
	// t's size as rows: a value so, or channels first with its axes moved
	var wide []*val
	for _, v := range vals {
		if rows(v, w) {
			wide = append(wide, v)
		}
		if usable(v) && slices.Equal(v.shape, []int{bs, w, l}) {
			if p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{v}, out: v.format, label: "channels last"}); p != nil {
				p.origin = v.origin
				wide = append(wide, p)
			}
		}
	}
	var rates, skips []*val
	for _, v := range vals {
		if usable(v) && len(v.shape) == 2 && v.shape[0] == w && v.shape[1] >= 1 && v.shape[1] < w {
			rates = append(rates, v)
		}
		if usable(v) && len(v.shape) == 1 && v.shape[0] == w {
			skips = append(skips, v)
		}
	}
	if len(wide) == 0 || len(rates) == 0 {
		return nil
	}
	type dtChoice struct {
		v     *val
		label string
	}
	var dts []dtChoice
	for _, d := range vals {
		if rows(d, w) {
			if sp := s.softplus(d); sp != nil {
				dts = append(dts, dtChoice{sp, "softplus(" + d.origin + ")"})
			}
		}
	}
	// dt projected where no call does it (a Linear's weight used as
	// F.linear(time_step, dt_proj.weight, dt_proj.bias)): a matrix [W, R]
	// of the scope over a value [B, L, R], its bias a vector [W] or none
	for _, m := range rates {
		for _, v := range vals {
			if !rows(v, m.shape[1]) {
				continue
			}
			for _, b := range append([]*val{nil}, skips...) {
				z := s.derive(&expr{op: program.OpLinear, args: []*val{v, m, b}, out: v.format, label: "dt projected"})
				if sp := s.softplus(z); z != nil && sp != nil {
					dts = append(dts, dtChoice{sp, fmt.Sprintf("softplus(%s·%sᵀ + %s)", v.origin, m.origin, originOr(b, "0"))})
				}
			}
		}
	}
	if len(dts) == 0 {
		return nil
	}
	// gates: t's size as rows (a captured activation), or f of the first
	// or last W columns of a wider value (the activation in the forward)
	type gateChoice struct {
		v     *val
		label string
	}
	var gates []gateChoice
	for _, g := range wide {
		gates = append(gates, gateChoice{g, g.origin})
	}
	for _, v := range vals {
		if !usable(v) || len(v.shape) != 3 || v.shape[0] != bs || v.shape[1] != l || v.shape[2] <= w {
			continue
		}
		for _, off := range []int{0, v.shape[2] - w} {
			cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: off, End: off + w}, args: []*val{v}, out: v.format, label: "the gate's columns"})
			if cut == nil {
				continue
			}
			if a := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSiLU}, args: []*val{cut}, out: t.format, label: "the scan's gate"}); a != nil {
				gates = append(gates, gateChoice{a, fmt.Sprintf("silu(%s[%d:%d])", v.origin, off, off+w)})
			}
		}
	}
	var cands []*expr
	var withD []bool
	for _, a := range rates {
		n := a.shape[1]
		type bc struct {
			b, c  *val
			label string
		}
		var pairs []bc
		var narrow []*val
		for _, v := range vals {
			if rows(v, n) {
				narrow = append(narrow, v)
			}
		}
		state := []int{bs, l, 1, n}
		for _, b := range narrow {
			for _, c := range narrow {
				if b != c {
					pairs = append(pairs, bc{s.reshape(b, state), s.reshape(c, state), "B " + b.origin + ", C " + c.origin})
				}
			}
		}
		for _, v := range vals {
			if !usable(v) || len(v.shape) != 3 || v.shape[0] != bs || v.shape[1] != l || v.shape[2] <= 2*n {
				continue
			}
			wv := v.shape[2]
			lo := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: wv - 2*n, End: wv - n}, args: []*val{v}, out: v.format, label: "piece"})
			hi := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: wv - n, End: wv}, args: []*val{v}, out: v.format, label: "piece"})
			lo, hi = s.reshape(lo, state), s.reshape(hi, state)
			pairs = append(pairs, bc{lo, hi, fmt.Sprintf("B, C the last %d columns of %s", 2*n, v.origin)},
				bc{hi, lo, fmt.Sprintf("C, B the last %d columns of %s", 2*n, v.origin)})
		}
		if len(pairs) == 0 {
			continue
		}
		if len(wide)*len(dts)*len(pairs)*(len(skips)+1) > maxChannelScans || len(wide) == 0 {
			continue
		}
		e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{a}, out: precision.F32, label: "exp"})
		rate := s.derive(&expr{op: program.OpMul, args: []*val{e, s.constant(-1)}, out: precision.F32, label: "A = −exp(" + a.origin + ")"})
		if rate == nil {
			continue
		}
		for _, xv := range wide {
			x := s.reshape(xv, []int{bs, l, w, 1})
			for _, dt := range dts {
				for _, p := range pairs {
					if x == nil || p.b == nil || p.c == nil {
						continue
					}
					for _, d := range append([]*val{nil}, skips...) {
						scan := s.derive(&expr{op: program.OpSSMScan, args: []*val{x, dt.v, rate, p.b, p.c, d}, out: t.format,
							label: fmt.Sprintf("ssm scan of %d channels, state %d: x %s, dt = %s, A = −exp(%s), %s, D %s", w, n, xv.origin, dt.label, a.origin, p.label, originOr(d, "none"))})
						y := s.reshape(scan, t.shape)
						if y == nil {
							continue
						}
						cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{scan}, out: t.format, label: scan.from.label})
						withD = append(withD, d != nil)
						for _, g := range gates {
							if g.v != xv {
								cands = append(cands, &expr{op: program.OpMul, args: []*val{y, g.v}, out: t.format, label: scan.from.label + ", times " + g.label})
								withD = append(withD, d != nil)
							}
						}
					}
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	win, ev := s.best(t, cands)
	if win == nil {
		return nil
	}
	s.scans = append(s.scans, scanRecordOf(sc.module, t.origin, slices.Index(cands, win.from), cands, withD, ev))
	return win
}

// causalConv explains t [B, L, C] as f(conv(x)): a depthwise causal 1-D
// convolution a mixer applies in its forward with a sub-module's weights
// (F.conv1d(x, self.conv1d.weight, self.conv1d.bias, padding=k − 1,
// groups=C), the first L outputs kept; causalConvOf), x the first or last
// C columns of a value [B, L, ≥ C], the weight a parameter [C, 1, k]
// (k > 1), its bias a vector [C] or none, f a gate function (gateActs) or
// none. One of glue's late forms.
func (s *synth) causalConv(t *val, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	bs, l, c := t.shape[0], t.shape[1], t.shape[2]
	var ws, bias []*val
	for _, v := range vals {
		if v.opaque {
			continue
		}
		if len(v.shape) == 3 && v.shape[0] == c && v.shape[1] == 1 && v.shape[2] > 1 {
			ws = append(ws, v)
		}
		if len(v.shape) == 1 && v.shape[0] == c {
			bias = append(bias, v)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	var cands []*expr
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != bs || v.shape[1] != l || v.shape[2] < c {
			continue
		}
		for _, off := range slices.Compact([]int{0, v.shape[2] - c}) {
			for _, w := range ws {
				for _, b := range append([]*val{nil}, bias...) {
					conv := s.causalConvOf(v, off, w, b, t.format)
					if conv == nil {
						continue
					}
					cands = append(cands, conv.from)
					for _, f := range gateActs {
						cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{conv}, out: t.format, label: fmt.Sprintf("%v(%s)", f, conv.from.label)})
					}
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// causalConvOf is the depthwise causal convolution of v's columns
// [off, off + C) by w [C, 1, k] and bias b [C] or none, as rows
// [B, L, C]: the columns read channels first as a [B, C, 1, L] image, a
// conv2d padded by k − 1 with C groups, its middle row and first L
// columns kept, back to rows; in format f.
func (s *synth) causalConvOf(v *val, off int, w, b *val, f precision.Format) *val {
	bs, l, c, k := v.shape[0], v.shape[1], w.shape[0], w.shape[2]
	cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: off, End: off + c}, args: []*val{v}, out: v.format, label: "the conv's columns"})
	if cut == nil {
		return nil
	}
	x := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{cut}, out: cut.format, label: "channels first"})
	img := s.reshape(x, []int{bs, c, 1, l})
	w4 := s.reshape(w, []int{c, 1, 1, k})
	if img == nil || w4 == nil {
		return nil
	}
	p := program.ConvParams{Pad: k - 1, Groups: c}
	label := fmt.Sprintf("causal conv1d %d of %s[%d:%d], bias %s", k, v.origin, off, off+c, originOr(b, "none"))
	conv := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: p}, args: []*val{img, w4, b}, out: f, label: label})
	row := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: k - 1, End: k}, args: []*val{conv}, out: f, label: "the sequence's row"})
	first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: l}, args: []*val{row}, out: f, label: "the first L outputs"})
	back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{s.reshape(first, []int{bs, c, l})}, out: f, label: label})
	return back
}
