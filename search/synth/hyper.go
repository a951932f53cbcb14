package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// Hyper-connections: a residual widened into n streams [R.., n, D], and
// before each sub-layer a module that computes, from the streams, the
// weights that collapse them into its input, expand its output back and
// mix the streams. Each weight is a window of the columns of one small
// projection L = linear(z, W) (z the streams flattened, often normed; W a
// parameter [m, K]) times one entry of a small scale vector plus the same
// window of a bias vector [m], then:
//
//	gate:     α·σ(u) + β                                   [R.., n]
//	mix:      sinkhorn(softmax(u) + ε; steps, ε)            [R.., n, n]
//	collapse: Σ_j (σ(u_j) + β)·x_j                          [R.., D]
//
// All three are found from values: the window, the scale entry, the bias,
// α, β, ε and the number of Sinkhorn steps.

const (
	maxMixWidth   = 64 // the projection's width m (2n + n² up to n = 6)
	maxMixScales  = 8  // a scale vector's length
	maxMixStreams = 16 // n
	maxSinkhorn   = 64 // Sinkhorn steps scored
)

// mixEps are the β and ε tried: 0 and every power of ten from 1e-12 to
// 1e-1 (an epsilon is invisible but at these magnitudes).
var mixEps = func() []float64 {
	out := []float64{0}
	for k := 12; k >= 1; k-- {
		out = append(out, math.Pow(10, float64(-k)))
	}
	return out
}()

// mixWindow is one pre-activation u = L[.., o:o+w]·scale + bias[o:o+w].
type mixWindow struct {
	logits, scale, bias *val // scale and bias may be nil
	off, w              int
	u                   []float64 // the pre-activation per row, in float64 (ranking only)
}

// sinkhornRecord is a Sinkhorn normalisation found (a factor's evidence).
type sinkhornRecord struct {
	scope, boundary string
	params          exec.SinkhornParams
	epsValue        float64 // ε as scored (params holds it in f32)
	steps, eps      []semantics.Candidate
}

// mixWindows yields the windows of width w over every small projection
// of a value whose leading axes are lead.
func (s *synth) mixWindows(lead []int, w int, vals []*val) []mixWindow {
	var out []mixWindow
	for _, z := range vals {
		if z.param || z.opaque || z.data == nil || len(z.shape) != len(lead)+1 || !slices.Equal(z.shape[:len(lead)], lead) {
			continue
		}
		k := z.shape[len(lead)]
		for _, W := range vals {
			if !W.param || W.data == nil || len(W.shape) != 2 || W.shape[1] != k || W.shape[0] < w || W.shape[0] > maxMixWidth {
				continue
			}
			m := W.shape[0]
			L := s.derive(&expr{op: program.OpLinear, args: []*val{z, W, nil}, out: f32, label: "stream weights' projection"})
			if L == nil {
				continue
			}
			biases := []*val{nil}
			var scales []*val
			scales = append(scales, nil)
			for _, p := range vals {
				if !p.param || p.data == nil || len(p.shape) != 1 {
					continue
				}
				if p.shape[0] == m {
					biases = append(biases, p)
				}
				if p.shape[0] <= maxMixScales {
					for i := range p.shape[0] {
						if e := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: i, End: i + 1}, args: []*val{p}, out: p.format}); e != nil {
							scales = append(scales, e)
						}
					}
				}
			}
			rows := L.numel() / m
			for off := 0; off+w <= m; off++ {
				for _, sc := range scales {
					for _, b := range biases {
						u := make([]float64, rows*w)
						for r := range rows {
							for j := range w {
								x := float64(L.data[r*m+off+j])
								if sc != nil {
									x *= float64(sc.data[0])
								}
								if b != nil {
									x += float64(b.data[off+j])
								}
								u[r*w+j] = x
							}
						}
						out = append(out, mixWindow{logits: L, scale: sc, bias: b, off: off, w: w, u: u})
					}
				}
			}
		}
	}
	return out
}

// pre builds the window's pre-activation, shaped [lead.., shape..].
func (s *synth) mixPre(mw mixWindow, shape []int) *val {
	L := mw.logits
	ax := len(L.shape) - 1
	u := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: mw.off, End: mw.off + mw.w}, args: []*val{L}, out: L.format})
	if mw.scale != nil {
		u = s.derive(&expr{op: program.OpMul, args: []*val{u, mw.scale}, out: f32, label: "× scale"})
	}
	lead := L.shape[:ax]
	if len(shape) > 1 {
		u = s.reshape(u, append(slices.Clone(lead), shape...))
	}
	if mw.bias != nil && u != nil {
		b := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: mw.off, End: mw.off + mw.w}, args: []*val{mw.bias}, out: mw.bias.format})
		if len(shape) > 1 {
			b = s.reshape(b, shape)
		}
		u = s.derive(&expr{op: program.OpAdd, args: []*val{u, b}, out: f32, label: "+ bias"})
	}
	return u
}

// ranked keeps the n windows whose error (lower is better) is least.
func rankedWindows(ws []mixWindow, errOf func(mixWindow) float64, n int) []mixWindow {
	errs := make([]float64, len(ws))
	idx := make([]int, len(ws))
	for i, w := range ws {
		errs[i], idx[i] = errOf(w), i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(errs[a], errs[b]) })
	var out []mixWindow
	for _, i := range idx[:min(n, len(idx))] {
		if !math.IsNaN(errs[i]) && !math.IsInf(errs[i], 1) {
			out = append(out, ws[i])
		}
	}
	return out
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// mixGate explains t [R.., n] as α·σ(u) + β of a window: α and β read by
// least squares over the values, α snapped to a short decimal, β scored
// among mixEps.
func (s *synth) mixGate(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.shape[len(t.shape)-1] > maxMixStreams || t.shape[len(t.shape)-1] < 2 {
		return nil
	}
	n := t.shape[len(t.shape)-1]
	ws := s.mixWindows(t.shape[:len(t.shape)-1], n, vals)
	if len(ws) == 0 {
		return nil
	}
	fit := func(mw mixWindow) (a, b, e float64) {
		var sx, sy, sxx, sxy float64
		N := float64(len(mw.u))
		for i, u := range mw.u {
			x, y := sigmoid64(u), float64(t.data[i])
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		den := N*sxx - sx*sx
		if den <= 0 {
			return 0, 0, math.Inf(1)
		}
		a = (N*sxy - sx*sy) / den
		b = (sy - a*sx) / N
		for i, u := range mw.u {
			d := a*sigmoid64(u) + b - float64(t.data[i])
			e += d * d
		}
		return a, b, e
	}
	best := rankedWindows(ws, func(mw mixWindow) float64 { _, _, e := fit(mw); return e }, 2)
	var cands []*expr
	for _, mw := range best {
		a, _, _ := fit(mw)
		if !(a > 0) {
			continue
		}
		a = snapShort(a) // a weight's scale is a short number
		g := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{s.mixPre(mw, []int{n})}, out: f32, label: "sigmoid"})
		if g != nil && a != 1 {
			g = s.derive(&expr{op: program.OpMul, args: []*val{g, s.constant(a)}, out: f32, label: fmt.Sprintf("× %g", a)})
		}
		if g == nil {
			continue
		}
		for _, b := range mixEps {
			label := fmt.Sprintf("%g·σ(L[%d:%d]·s + b) + %g", a, mw.off, mw.off+n, b)
			if b == 0 {
				e := *g.from
				e.label = label
				cands = append(cands, &e)
				continue
			}
			cands = append(cands, &expr{op: program.OpAdd, args: []*val{g, s.constant(b)}, out: t.format, label: label})
		}
	}
	v, _ := s.best(t, cands)
	return v
}
