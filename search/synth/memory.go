package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// softCapped explains t as c·tanh(x/c) of a value x of its shape, or of a
// 3-D value with its last two axes swapped (a gate's preactivation [B, L,
// H] capped and read heads first [B, H, L]): soft-capping, xLSTM's gates'
// and Gemma's logits'. c is read off the values (least squares over the
// entries, Newton on c, snapped to a short decimal where that fits as
// well). One of glue's late forms.
func (s *synth) softCapped(t *val, vals []*val) *val {
	if t.integral() || t.reshapedFrom {
		return nil
	}
	var xs []*val
	for _, v := range vals {
		if v.opaque || v.data == nil || v.param || v.numel() != t.numel() || v == t {
			continue
		}
		if slices.Equal(v.shape, t.shape) {
			xs = append(xs, v)
		}
		if n := len(v.shape); n == 3 && len(t.shape) == 3 && v.shape[0] == t.shape[0] && v.shape[1] == t.shape[2] && v.shape[2] == t.shape[1] {
			if p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{v}, out: v.format, label: "the last two axes swapped"}); p != nil {
				p.origin = v.origin + " (last two axes swapped)"
				xs = append(xs, p)
			}
		}
	}
	var cands []*expr
	for _, x := range xs {
		c, ok := softCap(x.data, t.data)
		if !ok {
			continue
		}
		for _, cv := range slices.Compact([]float64{snapShort(c), c, exactestCap(x, t, c)}) {
			k := s.constant(cv)
			div := s.derive(&expr{op: program.OpDiv, args: []*val{x, k}, out: t.format, label: fmt.Sprintf("x / %g", cv)})
			th := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActTanh}, args: []*val{div}, out: t.format, label: "tanh"})
			if th == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpMul, args: []*val{th, k}, out: t.format, label: fmt.Sprintf("%g·tanh(%s / %g)", cv, x.origin, cv)})
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// exactestCap is, in a narrow format, the number of one or two
// significant digits within a third of c that makes c·tanh(x/c), each
// step rounded to t's format, reproduce the most entries of t bit for bit
// (c itself where none beats it): on small x the cap bends the values by
// little more than the format's rounding, and the fit of c moves with it
// (3·tanh(x/3) on values below ½ reads as 2.6 or 3.4). In f32, c.
func exactestCap(x, t *val, c float64) float64 {
	f := t.format
	if f == precision.F32 {
		return c
	}
	exact := func(cv float64) int {
		k, n := float32(cv), 0
		for i, xv := range x.data {
			if f.Round(f.Round(float32(math.Tanh(float64(f.Round(xv/k)))))*k) == t.data[i] {
				n++
			}
		}
		return n
	}
	best, bestN := c, exact(c)
	for _, cv := range simpleNear(c, 4.0/3) {
		if n := exact(cv); n > bestN {
			best, bestN = cv, n
		}
	}
	return best
}

// softCap fits c in y = c·tanh(x/c): bisection on the entry of largest
// |x| (c·tanh(x/c) grows with c towards x), then Gauss–Newton over every
// entry; false where the values are not so (signs differ, |y| not below
// |x| where x is largest, or no c fits).
func softCap(x, y []float32) (float64, bool) {
	at := -1
	for i := range x {
		if (x[i] > 0) != (y[i] > 0) && x[i] != 0 && y[i] != 0 {
			return 0, false
		}
		if at < 0 || math.Abs(float64(x[i])) > math.Abs(float64(x[at])) {
			at = i
		}
	}
	if at < 0 {
		return 0, false
	}
	xm, ym := math.Abs(float64(x[at])), math.Abs(float64(y[at]))
	if !(ym > 0 && ym < xm) {
		return 0, false
	}
	lo, hi := ym, 1e4*xm // c·tanh(x/c) < y at c = y; near x far above
	if hi*math.Tanh(xm/hi) <= ym {
		return 0, false
	}
	for range 200 {
		mid := (lo + hi) / 2
		if mid*math.Tanh(xm/mid) < ym {
			lo = mid
		} else {
			hi = mid
		}
	}
	c := (lo + hi) / 2
	for range 20 {
		// r_i = c·tanh(u) − y, ∂r/∂c = tanh(u) − u·sech²(u), u = x/c
		var g, h float64
		for i := range x {
			u := float64(x[i]) / c
			th := math.Tanh(u)
			d := th - u*(1-th*th)
			g += (c*th - float64(y[i])) * d
			h += d * d
		}
		if !(h > 0) {
			break
		}
		step := g / h
		if !(c-step > 0) {
			break
		}
		c -= step
		if math.Abs(step) < 1e-12*c {
			break
		}
	}
	return c, !math.IsNaN(c) && !math.IsInf(c, 0)
}

// snapShort rounds c to the shortest decimal (up to 6 significant digits)
// within 1e-5 of it relatively.
func snapShort(c float64) float64 {
	for d := 1; d <= 6; d++ {
		p := math.Pow(10, float64(d)-1-math.Floor(math.Log10(c)))
		r := math.Round(c*p) / p
		if math.Abs(r-c) <= 1e-5*c {
			return r
		}
	}
	return c
}

// gatedMemory explains t [B, H, L, V] (or [B, L, H, V]) as the
// exponentially gated matrix-memory scan (program.OpMemoryScan, mLSTM's
// recurrent form) of values of the scope: q and k [B, H, L, K], v
// [B, H, L, V], the input gate's log i and the forget gate's
// preactivation f [B, H, L] (laid as t is), the forget gate log σ(f), q
// scaled by 1/√K before the scan; q, k and v and the two gates in every
// assignment the shapes allow, eps the common ones. One of glue's late
// forms.
func (s *synth) gatedMemory(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.reshapedFrom {
		return nil
	}
	usable := func(v *val) bool { return !v.opaque && v.data != nil && !v.param }
	lead := t.shape[:3]
	var mats, gates []*val
	for _, v := range vals {
		if !usable(v) {
			continue
		}
		if len(v.shape) == 4 && slices.Equal(v.shape[:3], lead) {
			mats = append(mats, v)
		}
		if slices.Equal(v.shape, lead) {
			gates = append(gates, v)
		}
	}
	if len(mats) < 2 || len(gates) < 2 {
		return nil
	}
	// the scan reads [B, L, H, ·]: a target laid [B, H, L, V] is read with
	// its operands' axes 1 and 2 swapped (both readings where H = L)
	type layout struct {
		perm4, perm3 []int
		label        string
	}
	layouts := []layout{{[]int{0, 2, 1, 3}, []int{0, 2, 1}, "heads first"}, {nil, nil, "rows first"}}
	type scanChoice struct {
		scan *expr // the scan without its eps
		perm []int // back to t's layout, or nil
	}
	var structs []scanChoice
	for _, lay := range layouts {
		move := func(v *val) *val {
			if lay.perm4 == nil {
				return v
			}
			p := lay.perm4
			if len(v.shape) == 3 {
				p = lay.perm3
			}
			return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: p}, args: []*val{v}, out: v.format, label: lay.label})
		}
		for qi, q := range mats {
			for ki, k := range mats {
				if ki == qi || !slices.Equal(k.shape, q.shape) {
					continue
				}
				for vi, v := range mats {
					if vi == qi || vi == ki || v.shape[3] != t.shape[3] {
						continue
					}
					kd := q.shape[3]
					qs := s.derive(&expr{op: program.OpMul, args: []*val{q, s.constant(math.Pow(float64(kd), -0.5))}, out: q.format, label: fmt.Sprintf("q / √%d", kd)})
					qm, km, vm := move(qs), move(k), move(v)
					if qm == nil || km == nil || vm == nil {
						continue
					}
					for ii, ig := range gates {
						for fi, fg := range gates {
							if fi == ii {
								continue
							}
							// log σ(f) = −softplus(−f)
							neg := s.derive(&expr{op: program.OpMul, args: []*val{fg, s.constant(-1)}, out: fg.format, label: "−f"})
							sp := s.softplus(neg)
							lf := s.derive(&expr{op: program.OpMul, args: []*val{sp, s.constant(-1)}, out: fg.format, label: "log σ(f)"})
							im, fm := move(ig), move(lf)
							if im == nil || fm == nil {
								continue
							}
							e := &expr{op: program.OpMemoryScan, args: []*val{qm, km, vm, im, fm}, out: t.format,
								label: fmt.Sprintf("gated matrix memory (%s): q %s, k %s, v %s, log input gate %s, forget gate log σ(%s)", lay.label, q.origin, k.origin, v.origin, ig.origin, fg.origin)}
							structs = append(structs, scanChoice{e, lay.perm4})
						}
					}
				}
			}
		}
	}
	// each assignment with the first common eps; the winner's eps then
	// chosen among them all (it shows only where max(|q·n|, exp(−m)) is
	// small)
	build := func(c scanChoice, eps float32) *expr {
		e := *c.scan
		e.attrs.Memory = program.MemoryParams{Eps: eps}
		e.label = fmt.Sprintf("%s, eps %g", c.scan.label, eps)
		if c.perm == nil {
			return &e
		}
		y := s.derive(&e)
		if y == nil {
			return nil
		}
		return &expr{op: program.OpPermute, attrs: program.Attrs{Perm: c.perm}, args: []*val{y}, out: t.format, label: e.label}
	}
	var cands []*expr
	var of []scanChoice
	for _, c := range structs {
		if e := build(c, commonEps[0]); e != nil {
			cands, of = append(cands, e), append(of, c)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	win, ev := s.best(t, cands)
	if win == nil {
		return nil
	}
	c := of[slices.IndexFunc(ev, func(x semantics.Candidate) bool { return x.Value == win.from.label })]
	var more []*expr
	for _, eps := range commonEps {
		if e := build(c, eps); e != nil {
			more = append(more, e)
		}
	}
	if v, _ := s.best(t, more); v != nil {
		return v
	}
	return win
}
