package synth

import (
	"math"
	"strconv"
	"strings"

	"math/big"
	"slices"
	"zflow/precision"

	"zflow/exec"
	"zflow/exec/program"
)

// maxOperands bounds how many of a scope's most recent values of the
// target's shape the pairwise forms consider.
const maxOperands = 12

// glue explains target as a small expression over the scope's values:
// tried from the simplest form up (the same tensor moved or cut; one
// pointwise function; a scaled value; a residual or product of two;
// attention), the first form that reproduces target within its format's
// tolerance wins. nil: nothing in the vocabulary explains it.
func (s *synth) glue(target *val, sc *scope) *val {
	// (evidence needs many values: one integer-valued timestep is exact in
	// bf16 by chance)
	if target.format == precision.F32 && s.em.act != precision.F32 && target.numel() >= 16 && !target.integral() && representable(target, s.em.act) {
		// f32 storage of values the activations' format holds exactly: a
		// value computed in that format and cast (x.float())
		proxy := *target
		proxy.format = s.em.act
		if v := s.glueIn(&proxy, sc); v != nil {
			if v.format == precision.F32 {
				return v
			}
			return s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{v}, out: precision.F32, label: "cast"})
		}
		return nil
	}
	return s.glueIn(target, sc)
}

// representable reports whether every value of v is exact in format f.
func representable(v *val, f precision.Format) bool {
	for _, x := range v.data {
		if !f.Representable(x) {
			return false
		}
	}
	return true
}

func (s *synth) glueIn(target *val, sc *scope) *val {
	tol := tolerance(target.format)
	vals := recentFirst(sc.vals)
	for _, try := range []func(*val, []*val) *val{s.moved, s.patched, s.cut, s.joined, s.pointwise, s.combined, s.summed, s.pooled, s.projected,
		func(t *val, vs []*val) *val { return s.modulated(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.gated(t, sc, vs) }} {
		if v := try(target, vals); v != nil && relRMS(v.data, target.data) <= tol {
			return v
		}
	}
	if v := s.attention(target, sc); v != nil {
		return v
	}
	if v := s.jointAttention(target, sc); v != nil {
		return v
	}
	if v := s.constantResidual(target, sc, vals); v != nil {
		return v
	}
	return nil
}

func recentFirst(vs []*val) []*val {
	out := slices.Clone(vs)
	slices.Reverse(out)
	return out
}

// moved: a value itself, reshaped, or permuted then reshaped.
func (s *synth) moved(t *val, vals []*val) *val {
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.numel() != t.numel() || v.opaque {
			continue
		}
		if relRMS(v.data, t.data) <= tol {
			if v.format != t.format {
				// the same values stored in another format: a cast
				v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: t.format}, args: []*val{v}, out: t.format, label: "cast"})
			}
			if v == nil || slices.Equal(v.shape, t.shape) {
				return v
			}
			return s.reshape(v, t.shape)
		}
	}
	for _, v := range vals {
		if v.numel() != t.numel() || v.opaque || len(v.shape) < 2 || len(v.shape) > 5 {
			continue
		}
		for _, perm := range permutations(len(v.shape)) {
			if isIdentity(perm) {
				continue
			}
			if relRMS(permuteData(v, perm), t.data) <= tol {
				p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "permute"})
				return s.reshape(p, t.shape)
			}
		}
	}
	// a value read with the target's axes in another order (heads split
	// off the width and moved: [B, S, H·D] → [B, H, S, D])
	if len(t.shape) >= 3 && len(t.shape) <= 5 {
		for _, v := range vals {
			if v.numel() != t.numel() || v.opaque {
				continue
			}
			for _, pi := range permutations(len(t.shape)) {
				if isIdentity(pi) {
					continue
				}
				// split: the shape that pi permutes into t's
				split := make([]int, len(t.shape))
				for i, a := range pi {
					split[a] = t.shape[i]
				}
				if relRMS(permuteData(&val{shape: split, data: v.data}, pi), t.data) > tol {
					continue
				}
				r := s.reshape(v, split)
				p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: pi}, args: []*val{r}, out: v.format, label: "permute"})
				if p != nil && slices.Equal(p.shape, t.shape) {
					return p
				}
			}
		}
	}
	return nil
}

// cut: a contiguous slice of one axis of a value (a chunk of a fused
// projection, one stream's rows), or the i-th of k pieces of each group
// of a grouped last axis (per-head [q k v] layouts).
func (s *synth) cut(t *val, vals []*val) *val {
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.opaque || v.numel() <= t.numel() || len(v.shape) == 0 {
			continue
		}
		for ax := range v.shape {
			rest := v.numel() / v.shape[ax]
			if t.numel()%rest != 0 {
				continue
			}
			size := t.numel() / rest
			if size >= v.shape[ax] {
				continue
			}
			for start := 0; start+size <= v.shape[ax]; start++ {
				if relRMS(sliceData(v, ax, start, start+size), t.data) > tol {
					continue
				}
				c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: start, End: start + size}, args: []*val{v}, out: v.format, label: "slice"})
				return s.reshape(c, t.shape)
			}
		}
		// grouped: last axis W = G·k·w, piece i of each group
		w := v.shape[len(v.shape)-1]
		tw := t.numel() / (v.numel() / w)
		if tw <= 0 || w%tw != 0 || t.numel()%(v.numel()/w) != 0 {
			continue
		}
		k := w / tw
		for g := 2; g <= tw; g++ {
			if tw%g != 0 {
				continue
			}
			inner := tw / g
			shape := append(slices.Clone(v.shape[:len(v.shape)-1]), g, k, inner)
			for i := range k {
				gv := &val{shape: shape, data: v.data, format: v.format}
				if relRMS(sliceData(gv, len(shape)-2, i, i+1), t.data) > tol {
					continue
				}
				r := s.reshape(v, shape)
				c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: len(shape) - 2, Start: i, End: i + 1}, args: []*val{r}, out: v.format, label: "grouped slice"})
				return s.reshape(c, t.shape)
			}
		}
	}
	return nil
}

var glueActs = []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf, exec.ActTanh, exec.ActSigmoid, exec.ActReLU}

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
		var cands []*expr
		for _, a := range glueActs {
			cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: a}, args: []*val{v}, out: t.format, label: a.String()})
		}
		cands = append(cands, s.normCandidates(v, t)...)
		if w, ev := s.best(t, cands); w != nil {
			w.fit = &leafFit{kind: "glue", act: w.from.attrs.Act, norm: w.from.attrs.Norm, candidates: ev}
			if w.from.op == program.OpNorm {
				s.norms = append(s.norms, normRecord{scope: s.scopeOf, boundary: t.origin, fit: &leafFit{kind: "norm", norm: w.from.attrs.Norm, candidates: ev}})
			}
			return w
		}
		if c, ok := fitScalar(v, t); ok {
			k := s.constant(c)
			if w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{v, k}, out: t.format, label: "scaled"}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// combined: a + g·b with g one or a constant (residuals, scaled
// residuals), a·b and f(a)·b (gated units), over pairs of values of the
// target's shape.
func (s *synth) combined(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	ops = append(ops, s.chunksOf(t, vals)...)
	for i, a := range ops {
		for j, b := range ops {
			if i == j {
				continue
			}
			if i < j {
				if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, b}, out: t.format, label: "add"}}); w != nil {
					return w
				}
				if w, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{a, b}, out: t.format, label: "mul"}}); w != nil {
					for _, g := range []*val{a, b} {
						if g.fit != nil && g.fit.kind == "glue" && g.fit.norm.Kind == 0 {
							w.fit = &leafFit{kind: "glu", act: g.fit.act, candidates: g.fit.candidates}
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
				k := s.constant(c)
				scaled := s.derive(&expr{op: program.OpMul, args: []*val{b, k}, out: t.format, label: "scaled"})
				if scaled != nil {
					if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, scaled}, out: t.format, label: "scaled residual"}}); w != nil {
						return w
					}
				}
			}
			var cands []*expr
			for _, f := range glueActs {
				cands = append(cands, &expr{op: program.OpGLU, attrs: program.Attrs{Act: f}, args: []*val{a, b}, out: t.format, label: f.String()})
			}
			if w, ev := s.best(t, cands); w != nil {
				w.fit = &leafFit{kind: "glu", act: w.from.attrs.Act, candidates: ev}
				return w
			}
		}
	}
	return nil
}

func sameShape(t *val, vals []*val) []*val {
	var out []*val
	for _, v := range vals {
		if !v.opaque && slices.Equal(v.shape, t.shape) {
			out = append(out, v)
		}
	}
	return out
}

// fitScalar fits t ≈ c·v by least squares and snaps c to 4 significant
// digits when that keeps the fit; ok is false when no single constant
// fits.
func fitScalar(v, t *val) (float64, bool) {
	var vv, vt float64
	for i := range v.data {
		x := float64(v.data[i])
		vv += x * x
		vt += x * float64(t.data[i])
	}
	if vv == 0 {
		return 0, false
	}
	c := vt / vv
	if c == 0 || math.IsNaN(c) {
		return 0, false
	}
	fits := func(x float64) bool {
		fit := make([]float32, len(v.data))
		for i := range fit {
			fit[i] = float32(x * float64(v.data[i]))
		}
		return relRMS(fit, t.data) <= 2*tolerance(t.format)
	}
	snapped := snap(c, fits)
	return snapped, fits(snapped)
}

// snapCandidates are simple numbers near c, simplest first: the square
// root or reciprocal square root of an integer, a reciprocal of an
// integer, then c to 3 and 4 significant digits.
func snapCandidates(c float64) []float64 {
	var out []float64
	if r := math.Round(c * c); r >= 1 {
		out = append(out, math.Copysign(math.Sqrt(r), c))
	}
	if r := math.Round(1 / (c * c)); r >= 1 {
		out = append(out, math.Copysign(rsqrt(r), c)) // as configs write it: d**-0.5
	}
	if r := math.Round(1 / c); r != 0 && math.Abs(r) >= 1 {
		out = append(out, 1/r)
	}
	for _, digits := range []float64{3, 4} {
		p := math.Pow(10, math.Floor(math.Log10(math.Abs(c)))-digits+1)
		out = append(out, math.Round(c/p)*p)
	}
	return out
}

// rsqrt is 1/√r correctly rounded (1/math.Sqrt(r) rounds twice; a
// config's d**-0.5 is rounded once).
func rsqrt(r float64) float64 {
	x := new(big.Float).SetPrec(200).SetFloat64(r)
	x.Sqrt(x)
	x.Quo(new(big.Float).SetPrec(200).SetFloat64(1), x)
	f, _ := x.Float64()
	return f
}

// snap is the simplest number near c that keep(x) accepts (the shortest
// decimal; among equals, the first of snapCandidates), else c.
func snap(c float64, keep func(float64) bool) float64 {
	best, bestLen := c, math.MaxInt
	for _, x := range snapCandidates(c) {
		if math.Abs(x-c) <= 1e-3*math.Abs(c) && keep(x) {
			if n := len(strconv.FormatFloat(x, 'g', -1, 64)); n < bestLen {
				best, bestLen = x, n
			}
		}
	}
	return best
}

// constant is a scalar the program holds.
func (s *synth) constant(c float64) *val {
	s.seq++
	v := &val{shape: []int{1}, data: []float32{float32(c)}, format: f32, seq: s.seq}
	s.em.constScalar(v)
	return v
}

func isIdentity(p []int) bool {
	for i, x := range p {
		if i != x {
			return false
		}
	}
	return true
}

// permutations of 0..n-1 (n ≤ 5), identity first.
func permutations(n int) [][]int {
	var out [][]int
	var rec func(p []int, used []bool)
	rec = func(p []int, used []bool) {
		if len(p) == n {
			out = append(out, slices.Clone(p))
			return
		}
		for i := range n {
			if !used[i] {
				used[i] = true
				rec(append(p, i), used)
				used[i] = false
			}
		}
	}
	rec(nil, make([]bool, n))
	return out
}

// permuteData is v's data permuted (torch.permute), row-major.
func permuteData(v *val, perm []int) []float32 {
	n := len(v.shape)
	strides := make([]int, n)
	st := 1
	for i := n - 1; i >= 0; i-- {
		strides[i] = st
		st *= v.shape[i]
	}
	outShape := make([]int, n)
	for i, a := range perm {
		outShape[i] = v.shape[a]
	}
	out := make([]float32, len(v.data))
	idx := make([]int, n)
	for k := range out {
		off := 0
		for i := range n {
			off += idx[i] * strides[perm[i]]
		}
		out[k] = v.data[off]
		for i := n - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < outShape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}

// sliceData is v[..., start:end, ...] along ax.
func sliceData(v *val, ax, start, end int) []float32 {
	outer := 1
	for _, d := range v.shape[:ax] {
		outer *= d
	}
	inner := 1
	for _, d := range v.shape[ax+1:] {
		inner *= d
	}
	dim := v.shape[ax]
	out := make([]float32, 0, outer*(end-start)*inner)
	for o := range outer {
		out = append(out, v.data[(o*dim+start)*inner:(o*dim+end)*inner]...)
	}
	return out
}

// joined explains t as values of the scope joined along one axis (a
// joint sequence, register tokens before the text, sinusoids side by
// side), up to four pieces, each the same tensor as a value (moved).
func (s *synth) joined(t *val, vals []*val) *val { return s.joinedAt(t, vals, 0) }

// joinedAt is joined with pieces that are themselves joins (depth ≤ 1):
// two streams' attention rows joined, then joined with an MLP's columns.
func (s *synth) joinedAt(t *val, vals []*val, depth int) *val {
	tol := tolerance(t.format)
	for ax := range t.shape {
		if t.shape[ax] < 2 {
			continue
		}
		var pieces []*val
		off := 0
		for off < t.shape[ax] && len(pieces) < 4 {
			var found *val
			rest := t.numel() / t.shape[ax]
			for _, v := range vals {
				if v.opaque || v.numel()%rest != 0 {
					continue
				}
				n := v.numel() / rest
				if n == 0 || n >= t.shape[ax] || n > t.shape[ax]-off {
					continue
				}
				if relRMS(v.data, sliceData(t, ax, off, off+n)) > tol {
					continue
				}
				shape := slices.Clone(t.shape)
				shape[ax] = n
				found = s.reshape(v, shape) // the piece, in t's layout
				break
			}
			if found == nil && depth == 0 {
				// a piece that is itself a join of values
				for _, v := range vals {
					if v.opaque || v.numel()%rest != 0 {
						continue
					}
					n := v.numel() / rest
					if n == 0 || n >= t.shape[ax] || n > t.shape[ax]-off {
						continue
					}
					shape := slices.Clone(t.shape)
					shape[ax] = n
					sub := &val{shape: shape, data: sliceData(t, ax, off, off+n), format: t.format}
					if w := s.joinedAt(sub, vals, depth+1); w != nil {
						found = w
						break
					}
				}
			}
			if found == nil {
				break
			}
			pieces = append(pieces, found)
			off += found.shape[ax]
		}
		if off != t.shape[ax] || len(pieces) < 2 {
			continue
		}
		if w, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: pieces, out: t.format, label: "concat"}}); w != nil {
			if len(pieces) == 2 && ax == 1 && len(t.shape) == 3 {
				s.joins = append(s.joins, joinRecord{boundary: t.origin, first: pieces[0].shape[1], second: pieces[1].shape[1]})
			}
			return w
		}
	}
	return nil
}

// pooled explains t [B, C] as the mean of a value [B, S, C] over its rows,
// weighted by a mask of the scope ([B, S]) or not.
func (s *synth) pooled(t *val, vals []*val) *val {
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
				if relRMS(sum, t.data) > 2*tol {
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

// projected explains t as a linear of a value by a matrix parameter the
// call holds itself (F.linear(x, self.weight, self.bias) in a forward),
// stored [out, in] or [in, out], with a vector parameter as bias or none.
func (s *synth) projected(t *val, vals []*val) *val {
	var mats, vecs []*val
	for _, v := range vals {
		if v.from != nil || len(v.keys) != 0 || !strings.HasPrefix(v.name, "param:") {
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
	w := t.shape[n-1]
	for _, v := range vals {
		if v.opaque || len(v.shape) != n || !slices.Equal(v.shape[:n-1], t.shape[:n-1]) || v.shape[n-1] <= w || v.shape[n-1]%w != 0 || v.shape[n-1]/w > 4 {
			continue
		}
		for i := 0; i < v.shape[n-1]; i += w {
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: n - 1, Start: i, End: i + w}, args: []*val{v}, out: v.format, label: "chunk"}); c != nil {
				out = append(out, c)
			}
		}
		if len(out) >= 8 {
			break
		}
	}
	return out
}
