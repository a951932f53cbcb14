package synth

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/internal/simple"
)

// maxOperands bounds how many of a scope's most recent values of the
// target's shape the pairwise forms consider.
const maxOperands = 12

// composedGELUs are the GELUs written out as primitives on tensors of a
// narrow format f (each one rounded): in bf16 the two GELUs and their
// spellings lie within the format's tolerance of each other, so the kind
// is told apart only by the form that reproduces the rounding.
func composedGELUs(v *val, f precision.Format) []*expr {
	if f != precision.BF16 && f != precision.F16 {
		return nil
	}
	var out []*expr
	for _, a := range []exec.ActKind{exec.ActGELUTanh, exec.ActGELUErf} {
		maths := []exec.Math{0, exec.MathScalarF32}
		if a == exec.ActGELUTanh {
			maths = append(maths, exec.MathGELUFactored, exec.MathScalarF32|exec.MathGELUFactored)
		}
		for _, m := range maths {
			out = append(out, &expr{op: program.OpAct, attrs: program.Attrs{Act: a}, args: []*val{v}, out: f, round: exec.RoundEach, math: m,
				label: fmt.Sprintf("%v composed (math=%s)", a, m)})
		}
	}
	return out
}

var glueActs = []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf, exec.ActTanh, exec.ActSigmoid, exec.ActReLU, exec.ActHardswish, exec.ActHardsigmoid}

// pointwise: an activation of a value, a parameterless norm of it, or
// the value times a constant (an embedding or residual multiplier).
func (s *synth) pointwise(t *val, vals []*val) *val {
	if len(t.shape) == 2 {
		// a sinusoid computed in the forward (no module of its own)
		for _, v := range vals {
			if !v.opaque && len(v.shape) == 1 && v.shape[0] == t.shape[0] {
				if w := s.fitSinusoid(v, t); w != nil {
					return w
				}
			}
		}
	}
	for _, v := range sameShape(t, vals) {
		if t.intType {
			// an integer or bool tensor is no float function's output:
			// tanh of token ids is 1 to the last bit (a mask of ones), a
			// norm of a row of ones 0 (token types), by saturation alone
			if w := s.scaledBy(t, v); w != nil {
				return w
			}
			continue
		}
		var cands []*expr
		for _, a := range glueActs {
			cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: a}, args: []*val{v}, out: t.format, label: a.String()})
		}
		cands = append(cands, composedGELUs(v, t.format)...)
		cands = append(cands, s.normCandidates(v, t)...)
		if w, ev := s.best(t, cands); w != nil {
			if w.from.op == program.OpAct {
				// in a narrow format one activation may pass for another
				// (quick GELU for GELU in bf16, to 1.2e-2): a loose fit
				// yields to Swish-β where that is four times tighter
				if e := relRMS(t.format, w.data, t.data); e > looseActivation(t.format) {
					if sw := s.fitSwish(v, t); sw != nil && relRMS(t.format, sw.data, t.data) < e/4 {
						return sw
					}
				}
			}
			if w.from.op == program.OpNorm {
				// a value already normalised times a constant is also a
				// norm of it with some ε: the constant, where it fits as
				// well, is the form that holds off these values
				if k := s.scaledBy(t, v); k != nil && relRMS(t.format, k.data, t.data) <= relRMS(t.format, w.data, t.data) {
					return k
				}
			}
			w.fit = &leafFit{kind: "glue", act: w.from.attrs.Act, norm: w.from.attrs.Norm, candidates: ev}
			if w.from.op == program.OpNorm {
				s.norms = append(s.norms, normRecord{scope: s.scopeOf, boundary: t.origin, fit: &leafFit{kind: "norm", norm: w.from.attrs.Norm, candidates: ev}})
			}
			return w
		}
		if w := s.squared(t, v); w != nil {
			return w
		}
		if w := s.scaledBy(t, v); w != nil {
			return w
		}
	}
	return nil
}

// scaledBy explains t as v times a constant fitted to it, or nil.
func (s *synth) scaledBy(t, v *val) *val {
	c, ok := s.scalarOf(v, t)
	if !ok {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{v, s.constant(c)}, out: t.format, label: "scaled"}})
	return w
}

// scalarOf is fitScalar at step 0, or, for a small value that is zero
// there (a timestep 1 − σ at σ = 1), at the first step where it is not.
func (s *synth) scalarOf(v, t *val) (float64, bool) {
	if rms(v.data) > 0 || t.numel() > 64 {
		return fitScalar(v, t)
	}
	for _, st := range s.tr.Steps() {
		vd, ok1 := s.at(v, st)
		td, ok2 := s.at(t, st)
		if ok1 && ok2 && rms(vd) > 0 && len(vd) == len(td) {
			return fitScalar(&val{shape: v.shape, data: vd}, &val{shape: t.shape, data: td, format: t.format})
		}
	}
	return 0, false
}

// combined: a + g·b with g one or a constant (residuals, scaled
// residuals), a·b and f(a)·b (gated units), over pairs of values of the
// target's shape.
func (s *synth) combined(t *val, vals []*val) *val {
	ops := s.likeShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	ops = append(ops, s.chunksOf(t, vals)...)
	// The first pair near exact wins; a pair only within tolerance is
	// kept while the others are tried (in f32, x and a norm of x that is
	// already normalised are equal to 3e-5: the residual reads one of them).
	var loose *val
	looseErr := math.Inf(1)
	take := func(w *val) bool {
		e := relRMS(t.format, w.data, t.data)
		if e <= looseFloor(t.format) {
			return true
		}
		if e < looseErr/4 {
			loose, looseErr = w, e
		}
		return false
	}
	for i, a := range ops {
		for j, b := range ops {
			if i == j {
				continue
			}
			if i < j {
				if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "add"}}); w != nil && take(w) {
					return w
				}
				if w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{a, b}, out: t.format, label: "mul"}}); w != nil {
					for _, g := range []*val{a, b} {
						if g.fit != nil && g.fit.kind == "glue" && g.fit.norm.Kind == 0 {
							w.fit = &leafFit{kind: "glu", act: g.fit.act, squared: g.fit.squared, candidates: g.fit.candidates}
						}
					}
					return w
				}
			}
			// a + c·b
			r := make([]float32, len(t.data))
			for k := range r {
				r[k] = t.data[k] - a.data[k]
			}
			if c, ok := fitScalar(b, &val{data: r, format: t.format, shape: t.shape}); ok && c != 1 {
				k := s.constant(exactestScale(a, b, t, c))
				scaled := s.derive(&expr{op: program.OpMul, args: []*val{b, k}, out: t.format, label: "scaled"})
				if scaled != nil {
					if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, scaled}, out: t.format, label: "scaled residual"}}); w != nil && take(w) {
						return w
					}
				}
			}
			var cands []*expr
			for _, f := range glueActs {
				cands = append(cands, &expr{op: program.OpGLU, attrs: program.Attrs{Act: f}, args: []*val{a, b}, out: t.format, label: f.String()})
			}
			if w, ev := s.best(t, cands); w != nil {
				w = s.exactestGLU(t, w, cands)
				w.fit = &leafFit{kind: "glu", act: w.from.attrs.Act, candidates: ev}
				return w
			}
		}
	}
	return loose
}

// exactestScale is, in a narrow format, the number near the fitted c
// (within 2⁻⁷ of it: c to 1, 2 or 3 significant digits, or simple.
// Candidates') with which a + round(x·b), rounded, reproduces the most of
// t's entries bit for bit, the shortest among equals; c itself
// elsewhere. There t's roundings move a least-squares scale further
// than a simple number's distance (0.801 for a pipeline's 0.8 where the
// scaled branch is small beside a), and only the scale the forward used
// rounds as it did.
func exactestScale(a, b, t *val, c float64) float64 {
	f := t.format
	if f == precision.F32 || c == 0 {
		return c
	}
	cands := []float64{c}
	for _, digits := range []float64{1, 2, 3} {
		p := math.Pow(10, math.Floor(math.Log10(math.Abs(c)))-digits+1)
		cands = append(cands, math.Round(c/p)*p)
	}
	cands = append(cands, simple.Candidates(c)...)
	exact := func(x float64) int {
		n := 0
		for i, tv := range t.data {
			if f.Round(a.data[i]+f.Round(float32(x)*b.data[i])) == tv {
				n++
			}
		}
		return n
	}
	best, bestN, bestLen := c, exact(c), len(strconv.FormatFloat(c, 'g', -1, 64))
	for _, x := range cands[1:] {
		if math.Abs(x-c) > math.Ldexp(math.Abs(c), -7) {
			continue
		}
		n, l := exact(x), len(strconv.FormatFloat(x, 'g', -1, 64))
		if n > bestN || n == bestN && l < bestLen {
			best, bestN, bestLen = x, n, l
		}
	}
	return best
}

// exactestGLU is, in a narrow format, the gated unit among cands whose
// rel-RMS is within 1.5× of the winner w's that reproduces the most of
// t's entries bit for bit: there GELU's erf and tanh forms lie within
// each other's tolerance (a repeated block's GEGLU read as either), and
// only the right one rounds as the reference did. w itself elsewhere.
func (s *synth) exactestGLU(t, w *val, cands []*expr) *val {
	if t.format == precision.F32 || len(cands) < 2 {
		return w
	}
	bestErr := relRMS(t.format, w.data, t.data)
	win, winExact := w, exactShare(w.data, t.data)
	for _, e := range cands {
		if e.attrs.Act == w.from.attrs.Act {
			continue
		}
		v, sc := s.ev.score(e, t)
		if v == nil || sc > 1.5*bestErr {
			continue
		}
		if x := exactShare(v.data, t.data); x > winExact {
			win, winExact = v, x
		}
	}
	return win
}

// exactShare is the fraction of a's entries equal to b's.
func exactShare(a, b []float32) float64 {
	n := 0
	for i := range a {
		if a[i] == b[i] {
			n++
		}
	}
	return float64(n) / float64(max(len(a), 1))
}

// pooled explains t [B, C] (or [B, 1, C], the mean kept as a row) as the
// mean of a value [B, S, C] over its rows, weighted by a mask of the scope
// ([B, S]) or not, or of an image's cells: [B, H, W, C] channels last or
// [B, C, H, W] channels first (a global average pool).
func (s *synth) pooled(t *val, vals []*val) *val {
	if v := s.pooledCells(t, vals); v != nil {
		return v
	}
	if len(t.shape) == 3 && t.shape[1] == 1 {
		flat := *t
		flat.shape = []int{t.shape[0], t.shape[2]}
		return s.reshape(s.pooled(&flat, vals), t.shape)
	}
	if len(t.shape) != 2 {
		return nil
	}
	var masks []*val
	for _, v := range vals {
		if len(v.shape) == 2 && v.integral() && !v.opaque {
			masks = append(masks, v)
		}
	}
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != t.shape[0] || v.shape[2] != t.shape[1] {
			continue
		}
		cands := []*expr{{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{v, nil}, out: t.format, label: "mean"}}
		for k := 1; k <= maxPrefixRows && k < v.shape[1]; k++ {
			// the mean of the rows after k leading ones (a class token
			// and registers left out of the pool)
			rest := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: k, End: v.shape[1]}, args: []*val{v}, out: v.format, label: fmt.Sprintf("rows after the %d leading", k)})
			if rest != nil {
				cands = append(cands, &expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{rest, nil}, out: t.format, label: "mean of the rows after the leading ones"})
			}
		}
		for _, m := range masks {
			if m.shape[0] == v.shape[0] && m.shape[1] == v.shape[1] {
				cands = append(cands, &expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{v, m}, out: t.format, label: "masked mean"})
			}
		}
		if w, _ := s.best(t, cands); w != nil {
			return w
		}
	}
	return nil
}

// maxPrefixRows bounds the leading rows (class and register tokens) a
// pool may leave out.
const maxPrefixRows = 8

// pooledCells is pooled over the cells of an image [B, H, W, C] or [B,
// C, H, W] (the axes between the batch and the channels, or after them,
// read as one).
func (s *synth) pooledCells(t *val, vals []*val) *val {
	if len(t.shape) != 2 {
		return nil
	}
	b, c := t.shape[0], t.shape[1]
	var cands []*expr
	for _, v := range vals {
		n := len(v.shape)
		if v.opaque || v.integral() || n < 4 || v.shape[0] != b {
			continue
		}
		if v.shape[n-1] == c {
			if r := s.reshape(v, []int{b, v.numel() / (b * c), c}); r != nil {
				cands = append(cands, &expr{op: program.OpMean, attrs: program.Attrs{Axis: 1}, args: []*val{r, nil}, out: t.format, label: "mean over the image's cells, channels last"})
			}
		}
		if v.shape[1] == c {
			if r := s.reshape(v, []int{b, c, v.numel() / (b * c)}); r != nil {
				cands = append(cands, &expr{op: program.OpMean, attrs: program.Attrs{Axis: 2}, args: []*val{r, nil}, out: t.format, label: "mean over the image's cells, channels first"})
			}
		}
		if len(cands) >= 4 {
			break
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// summed explains t as the sum of three values of its shape (a
// conditioning vector made of several embeddings), added left to right in
// the order that reproduces it.
func (s *synth) summed(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	tol := tolerance(t.format)
	sum := make([]float32, len(t.data))
	for i := range ops {
		for j := i + 1; j < len(ops); j++ {
			for k := j + 1; k < len(ops); k++ {
				for e := range sum {
					sum[e] = ops[i].data[e] + ops[j].data[e] + ops[k].data[e]
				}
				if relRMS(t.format, sum, t.data) > 2*tol {
					continue
				}
				var cands []*expr
				for _, p := range permutations(3) {
					a, b, c := ops[[]int{i, j, k}[p[0]]], ops[[]int{i, j, k}[p[1]]], ops[[]int{i, j, k}[p[2]]]
					ab := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format})
					if ab != nil {
						cands = append(cands, &expr{op: program.OpAdd, args: []*val{ab, c}, out: t.format, label: "sum of three"})
					}
				}
				if w, _ := s.best(t, cands); w != nil {
					return w
				}
			}
		}
	}
	return nil
}

// scaledSum explains t as (a + b)·w, or (a + b)·w + c, over values of
// its shape (two time embeddings averaged, then a guidance embedding
// added: a mean-flow model's conditioning), w fitted by least squares and
// snapped to a simple number, applied as a division where 1/w is an
// integer (x / 2, as written); tried once every other form failed.
func (s *synth) scaledSum(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	rest := &val{shape: t.shape, format: t.format, data: make([]float32, len(t.data))}
	for i := range ops {
		for j := i + 1; j < len(ops); j++ {
			ab := s.derive(&expr{op: program.OpAdd, args: []*val{ops[i], ops[j]}, out: t.format, label: "sum"})
			if ab == nil {
				continue
			}
			for _, c := range append([]*val{nil}, ops...) {
				if c == ops[i] || c == ops[j] {
					continue
				}
				for e := range rest.data {
					rest.data[e] = t.data[e]
					if c != nil {
						rest.data[e] -= c.data[e]
					}
				}
				w, ok := fitScalar(ab, rest)
				if !ok || w == 1 {
					continue
				}
				var scaled []*val
				if r := math.Round(1 / w); r != 0 && 1/r == w {
					scaled = append(scaled, s.derive(&expr{op: program.OpDiv, args: []*val{ab, s.constant(r)}, out: t.format, label: "sum divided"}))
				}
				scaled = append(scaled, s.derive(&expr{op: program.OpMul, args: []*val{ab, s.constant(w)}, out: t.format, label: "sum scaled"}))
				var cands []*expr
				for _, sv := range scaled {
					switch {
					case sv == nil:
					case c == nil:
						cands = append(cands, sv.from)
					default:
						cands = append(cands, &expr{op: program.OpAdd, args: []*val{sv, c}, out: t.format, label: "scaled sum plus a value"})
					}
				}
				if w, _ := s.best(t, cands); w != nil {
					return w
				}
			}
		}
	}
	return nil
}

// projected explains t as a linear of a value by a matrix parameter the
// call holds itself (F.linear(x, self.weight, self.bias) in a forward),
// stored [out, in] or [in, out], with a vector parameter as bias or none.
func (s *synth) projected(t *val, vals []*val) *val {
	var mats, vecs []*val
	for _, v := range vals {
		if !v.param {
			continue
		}
		switch len(v.shape) {
		case 2:
			mats = append(mats, v)
		case 1:
			vecs = append(vecs, v)
		}
	}
	if len(mats) == 0 || len(t.shape) == 0 {
		return nil
	}
	out := t.shape[len(t.shape)-1]
	for _, x := range vals {
		if x.opaque || len(x.shape) != len(t.shape) || !slices.Equal(x.shape[:len(x.shape)-1], t.shape[:len(t.shape)-1]) {
			continue
		}
		if v := s.linearByParams(x, mats, vecs, out, t); v != nil {
			return v
		}
	}
	if v := s.projectedPart(t, vals, mats, vecs); v != nil {
		return v
	}
	return s.projectedFlat(t, vals, mats, vecs)
}

// projectedFlat is projected with x's rows laid out another way (the
// tokens flattened, x.reshape(−1, D), before F.linear by a parameter of
// the call: a router's logits [B·S, E] from [B, S, D]): x of another rank
// whose leading axes hold as many rows as t's. Tried where projected and
// projectedPart found nothing.
func (s *synth) projectedFlat(t *val, vals, mats, vecs []*val) *val {
	n := len(t.shape)
	if n < 2 {
		return nil
	}
	rows := 1
	for _, d := range t.shape[:n-1] {
		rows *= d
	}
	for _, x := range vals {
		m := len(x.shape)
		if x.opaque || x.param || x.integral() || m < 2 || m == n {
			continue
		}
		if x.numel()/x.shape[m-1] != rows {
			continue
		}
		shape := append(slices.Clone(t.shape[:n-1]), x.shape[m-1])
		if v := s.linearByParams(s.reshape(x, shape), mats, vecs, t.shape[n-1], t); v != nil {
			return v
		}
	}
	return nil
}

// linearByParams explains t as x times one of the matrix parameters, with
// one of the vectors of width out as its bias or none.
func (s *synth) linearByParams(x *val, mats, vecs []*val, out int, t *val) *val {
	for _, w := range mats {
		for _, b := range append([]*val{nil}, vecs...) {
			if b != nil && b.shape[0] != out {
				continue
			}
			params := []*val{w}
			if b != nil {
				params = append(params, b)
			}
			if v := s.fitLinear(x, params, t); v != nil {
				return v
			}
		}
	}
	return nil
}

// maxPartTerms bounds the values projectedPart sums in pairs.
const maxPartTerms = 6

// projectedPart is projected with x the leading rows of a value or of the
// sum of two values of one shape (a residual stream's last sum, its first
// rows kept, then multiplied by a matrix parameter: a resampler's learned
// queries projected out): tried where projected found no x as it is.
func (s *synth) projectedPart(t *val, vals, mats, vecs []*val) *val {
	n := len(t.shape)
	if n < 2 {
		return nil
	}
	rows := t.shape[n-2]
	out := t.shape[n-1]
	ins := map[int]bool{} // the widths a matrix of t's width takes in
	for _, w := range mats {
		switch out {
		case w.shape[0]:
			ins[w.shape[1]] = true
		case w.shape[1]:
			ins[w.shape[0]] = true
		}
	}
	if len(ins) == 0 {
		return nil
	}
	fits := func(x *val) bool {
		return !x.opaque && !x.integral() && len(x.shape) == n && ins[x.shape[n-1]] && x.shape[n-2] > rows &&
			slices.Equal(x.shape[:n-2], t.shape[:n-2])
	}
	// the most recent few (vals come recent first: a residual sum's
	// terms are the latest made)
	var xs []*val
	for _, v := range vals {
		if fits(v) && len(xs) < maxPartTerms {
			xs = append(xs, v)
		}
	}
	var parts []*val
	for _, x := range xs {
		parts = append(parts, x)
	}
	for i, a := range xs {
		for _, b := range xs[i+1:] {
			if slices.Equal(a.shape, b.shape) {
				if v := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "residual sum"}); v != nil {
					parts = append(parts, v)
				}
			}
		}
	}
	for _, p := range parts {
		x := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 2, Start: 0, End: rows}, args: []*val{p}, out: p.format, label: "leading rows"})
		if x == nil {
			continue
		}
		if v := s.linearByParams(x, mats, vecs, out, t); v != nil {
			return v
		}
	}
	return nil
}

// chunksOf are the pieces of the scope's wider values cut to t's width
// along the last axis (a fused gate/up projection's halves), k ≤ 4.
func (s *synth) chunksOf(t *val, vals []*val) []*val {
	var out []*val
	n := len(t.shape)
	if n == 0 {
		return nil
	}
	for _, v := range vals {
		if v.opaque || len(v.shape) != n {
			continue
		}
		// the one axis the two differ on (the channels of an image
		// [B, C, H, W] as well as the last axis of rows)
		ax := -1
		for i := range n {
			if v.shape[i] != t.shape[i] {
				if ax >= 0 {
					ax = -2
					break
				}
				ax = i
			}
		}
		if ax < 0 {
			continue
		}
		w := t.shape[ax]
		if v.shape[ax] <= w || v.shape[ax]%w != 0 || v.shape[ax]/w > 4 {
			continue
		}
		for i := 0; i < v.shape[ax]; i += w {
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: i, End: i + w}, args: []*val{v}, out: v.format, label: "chunk"}); c != nil {
				out = append(out, c)
			}
		}
		if len(out) >= 8 {
			break
		}
	}
	return out
}

// squared explains t as f(v)·f(v) for an activation f or none (squared
// ReLU and its kin). Only a target with no negative element can be one.
func (s *synth) squared(t, v *val) *val {
	for _, x := range t.data {
		if x < 0 {
			return nil
		}
	}
	var cands []*expr
	for _, a := range append([]exec.ActKind{exec.ActIdentity}, glueActs...) {
		f := v
		if a != exec.ActIdentity {
			if f = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: a}, args: []*val{v}, out: t.format, label: a.String()}); f == nil {
				continue
			}
		}
		cands = append(cands, &expr{op: program.OpMul, args: []*val{f, f}, out: t.format, label: a.String() + " squared"})
	}
	w, ev := s.best(t, cands)
	if w != nil {
		w.fit = &leafFit{kind: "glue", act: w.from.args[0].actOf(), squared: true, candidates: ev}
	}
	return w
}

// actOf is the activation v is made by (identity for any other value).
func (v *val) actOf() exec.ActKind {
	if v.from != nil && v.from.op == program.OpAct {
		return v.from.attrs.Act
	}
	return exec.ActIdentity
}

// rowGated explains t as a + f(g)·b with g one number per row ([.., 1]:
// a shared expert's sigmoid gate) and f an activation or none.
func (s *synth) rowGated(t *val, vals []*val) *val {
	n := len(t.shape)
	var gates []*val
	for _, v := range vals {
		if len(v.shape) == n && v.shape[n-1] == 1 && t.shape[n-1] > 1 && slices.Equal(v.shape[:n-1], t.shape[:n-1]) && !v.opaque {
			gates = append(gates, v)
		}
	}
	if len(gates) == 0 {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	for _, g := range gates {
		for _, f := range append([]exec.ActKind{exec.ActIdentity}, glueActs...) {
			fg := g
			if f != exec.ActIdentity {
				if fg = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{g}, out: t.format, label: f.String()}); fg == nil {
					continue
				}
			}
			for _, b := range ops {
				gb := s.derive(&expr{op: program.OpMul, args: []*val{fg, b}, out: t.format, label: "row gate"})
				if gb == nil {
					continue
				}
				for _, a := range ops {
					if a == b {
						continue
					}
					if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, gb}, out: t.format, label: "row-gated residual"}}); w != nil {
						return w
					}
				}
			}
		}
	}
	return nil
}

// paramAdded explains t as a value of its shape plus a parameter of one
// row ([E] or [1, E], broadcast over t's rows: a per-expert correction),
// or of one column ([C, 1] added to t [.., C, S] channels first: a
// convolution's bias kept apart, x += bias).
func (s *synth) paramAdded(t *val, vals []*val) *val {
	if len(t.shape) == 0 {
		return nil
	}
	e := t.shape[len(t.shape)-1]
	for _, p := range vals {
		column := len(t.shape) >= 2 && len(p.shape) == 2 && p.shape[1] == 1 && p.shape[0] == t.shape[len(t.shape)-2] && p.shape[0] != e
		if !p.param || p.numel() != e && !column || p.numel() == t.numel() {
			continue
		}
		row := p
		if !column {
			row = s.reshape(p, []int{e})
		}
		if row == nil {
			continue
		}
		for _, v := range sameShape(t, vals) {
			if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{v, row}, out: t.format, label: "parameter added"}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// rowAddedResidual explains t as b + (a + r): a value a of t's shape plus
// a row r of t's last width (a bias a module returns beside its output
// instead of adding it: GPT-NeoX-Japanese's dense_bias), then a residual
// b of t's shape (or the two adds in another order). Tried once the one- and two-term forms have failed; a
// pair (a, b) is scored only where t − a − b is one row repeated, and
// with the row value nearest that row.
func (s *synth) rowAddedResidual(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	e := t.shape[len(t.shape)-1]
	var rows []*val
	for _, p := range vals {
		if !p.opaque && p.numel() == e && p.numel() != t.numel() {
			rows = append(rows, p)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	ops := s.likeShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	scale := rms(t.data)
	for i, a := range ops {
		for _, b := range ops[i+1:] {
			// the row t − a − b repeats, to the format's tolerance of t
			row := make([]float64, e)
			for k := range row {
				row[k] = float64(t.data[k]) - float64(a.data[k]) - float64(b.data[k])
			}
			var miss float64
			for k := range t.data {
				d := float64(t.data[k]) - float64(a.data[k]) - float64(b.data[k]) - row[k%e]
				miss += d * d
			}
			if math.Sqrt(miss/float64(len(t.data))) > 4*tolerance(t.format)*scale {
				continue
			}
			var best *val
			bestMiss := math.Inf(1)
			for _, r := range rows {
				var m float64
				for k, x := range r.data {
					m += (float64(x) - row[k]) * (float64(x) - row[k])
				}
				if m < bestMiss {
					best, bestMiss = r, m
				}
			}
			// the three orders of the two adds round differently: the
			// one that reproduces t best
			r := s.reshape(best, []int{e})
			var cands []*expr
			for _, pair := range [][2]*val{{a, b}, {b, a}} {
				if ar := s.derive(&expr{op: program.OpAdd, args: []*val{pair[0], r}, out: t.format, label: "row added"}); ar != nil {
					cands = append(cands, &expr{op: program.OpAdd, args: []*val{pair[1], ar}, out: t.format, label: "residual + (value + row)"})
				}
			}
			if ab := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "residual"}); ab != nil {
				cands = append(cands, &expr{op: program.OpAdd, args: []*val{ab, r}, out: t.format, label: "(residual + value) + row"})
			}
			if w, _ := s.best(t, cands); w != nil {
				return w
			}
		}
	}
	return nil
}

// normedCut explains t [..., R] as a parameterless norm of the first or
// last R columns of a wider value of t's leading shape (a split's piece
// normalised in the forward, rms_forward(time_step): no call sees the
// piece). One of glue's late forms.
func (s *synth) normedCut(t *val, vals []*val) *val {
	nd := len(t.shape)
	if nd < 2 {
		return nil
	}
	r := t.shape[nd-1]
	for _, v := range vals {
		if v.opaque || len(v.shape) != nd || v.shape[nd-1] <= r || !slices.Equal(v.shape[:nd-1], t.shape[:nd-1]) {
			continue
		}
		for _, off := range slices.Compact([]int{0, v.shape[nd-1] - r}) {
			cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: nd - 1, Start: off, End: off + r}, args: []*val{v}, out: v.format, label: fmt.Sprintf("%s[%d:%d]", v.origin, off, off+r)})
			if cut == nil {
				continue
			}
			if w, ev := s.best(t, s.normCandidates(cut, t)); w != nil {
				w.fit = &leafFit{kind: "glue", norm: w.from.attrs.Norm, candidates: ev}
				s.norms = append(s.norms, normRecord{scope: s.scopeOf, boundary: t.origin, fit: &leafFit{kind: "norm", norm: w.from.attrs.Norm, candidates: ev}})
				return w
			}
		}
	}
	return nil
}

// movedSum explains t as the sum of two values of one shape moved into
// t's layout (permuted, then reshaped): a residual added in a layout of
// its own and laid back (x + conv(x) over [B, C, F, H·W], then back to
// [B, F, H, W, C]). Tried once every other form failed.
func (s *synth) movedSum(t *val, vals []*val) *val {
	tol := tolerance(t.format)
	var ops []*val
	for _, v := range vals {
		if !v.opaque && v.numel() == t.numel() && len(v.shape) >= 2 && len(v.shape) <= 5 && !slices.Equal(v.shape, t.shape) {
			ops = append(ops, v)
		}
	}
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	for i, a := range ops {
		for _, b := range ops[i+1:] {
			if !slices.Equal(a.shape, b.shape) {
				continue
			}
			sum := make([]float32, len(a.data))
			for k := range sum {
				sum[k] = a.data[k] + b.data[k]
			}
			for _, perm := range permutations(len(a.shape)) {
				if isIdentity(perm) || relRMS(t.format, permuteData(&val{shape: a.shape, data: sum}, perm), t.data) > tol {
					continue
				}
				add := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "add"})
				if add == nil {
					continue
				}
				p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{add}, out: t.format, label: "permute"})
				if p == nil {
					continue
				}
				if w := s.reshape(p, t.shape); w != nil && relRMS(t.format, w.data, t.data) <= tol && s.everyStep(w, t, tol) {
					return w
				}
			}
			if w := s.splitSum(t, a, b, sum); w != nil {
				return w
			}
		}
	}
	return nil
}

// splitSum is movedSum where the sum's axes are split first: a + b read
// in t's axes in another order, then permuted to t's ([B, L, H·D] summed,
// viewed [B, L, H, D], then heads first: values with a value embedding
// added after the projection, laid out for attention).
func (s *synth) splitSum(t, a, b *val, sum []float32) *val {
	if len(t.shape) <= len(a.shape) {
		return nil
	}
	tol := tolerance(t.format)
	for _, perm := range permutations(len(t.shape)) {
		if isIdentity(perm) {
			continue
		}
		mid := make([]int, len(t.shape))
		for i, p := range perm {
			mid[p] = t.shape[i]
		}
		if relRMS(t.format, permuteData(&val{shape: mid, data: sum}, perm), t.data) > tol {
			continue
		}
		add := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "add"})
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(add, mid)}, out: t.format, label: "permute"})
		if p != nil && relRMS(t.format, p.data, t.data) <= tol && s.everyStep(p, t, tol) {
			return p
		}
	}
	return nil
}

// activatedSum explains t as an activation of the sum of two values of
// its shape (silu(timestep embedding + condition embedding), the sum and
// the function in the forward, neither a module of its own). Tried once
// every other form failed.
func (s *synth) activatedSum(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	for i, a := range ops {
		for _, b := range ops[i+1:] {
			sum := s.derive(&expr{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "add"})
			if sum == nil {
				continue
			}
			var cands []*expr
			for _, f := range glueActs {
				if f != exec.ActIdentity {
					cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{sum}, out: t.format, label: f.String() + " of a sum"})
				}
			}
			if w, ev := s.best(t, cands); w != nil {
				w.fit = &leafFit{kind: "glue", act: w.from.attrs.Act, candidates: ev}
				return w
			}
		}
	}
	return nil
}

// paramScaled explains t as a value of its shape times a parameter vector
// along one of t's axes (a layer scale: γ [C] on channels-last rows, γ [C,
// 1, 1] on a channels-first map), the vector shaped to broadcast along each
// axis of its length in turn (a map whose height, width and channels agree
// leaves the axis to the values).
func (s *synth) paramScaled(t *val, vals []*val) *val {
	if len(t.shape) == 0 {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	if len(ops) == 0 {
		return nil
	}
	var cands []*expr
	for _, p := range vals {
		c := p.numel()
		if !p.param || c < 2 || c >= t.numel() || !vectorShape(p.shape) {
			continue
		}
		for ax, g := range s.vectorAxes(p, t) {
			for _, v := range ops {
				cands = append(cands, &expr{op: program.OpMul, args: []*val{v, g}, out: t.format, label: fmt.Sprintf("times a parameter along axis %d", ax)})
			}
		}
	}
	w, _ := s.best(t, cands)
	return w
}

// vectorAxes yields each axis of t as long as the vector p, with p shaped
// [C, 1, …, 1] to broadcast along it.
func (s *synth) vectorAxes(p, t *val) iter.Seq2[int, *val] {
	return func(yield func(int, *val) bool) {
		c := p.numel()
		for ax, n := range t.shape {
			if n != c {
				continue
			}
			col := make([]int, len(t.shape)-ax)
			for i := range col {
				col[i] = 1
			}
			col[0] = c
			if g := s.reshape(p, col); g != nil && !yield(ax, g) {
				return
			}
		}
	}
}

// vectorShape reports whether shape has at most one axis longer than 1.
func vectorShape(shape []int) bool {
	long := 0
	for _, n := range shape {
		if n > 1 {
			long++
		}
	}
	return long <= 1
}

// broadcastProduct explains t as a·g, a a value of t's shape and g one of
// fewer entries that broadcasts to it (each axis of g's t's or 1: a
// squeeze-and-excitation gate [B, C, 1, 1] over a map [B, C, H, W]), the
// product rounded once. A gate that is exactly 0 or 1 on whole channels
// leaves ratios t/a undefined there, which forms reading the gate off
// the values cannot take; the product itself is exact.
func (s *synth) broadcastProduct(t *val, vals []*val) *val {
	return s.broadcastWith(t, vals, program.OpMul, "a·g (a broadcast gate)")
}

// broadcastSum explains t as a + g for a broadcast g as broadcastProduct
// reads it, or g of t's leading axes given unit trailing ones (a
// timestep embedding projected to [B, C] and added per channel to a map
// [B, C, H, W]: a diffusion UNet's residual blocks, temb[:, :, None,
// None]).
func (s *synth) broadcastSum(t *val, vals []*val) *val {
	if t.integral() {
		return nil
	}
	return s.broadcastWith(t, vals, program.OpAdd, "a + g (a broadcast addend)")
}

// broadcastWith scores op(a, g) over the scope's values a of t's shape and
// g of fewer entries that broadcast to it, directly or with unit axes
// appended to a value of t's leading axes.
func (s *synth) broadcastWith(t *val, vals []*val, op program.Op, label string) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	var gates []*val
	for _, v := range vals {
		if v.opaque || v.numel() >= t.numel() {
			continue
		}
		switch {
		case len(v.shape) == len(t.shape) && broadcastsTo(v.shape, t.shape):
			gates = append(gates, v)
		case op == program.OpAdd && len(v.shape) >= 2 && len(v.shape) < len(t.shape) && len(v.shape) <= 3:
			// v's axes, in some order, as t's leading ones (a frame axis
			// before the channels: a temporal block's per-frame embedding,
			// permuted to [B, C, F] then given unit axes)
			for _, perm := range permutations(len(v.shape)) {
				moved := make([]int, len(perm))
				for i, a := range perm {
					moved[i] = v.shape[a]
				}
				if !slices.Equal(moved, t.shape[:len(v.shape)]) {
					continue
				}
				m := v
				if !isIdentity(perm) {
					m = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "axes moved"})
				}
				unit := slices.Concat(moved, slices.Repeat([]int{1}, len(t.shape)-len(v.shape)))
				if g := s.reshape(m, unit); g != nil {
					gates = append(gates, g)
				}
			}
		}
	}
	if len(ops) == 0 || len(gates) == 0 {
		return nil
	}
	var cands []*expr
	for _, a := range ops {
		for _, g := range gates {
			cands = append(cands, &expr{op: op, args: []*val{a, g}, out: t.format, label: label})
		}
	}
	v, _ := s.best(t, cands)
	return v
}

// broadcastsTo reports whether a shape broadcasts to another of its rank:
// every axis equal or 1.
func broadcastsTo(from, to []int) bool {
	for i := range from {
		if from[i] != to[i] && from[i] != 1 {
			return false
		}
	}
	return true
}

// partPlus explains t as a leading or trailing part of a wider value plus
// a value of t's shape (DPN's residual path: the first channels of a
// projection added to a block's output), the part cut along the one axis
// where the wider value is longer, the sum rounded once.
func (s *synth) partPlus(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	if len(ops) == 0 || t.integral() {
		return nil
	}
	tol := tolerance(t.format)
	sum := make([]float32, len(t.data))
	for _, v := range vals {
		if v.opaque || v.integral() || len(v.shape) != len(t.shape) || len(v.data) != v.numel() {
			continue
		}
		ax := -1
		for i := range v.shape {
			switch {
			case v.shape[i] == t.shape[i]:
			case v.shape[i] > t.shape[i] && ax < 0:
				ax = i
			default:
				ax = -2
			}
		}
		if ax < 0 {
			continue
		}
		for _, start := range []int{0, v.shape[ax] - t.shape[ax]} {
			part := sliceData(v, ax, start, start+t.shape[ax])
			if len(part) != len(sum) {
				continue
			}
			for _, w := range ops {
				if len(w.data) != len(sum) {
					continue // a value held in another form (a view's proxy)
				}
				for e := range sum {
					sum[e] = part[e] + w.data[e]
				}
				if relRMS(t.format, sum, t.data) > tol {
					continue
				}
				p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: start, End: start + t.shape[ax]}, args: []*val{v}, out: v.format, label: "part"})
				if p == nil {
					continue
				}
				if r, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{p, w}, out: t.format, label: "a value's part plus a value"}}); r != nil {
					return r
				}
			}
		}
	}
	return nil
}
