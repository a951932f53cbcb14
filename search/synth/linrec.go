package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// qkvLayouts are the ways decayedLinearAttention reads q, k and v off one
// value [B, L, 3·H·D]: each head's 3·D columns holding its q, k, v in turn
// (a reshape to [B, L, H, 3·D] split on the last axis), or three runs of
// H·D columns.
var qkvLayouts = []string{"per head", "in thirds"}

// maxDecayAssignments bounds the (operand, layout, head width, order)
// assignments decayedLinearAttention fits.
const maxDecayAssignments = 512

// decayedLinearAttention explains t [B, L, H·D] as causal linear attention
// with one decay per head, the kv state a D×D matrix per head:
//
//	S_t = λ_h·S_{t−1} + k_tᵀ·v_t,  y_t = q_t·S_t  (y_t = Σ_{j≤t} λ_h^{t−j} (q_t·k_j) v_j)
//
// q, k, v read off one value of the scope [B, L, 3·H·D] (qkvLayouts, the
// three parts in any order), every head width. Each head's λ is read off
// the values (Gauss–Newton on the rows' least squares, in f64) and kept as
// a constant of the program: a decay the model makes as a buffer, not a
// parameter. Run as program.OpSSMScan with the state [D (x = v), D (B = k)]
// per head: dt = 1, A = log λ, C = q, no D term. One of glue's late forms.
func (s *synth) decayedLinearAttention(t *val, vals []*val) *val {
	if len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	var srcs []*val
	for _, v := range vals {
		if v != nil && !v.opaque && v.data != nil && !v.intType && !v.param && slices.Equal(v.shape, []int{bs, l, 3 * w}) {
			srcs = append(srcs, v)
		}
	}
	orders := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	if len(srcs) == 0 || len(srcs)*len(qkvLayouts)*len(orders)*8 > maxDecayAssignments {
		return nil
	}
	type fit struct {
		src    *val
		layout string
		d      int
		order  [3]int
		lambda []float64
		err    float64
	}
	var best *fit
	for _, src := range srcs {
		for _, layout := range qkvLayouts {
			for d := minHeadDim; d <= maxHeadDim && d <= w; d *= 2 {
				if w%d != 0 {
					continue
				}
				for _, o := range orders {
					lam, e := fitDecays(src, t, layout, d, o)
					if lam != nil && (best == nil || e < best.err) {
						best = &fit{src, layout, d, o, lam, e}
					}
				}
			}
		}
	}
	if best == nil || best.err > tolerance(t.format) {
		return nil
	}
	h, d := w/best.d, best.d
	parts := qkvParts(s, best.src, best.layout, h, d)
	if parts == nil {
		return nil
	}
	q, k, v := parts[best.order[0]], parts[best.order[1]], parts[best.order[2]]
	rates := make([]float32, h)
	for i, x := range best.lambda {
		rates[i] = float32(math.Log(x))
	}
	a := &val{shape: []int{h}, data: rates, format: precision.F32, origin: t.origin + "/decay rates"}
	s.em.constant(a, "each head's decay rate (log λ) read off the values: a buffer the model makes, not a parameter")
	col := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: 1}, args: []*val{q}, out: precision.F32, label: "a column"})
	zero := s.derive(&expr{op: program.OpMul, args: []*val{col, s.constant(0)}, out: precision.F32, label: "0"})
	one := s.derive(&expr{op: program.OpAdd, args: []*val{zero, s.constant(1)}, out: precision.F32, label: "dt = 1"})
	dt := s.reshape(one, []int{bs, l, h})
	if dt == nil {
		return nil
	}
	label := fmt.Sprintf("decayed causal linear attention over %s (%s, order %v): %d heads of %d, S_t = λ·S_{t−1} + kᵀv, y = q·S (fit %.2g)",
		best.src.origin, best.layout, best.order, h, d, best.err)
	scan := s.derive(&expr{op: program.OpSSMScan, args: []*val{v, dt, a, k, q, nil}, out: t.format, label: label})
	if scan == nil {
		return nil
	}
	r, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{scan}, out: t.format, label: label}})
	return r
}

// qkvParts are the three parts [B, L, H, D] of src [B, L, 3·H·D] in the
// layout's order.
func qkvParts(s *synth, src *val, layout string, h, d int) []*val {
	bs, l := src.shape[0], src.shape[1]
	var parts []*val
	for i := range 3 {
		var p *val
		if layout == "per head" {
			r := s.reshape(src, []int{bs, l, h, 3 * d})
			p = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: i * d, End: (i + 1) * d}, args: []*val{r}, out: src.format, label: "a part of each head"})
		} else {
			c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: i * h * d, End: (i + 1) * h * d}, args: []*val{src}, out: src.format, label: "a third"})
			p = s.reshape(c, []int{bs, l, h, d})
		}
		if p == nil {
			return nil
		}
		parts = append(parts, p)
	}
	return parts
}

// fitDecays reads each head's λ off src's parts and t (step 0's data):
// Gauss–Newton on Σ_t ‖y_t − Σ_{j≤t} λ^{t−j} (q_t·k_j) v_j‖², from λ = 1;
// nil where a head's fit leaves (0, 1.5). err is the rel-RMS of the fitted
// recurrence against t, all heads.
func fitDecays(src, t *val, layout string, d int, order [3]int) ([]float64, float64) {
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	h := w / d
	at := func(b, i, hd, part, c int) float64 { // part p of head hd, row i
		col := part*h*d + hd*d + c
		if layout == "per head" {
			col = hd*3*d + part*d + c
		}
		return float64(src.data[(b*l+i)*3*w+col])
	}
	lam := make([]float64, h)
	var num, den float64
	for hd := range h {
		// a_{b,i,j} = q_i·k_j
		a := make([]float64, bs*l*l)
		for b := range bs {
			for i := range l {
				for j := 0; j <= i; j++ {
					var sum float64
					for c := range d {
						sum += at(b, i, hd, order[0], c) * at(b, j, hd, order[1], c)
					}
					a[(b*l+i)*l+j] = sum
				}
			}
		}
		x := 1.0
		res := func(x float64, grad bool) (r2, g, hs float64) {
			for b := range bs {
				for i := range l {
					for c := range d {
						var y, dy float64
						for j := 0; j <= i; j++ {
							p := math.Pow(x, float64(i-j))
							y += p * a[(b*l+i)*l+j] * at(b, j, hd, order[2], c)
							if grad && i > j {
								dy += float64(i-j) * math.Pow(x, float64(i-j-1)) * a[(b*l+i)*l+j] * at(b, j, hd, order[2], c)
							}
						}
						e := y - float64(t.data[(b*l+i)*w+hd*d+c])
						r2 += e * e
						g += e * dy
						hs += dy * dy
					}
				}
			}
			return
		}
		for range 8 {
			_, g, hs := res(x, true)
			if hs == 0 {
				break
			}
			x -= g / hs
			if !(x > 0 && x < 1.5) {
				return nil, math.Inf(1)
			}
		}
		r2, _, _ := res(x, false)
		lam[hd] = x
		num += r2
	}
	for _, y := range t.data[:bs*l*w] {
		den += float64(y) * float64(y)
	}
	if den == 0 {
		return nil, math.Inf(1)
	}
	return lam, math.Sqrt(num / den)
}
