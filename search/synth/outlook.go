package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec/program"
)

// outlookAttention explains t, a map [B, H, W, C] (channels last) or [B,
// C, H, W], as outlook attention (VOLO): the unfolded values U [B, C·k²,
// L] (an unfold's result, per head D = C/heads channels), weighted per
// window by a softmax over its k² taps of logits A (heads·k⁴ per window,
// predicted from the map itself, L windows), each window's k² outputs
// folded back onto the cells they came from:
//
//	o[b, h, l, i, :] = Σ_j softmax(s·A[b, l, h, i, :])_j · U[b, h, :, j, l]
//
// Every window geometry whose count is L and both scales (D^−½ and 1) are
// scored.
func (s *synth) outlookAttention(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	var cands []*expr
	for _, last := range []bool{true, false} {
		b, h, w, c := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
		if !last {
			c, h, w = t.shape[1], t.shape[2], t.shape[3]
		}
		for _, u := range vals {
			if u.opaque || u.param || len(u.shape) != 3 || u.shape[0] != b {
				continue
			}
			k := squareTaps(u.shape[1], c)
			if k < 2 {
				continue
			}
			l, k4 := u.shape[2], k*k*k*k
			for _, a := range vals {
				if a == u || a.opaque || a.param || len(a.shape) < 3 || a.shape[0] != b || a.shape[len(a.shape)-1]%k4 != 0 ||
					a.numel() != b*l*a.shape[len(a.shape)-1] {
					continue
				}
				heads := a.shape[len(a.shape)-1] / k4
				if c%heads != 0 {
					continue
				}
				for _, win := range windowsOf(k, h, w, l) {
					for _, scale := range []float64{1 / math.Sqrt(float64(c/heads)), 1} {
						if e := s.outlookExpr(t, u, a, c, heads, k, win, scale, last); e != nil {
							cands = append(cands, e)
						}
					}
				}
			}
		}
	}
	return s.bestFit(t, cands, "glue")
}

// outlookExpr builds outlookAttention's reading of t from values u and
// logits a.
func (s *synth) outlookExpr(t, u, a *val, c, heads, k int, win window, scale float64, last bool) *expr {
	b, l, kk, d := u.shape[0], u.shape[2], k*k, c/heads
	h, w := t.shape[1], t.shape[2]
	if !last {
		h, w = t.shape[2], t.shape[3]
	}
	perm := func(v *val, p ...int) *val {
		if v == nil {
			return nil
		}
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: p}, args: []*val{v}, out: v.format})
	}
	logits := perm(s.reshape(a, []int{b, l, heads, kk, kk}), 0, 2, 1, 3, 4)
	if logits == nil {
		return nil
	}
	scaled := s.derive(&expr{op: program.OpMul, args: []*val{logits, s.constant(scale)}, out: a.format, label: fmt.Sprintf("logits × %.6g", scale)})
	weights := s.derive(&expr{op: program.OpSoftmax, args: []*val{scaled}, out: a.format, label: "softmax over each window's taps"})
	values := perm(s.reshape(u, []int{b, heads, d, kk, l}), 0, 1, 4, 3, 2)
	if weights == nil || values == nil {
		return nil
	}
	o := s.derive(&expr{op: program.OpMatMul, args: []*val{weights, values}, out: t.format, label: "each tap's weighted values"})
	o = s.reshape(perm(o, 0, 1, 4, 3, 2), []int{b, c * kk, l})
	if o == nil {
		return nil
	}
	f := s.foldedMap(o, c, h, w, win, t.format)
	if f == nil {
		return nil
	}
	label := fmt.Sprintf("outlook attention, %d heads, %s, scale %.6g", heads, win, scale)
	if !last {
		f.from.label = label
		return f.from
	}
	return &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 3, 1}}, args: []*val{f}, out: t.format, label: label}
}
