package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// mixSinkhorn explains t [R.., n, n] as sinkhorn(softmax(u) + ε; steps, ε)
// of a window u of n² columns read [n, n]: the window and which sums come
// first ranked in float64 at many steps, then ε among mixEps and the
// steps up to maxSinkhorn scored through the evaluator.
func (s *synth) mixSinkhorn(t *val, sc *scope, vals []*val) *val {
	r := len(t.shape)
	if r < 3 || t.shape[r-1] != t.shape[r-2] || t.shape[r-1] < 2 || t.shape[r-1] > maxMixStreams {
		return nil
	}
	n := t.shape[r-1]
	ws := s.mixWindows(t.shape[:r-2], n*n, vals)
	if len(ws) == 0 {
		return nil
	}
	// the least error over every step count, ε left out (ranking only)
	errOf := func(mw mixWindow, rowsFirst bool) float64 {
		errs := make([]float64, maxSinkhorn)
		for off := 0; off < len(mw.u); off += n * n {
			m := make([]float64, n*n)
			for i := range n {
				row := mw.u[off+i*n : off+(i+1)*n]
				mx := slices.Max(row)
				var sum float64
				for j, x := range row {
					m[i*n+j] = math.Exp(x - mx)
					sum += m[i*n+j]
				}
				for j := range n {
					m[i*n+j] /= sum
				}
			}
			for k := range maxSinkhorn {
				sinkhorn64(m, n, 1, rowsFirst != (k%2 == 1))
				for i, x := range m {
					d := x - float64(t.data[off+i])
					errs[k] += d * d
				}
			}
		}
		return slices.Min(errs)
	}
	type choice struct {
		mw        mixWindow
		rowsFirst bool
		err       float64
	}
	var best *choice
	for _, mw := range rankedWindows(ws, func(mw mixWindow) float64 { return math.Min(errOf(mw, false), errOf(mw, true)) }, 1) {
		for _, rf := range []bool{false, true} {
			if e := errOf(mw, rf); best == nil || e < best.err {
				best = &choice{mw, rf, e}
			}
		}
	}
	if best == nil {
		return nil
	}
	sm := s.derive(&expr{op: program.OpSoftmax, args: []*val{s.mixPre(best.mw, []int{n, n})}, out: f32, label: "softmax"})
	if sm == nil {
		return nil
	}
	rowsFirst := best.rowsFirst
	norm := func(eps float64, steps int) *expr {
		p := sm
		if eps != 0 {
			p = s.derive(&expr{op: program.OpAdd, args: []*val{sm, s.constant(eps)}, out: f32, label: "+ ε"})
		}
		if p == nil {
			return nil
		}
		k := exec.SinkhornParams{Steps: steps, Eps: float32(eps), RowsFirst: rowsFirst}
		return &expr{op: program.OpSinkhorn, attrs: program.Attrs{Sinkhorn: k}, args: []*val{p}, out: t.format, label: fmt.Sprintf("steps=%d ε=%g", steps, eps)}
	}
	argmin := func(cands []*expr) (*expr, float64) {
		var win *expr
		least := math.Inf(1)
		for _, c := range cands {
			if _, e := s.ev.score(c, t); e < least {
				win, least = c, e
			}
		}
		return win, least
	}
	stepsAt := func(eps float64) []*expr {
		var out []*expr
		for k := 1; k <= maxSinkhorn; k++ {
			if x := norm(eps, k); x != nil {
				x.label = fmt.Sprint(k)
				out = append(out, x)
			}
		}
		return out
	}
	epsAt := func(steps int) []*expr {
		var out []*expr
		for _, e := range mixEps {
			if x := norm(e, steps); x != nil {
				x.label = fmt.Sprintf("%g", e)
				out = append(out, x)
			}
		}
		return out
	}
	// the steps without ε, then ε at those steps, then the steps again
	// at that ε (every candidate of the last two kept as evidence)
	k0, _ := argmin(stepsAt(0))
	if k0 == nil {
		return nil
	}
	e0, _ := argmin(epsAt(k0.attrs.Sinkhorn.Steps))
	if e0 == nil {
		return nil
	}
	eps := parseNumber(e0.label).(float64)
	// which sums come first, scored with ε: a softmax's rows already sum
	// to 1, so rows first then k steps and columns first then k − 1 part
	// only by ε
	_, e1 := argmin(stepsAt(eps))
	rowsFirst = !rowsFirst
	if _, e2 := argmin(stepsAt(eps)); !(e2 < e1) {
		rowsFirst = !rowsFirst
	}
	w, stepEv := s.best(t, stepsAt(eps))
	if w == nil {
		return nil
	}
	_, epsEv := s.best(t, epsAt(w.from.attrs.Sinkhorn.Steps))
	s.sinkhorns = append(s.sinkhorns, sinkhornRecord{scope: sc.module, boundary: t.origin, params: w.from.attrs.Sinkhorn, epsValue: eps, steps: stepEv, eps: epsEv})
	return w
}

// sinkhorn64 is exec's Sinkhorn in float64 without ε (ranking only).
func sinkhorn64(m []float64, n, steps int, rowsFirst bool) {
	cols := !rowsFirst
	for range steps {
		for a := range n {
			var sum float64
			for b := range n {
				if cols {
					sum += m[b*n+a]
				} else {
					sum += m[a*n+b]
				}
			}
			for b := range n {
				if cols {
					m[b*n+a] /= sum
				} else {
					m[a*n+b] /= sum
				}
			}
		}
		cols = !cols
	}
}

// mixCollapse explains t [R.., D] as Σ_j (σ(u_j) + β)·x_j, the streams x
// [R.., n, D] of the scope weighted by a gate of n columns (a matmul of
// the weights [R.., 1, n] and x).
func (s *synth) mixCollapse(t *val, vals []*val) *val {
	r := len(t.shape)
	if r < 2 {
		return nil
	}
	lead, d := t.shape[:r-1], t.shape[r-1]
	var cands []*expr
	for _, x := range vals {
		if x.param || x.opaque || x.data == nil || len(x.shape) != r+1 || !slices.Equal(x.shape[:r-1], lead) || x.shape[r] != d || x.shape[r-1] < 2 || x.shape[r-1] > maxMixStreams {
			continue
		}
		n := x.shape[r-1]
		ws := s.mixWindows(lead, n, vals)
		errOf := func(mw mixWindow) float64 {
			var e float64
			rows := len(mw.u) / n
			for row := range rows {
				for c := range d {
					var y float64
					for j := range n {
						y += sigmoid64(mw.u[row*n+j]) * float64(x.data[(row*n+j)*d+c])
					}
					dd := y - float64(t.data[row*d+c])
					e += dd * dd
				}
			}
			return e
		}
		for _, mw := range rankedWindows(ws, errOf, 1) {
			g := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{s.mixPre(mw, []int{n})}, out: f32, label: "sigmoid"})
			for _, b := range mixEps {
				w := g
				if b != 0 && g != nil {
					w = s.derive(&expr{op: program.OpAdd, args: []*val{g, s.constant(b)}, out: f32, label: "+ β"})
				}
				w = s.reshape(w, append(slices.Clone(lead), 1, n))
				if w == nil {
					continue
				}
				y := s.derive(&expr{op: program.OpMatMul, args: []*val{w, x}, out: t.format, label: "streams weighted"})
				if y == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{y}, out: y.format,
					label: fmt.Sprintf("Σ_j (σ(L[%d:%d]·s + b)_j + %g)·%s_j", mw.off, mw.off+n, b, x)})
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// streamsMixed explains t [R.., n, D] as p ⊗ y + Cᵀ·x (or C·x): a
// sub-layer's output y [R.., D] written into the n streams by weights p
// [R.., n], plus the streams x [R.., n, D] mixed by a matrix C [R.., n, n].
func (s *synth) streamsMixed(t *val, vals []*val) *val {
	r := len(t.shape)
	if r < 3 || t.shape[r-2] < 2 || t.shape[r-2] > maxMixStreams {
		return nil
	}
	lead, n, d := t.shape[:r-2], t.shape[r-2], t.shape[r-1]
	pick := func(shape []int) []*val {
		var out []*val
		for _, v := range vals {
			if !v.param && !v.opaque && v.data != nil && v != t && slices.Equal(v.shape, shape) && len(out) < 3 {
				out = append(out, v)
			}
		}
		return out
	}
	xs := pick(t.shape)
	cs := pick(append(slices.Clone(lead), n, n))
	ps := pick(append(slices.Clone(lead), n))
	ys := pick(append(slices.Clone(lead), d))
	if len(xs) == 0 || len(cs) == 0 || len(ps) == 0 || len(ys) == 0 {
		return nil
	}
	perm := make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	perm[r-2], perm[r-1] = r-1, r-2
	var cands []*expr
	for _, p := range ps {
		for _, y := range ys {
			py := s.derive(&expr{op: program.OpMul, args: []*val{s.reshape(p, append(slices.Clone(lead), n, 1)), s.reshape(y, append(slices.Clone(lead), 1, d))}, out: t.format, label: "p ⊗ y"})
			if py == nil {
				continue
			}
			for _, c := range cs {
				for _, tr := range []bool{true, false} {
					m := c
					if tr {
						m = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{c}, out: c.format})
					}
					for _, x := range xs {
						cx := s.derive(&expr{op: program.OpMatMul, args: []*val{m, x}, out: t.format})
						if cx == nil {
							continue
						}
						cands = append(cands, &expr{op: program.OpAdd, args: []*val{py, cx}, out: t.format,
							label: fmt.Sprintf("%s ⊗ %s + %s%s·%s", p, y, c, map[bool]string{true: "ᵀ"}[tr], x)})
					}
				}
			}
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// sinkhornFactors are the Sinkhorn normalisations' steps and ε, with
// every value scored.
func (s *synth) sinkhornFactors() []semantics.Factor {
	var out []semantics.Factor
	for _, k := range s.sinkhorns {
		f := factor("mix_sinkhorn_steps", k.scope, float64(k.params.Steps), relabel(k.steps, "", parseNumber), k.boundary)
		f.Evidence.Note = fmt.Sprintf("alternating normalisations, %s sums first; every count up to %d scored", map[bool]string{true: "row", false: "column"}[k.params.RowsFirst], maxSinkhorn)
		out = append(out, f)
		out = append(out, factor("mix_sinkhorn_eps", k.scope, k.epsValue, relabel(k.eps, "", parseNumber), k.boundary))
	}
	return out
}
