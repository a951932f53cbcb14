package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxChannelScans bounds the operand assignments channelScanned ranks at
// the first position for one rate matrix (W products each; a Mamba-1
// mixer's scope holds a few hundred thousand); a scope with more is not
// searched this way.
const maxChannelScans = 1 << 22

// maxChannelPool bounds how many assignments with the skip D, and as many
// without, channelScanned keeps from the first position's ranking (those
// within the target's tolerance there, and at least maxScanPartials) to
// rank again by the whole recurrence on the host (channelScanError).
const maxChannelPool = 256

// channelScanError is the rel-RMS of the scan over channels, computed in
// float64 on the host, against t [B, L, W]: h_c ← decay·h_c + dt·x·B,
// y = (⟨C, h_c⟩ + D_c·x)·g, decay [B, L, W, N] exp(dt·A) (channelDecays),
// x, dt and g [B, L, W] (g nil: no gate), B and C [B, L, 1, N], D [W] or
// nil. It ranks assignments only; the chosen ones run as program nodes.
func channelScanError(t, x, dt *val, decay []float64, b, c, d, g *val) float64 {
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	n := len(decay) / (bs * l * w)
	h := make([]float64, w*n)
	var num, den float64
	for bi := range bs {
		clear(h)
		for ti := range l {
			row := bi*l + ti
			bt, ct := b.data[row*n:(row+1)*n], c.data[row*n:(row+1)*n]
			for ch := range w {
				at := row*w + ch
				u := float64(dt.data[at]) * float64(x.data[at])
				hc, dc := h[ch*n:(ch+1)*n], decay[at*n:(at+1)*n]
				var y float64
				for k := range hc {
					hc[k] = dc[k]*hc[k] + u*float64(bt[k])
					y += float64(ct[k]) * hc[k]
				}
				if d != nil {
					y += float64(d.data[ch]) * float64(x.data[at])
				}
				if g != nil {
					y *= float64(g.data[at])
				}
				want := float64(t.data[at])
				num, den = num+(y-want)*(y-want), den+want*want
			}
		}
	}
	if den == 0 || math.IsNaN(num) {
		return math.Inf(1)
	}
	return math.Sqrt(num / den)
}

// channelDecays is exp(dt·A) [B, L, W, N] for dt [B, L, W] and A [W, N].
func channelDecays(dt, a *val) []float64 {
	w, n := a.shape[0], a.shape[1]
	out := make([]float64, len(dt.data)*n)
	for at, step := range dt.data {
		ch := at % w
		for k := range n {
			out[at*n+k] = math.Exp(float64(step) * float64(a.data[ch*n+k]))
		}
	}
	return out
}

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
	// values of the same data are one choice (a cut x_proj's columns and
	// the norm's argument they are): kept once, the first, so that the
	// first position's pool holds distinct assignments
	wide = distinctBy(wide, func(v *val) []float32 { return v.data })
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
		r := m.shape[1]
		var ins []*val
		for _, v := range vals {
			switch {
			case rows(v, r):
				ins = append(ins, v)
			case usable(v) && len(v.shape) == 3 && v.shape[0] == bs && v.shape[1] == l && v.shape[2] > r && v.shape[2] < w:
				// the time step as the first R columns of x_proj's result
				// [dt | B | C], cut in the forward (no call sees it alone)
				if cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: r}, args: []*val{v}, out: v.format, label: "the time step's columns"}); cut != nil {
					cut.origin = fmt.Sprintf("%s[:%d]", v.origin, r)
					ins = append(ins, cut)
				}
			}
		}
		for _, v := range ins {
			for _, b := range append([]*val{nil}, skips...) {
				z := s.derive(&expr{op: program.OpLinear, args: []*val{v, m, b}, out: v.format, label: "dt projected"})
				if sp := s.softplus(z); z != nil && sp != nil {
					dts = append(dts, dtChoice{sp, fmt.Sprintf("softplus(%s·%sᵀ + %s)", v.origin, m.origin, originOr(b, "0"))})
				}
			}
		}
	}
	dts = distinctBy(dts, func(d dtChoice) []float32 { return d.v.data })
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
	gates = distinctBy(gates, func(g gateChoice) []float32 { return g.v.data })
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
			// each normed in the forward by an RMS norm without a weight
			// (rms_forward), ε the common ones that differ in effect
			var kept [][2]*val
			for _, eps := range commonEps {
				p := exec.NormParams{Kind: exec.NormRMS, Eps: eps}
				nlo := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{lo, nil, nil}, out: v.format, label: fmt.Sprintf("rms eps=%g", eps)})
				nhi := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{hi, nil, nil}, out: v.format, label: fmt.Sprintf("rms eps=%g", eps)})
				if nlo == nil || nhi == nil || slices.ContainsFunc(kept, func(k [2]*val) bool {
					return slices.Equal(k[0].data, nlo.data) && slices.Equal(k[1].data, nhi.data)
				}) {
					continue
				}
				kept = append(kept, [2]*val{nlo, nhi})
				pairs = append(pairs, bc{nlo, nhi, fmt.Sprintf("B, C the last %d columns of %s, each rms-normed (eps %g)", 2*n, v.origin, eps)},
					bc{nhi, nlo, fmt.Sprintf("C, B the last %d columns of %s, each rms-normed (eps %g)", 2*n, v.origin, eps)})
			}
		}
		pairs = distinctBy(pairs, func(p bc) []float32 {
			if p.b == nil || p.c == nil {
				return nil
			}
			return slices.Concat(p.b.data, p.c.data)
		})
		if len(pairs) == 0 {
			continue
		}
		if len(wide)*len(dts)*len(pairs)*(len(skips)+1)*(len(gates)+1) > maxChannelScans {
			continue
		}
		e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{a}, out: precision.F32, label: "exp"})
		rate := s.derive(&expr{op: program.OpMul, args: []*val{e, s.constant(-1)}, out: precision.F32, label: "A = −exp(" + a.origin + ")"})
		if rate == nil {
			continue
		}
		// each assignment ranked at the rows' first position, where the
		// scan needs no A: y₀ = x₀·(dt₀·⟨B₀, C₀⟩ + D), times the gate; the
		// best maxChannelPool with D and as many without are kept
		type partial struct {
			xv    *val
			dt    dtChoice
			p     bc
			d     *val
			g     *gateChoice
			score float64
		}
		best := map[bool][]partial{}
		keep := func(pt partial) {
			k := pt.d != nil
			b := best[k]
			if len(b) == maxChannelPool && !(pt.score < b[len(b)-1].score) {
				return
			}
			i, _ := slices.BinarySearchFunc(b, pt.score, func(q partial, sc float64) int { return cmpFloat(q.score, sc) })
			b = slices.Insert(b, i, pt)
			if len(b) > maxChannelPool {
				b = b[:maxChannelPool]
			}
			best[k] = b
		}
		for _, p := range pairs {
			if p.b == nil || p.c == nil {
				continue
			}
			kb := make([]float64, bs) // ⟨B₀, C₀⟩ per batch row
			for b := range bs {
				for q := range n {
					kb[b] += float64(p.b.data[b*l*n+q]) * float64(p.c.data[b*l*n+q])
				}
			}
			for _, xv := range wide {
				for _, dt := range dts {
					for _, d := range append([]*val{nil}, skips...) {
						for gi := -1; gi < len(gates); gi++ {
							var g *gateChoice
							if gi >= 0 {
								if gates[gi].v == xv {
									continue
								}
								g = &gates[gi]
							}
							var num, den float64
							for b := range bs {
								for c := range w {
									at := b*l*w + c
									y := float64(dt.v.data[at]) * kb[b]
									if d != nil {
										y += float64(d.data[c])
									}
									y *= float64(xv.data[at])
									if g != nil {
										y *= float64(g.v.data[at])
									}
									want := float64(t.data[at])
									num, den = num+(y-want)*(y-want), den+want*want
								}
							}
							sc := math.Inf(1)
							if den > 0 {
								sc = math.Sqrt(num / den)
							}
							keep(partial{xv, dt, p, d, g, sc})
						}
					}
				}
			}
		}
		// the pool's assignments, x and a gate of x's kind in either role
		// and B and C in either role (the first position tells neither
		// apart), ranked again by the whole recurrence on the host; the
		// scan runs for the best maxScanPartials with D and as many
		// without. The first position alone does not rank them where D
		// outweighs dt·⟨B, C⟩ and the target is bf16: its rounding then
		// hides the time step's choice (a real Mamba-1's second layer)
		type ranked struct {
			pt      partial
			swapped bool
			score   float64
		}
		var pool []ranked
		decays := map[*val][]float64{}
		var near []partial
		for _, k := range []bool{true, false} {
			for i, pt := range best[k] {
				if i < maxScanPartials || pt.score <= tolerance(t.format) {
					near = append(near, pt)
				}
			}
		}
		for _, pt := range near {
			roles := []partial{pt}
			if pt.g != nil && slices.Contains(wide, pt.g.v) {
				q := pt
				q.xv, q.g = pt.g.v, &gateChoice{pt.xv, pt.xv.origin}
				roles = append(roles, q)
			}
			for _, q := range roles {
				for _, swapped := range []bool{false, true} {
					b, c := q.p.b, q.p.c
					if swapped {
						b, c = c, b
					}
					var g *val
					if q.g != nil {
						g = q.g.v
					}
					dec, ok := decays[q.dt.v]
					if !ok {
						dec = channelDecays(q.dt.v, rate)
						decays[q.dt.v] = dec
					}
					pool = append(pool, ranked{q, swapped, channelScanError(t, q.xv, q.dt.v, dec, b, c, q.d, g)})
				}
			}
		}
		slices.SortStableFunc(pool, func(x, y ranked) int { return cmpFloat(x.score, y.score) })
		taken := map[bool]int{}
		for _, r := range pool {
			pt := r.pt
			if taken[pt.d != nil] == maxScanPartials {
				continue
			}
			x := s.reshape(pt.xv, []int{bs, l, w, 1})
			bc := [2]*val{pt.p.b, pt.p.c}
			label := fmt.Sprintf("ssm scan of %d channels, state %d: x %s, dt = %s, A = −exp(%s), %s, D %s", w, n, pt.xv.origin, pt.dt.label, a.origin, pt.p.label, originOr(pt.d, "none"))
			if r.swapped {
				bc = [2]*val{pt.p.c, pt.p.b}
				label += ", B and C swapped"
			}
			scan := s.derive(&expr{op: program.OpSSMScan, args: []*val{x, pt.dt.v, rate, bc[0], bc[1], pt.d}, out: t.format, label: label})
			y := s.reshape(scan, t.shape)
			if x == nil || y == nil {
				continue
			}
			if pt.g == nil {
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{scan}, out: t.format, label: label})
			} else {
				cands = append(cands, &expr{op: program.OpMul, args: []*val{y, pt.g.v}, out: t.format, label: label + ", times " + pt.g.label})
			}
			withD = append(withD, pt.d != nil)
			taken[pt.d != nil]++
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

// distinctBy keeps the first of the items whose data (key) are equal, in
// order; an item with nil data is kept.
func distinctBy[T any](items []T, key func(T) []float32) []T {
	var out []T
	var seen [][]float32
	for _, it := range items {
		k := key(it)
		if k != nil && slices.ContainsFunc(seen, func(o []float32) bool { return slices.Equal(o, k) }) {
			continue
		}
		if k != nil {
			seen = append(seen, k)
		}
		out = append(out, it)
	}
	return out
}
