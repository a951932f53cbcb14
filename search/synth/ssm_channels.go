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
	if len(wide) < 2 || len(rates) == 0 {
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
	if len(dts) == 0 {
		return nil
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
		if len(wide)*len(dts)*len(pairs)*(len(skips)+1) > maxChannelScans {
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
						for _, g := range wide {
							if g != xv {
								cands = append(cands, &expr{op: program.OpMul, args: []*val{y, g}, out: t.format, label: scan.from.label + ", times " + g.origin})
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
