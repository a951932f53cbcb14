package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// at is v's value at another step of the run: a captured boundary read
// there, a step input or a target read another way from its perStep, a
// computed value recomputed from its arguments there, anything else
// (parameters, constants, request inputs) as at step 0. ok is false
// when the trace does not hold it.
func (s *synth) at(v *val, step int) ([]float32, bool) {
	if step == 0 {
		return v.data, true
	}
	if v.perStep != nil {
		// not memoised: σ_i is at hand, and a target read another way
		// reads its memoised source
		d := v.perStep(step)
		return d, d != nil
	}
	if m, ok := s.steps[v]; ok {
		if d, ok := m[step]; ok {
			return d, d != nil
		}
	} else {
		s.steps[v] = map[int][]float32{}
	}
	d := s.compute(v, step)
	s.steps[v][step] = d
	return d, d != nil
}

func (s *synth) compute(v *val, step int) []float32 {
	if key := stepKey(v.keys); key != "" {
		key = fmt.Sprintf("s%d%s", step, key[strings.IndexByte(key, '/'):])
		t, err := s.tr.Tensor(key)
		if err != nil {
			return nil
		}
		d, err := t.Float32Rounded()
		if err != nil || len(d) != v.numel() {
			return nil
		}
		return d
	}
	if v.from == nil {
		return v.data
	}
	e := *v.from
	e.args = make([]*val, len(v.from.args))
	for i, a := range v.from.args {
		if a == nil {
			continue
		}
		d, ok := s.at(a, step)
		if !ok {
			return nil
		}
		e.args[i] = &val{shape: a.shape, data: d, format: a.format}
	}
	r, err := s.ev.run(&e)
	if err != nil {
		return nil
	}
	return r.data
}

// invariant reports whether data computed at every step by f equals its
// step-0 value (rel-RMS in fm within tol), in a run of at least two steps.
func (s *synth) invariant(fm precision.Format, f func(step int) ([]float32, bool), tol float64) bool {
	steps := s.tr.Steps()
	if len(steps) < 2 {
		return false
	}
	d0, ok := f(0)
	if !ok {
		return false
	}
	for _, st := range steps[1:] {
		d, ok := f(st)
		if !ok || relRMS(fm, d, d0) > tol {
			return false
		}
	}
	return true
}

// varying reports whether every value changes between steps 0 and 1 (a
// call whose arguments all vary: what it computes that does not vary
// cannot depend on their values, only on their shapes).
func (s *synth) varying(args []*val) bool {
	if len(s.tr.Steps()) < 2 || len(args) == 0 {
		return false
	}
	for _, a := range args {
		d, ok := s.at(a, s.tr.Steps()[1])
		if !ok || relRMS(a.format, d, a.data) == 0 {
			return false
		}
	}
	return true
}

// shapeConstant makes v a constant of the request's shapes when it is
// equal at every step and the call computing it reads only arguments that
// vary; it reports whether it did.
func (s *synth) shapeConstant(v *val, args []*val) bool {
	// a call without tensor arguments computes from settings and shapes
	if len(args) > 0 && !s.varying(args) || len(s.tr.Steps()) < 2 {
		return false
	}
	if !s.invariant(v.format, func(step int) ([]float32, bool) { return s.at(v, step) }, 0) {
		return false
	}
	s.em.constant(v, "equal at every captured step, made where every argument varies: a constant of the request's shapes (a position table)")
	return true
}

// tablesOfShape reports whether RoPE tables may be read as made from the
// request's shape alone, their angles then fitted by a form of a grid or
// a sequence that must reproduce every entry: equal at every captured
// step, or captured in a one-pass trace (an encoder run once: no second
// step to compare, and a table that a handful of read constants
// reproduces entry for entry is no function of the request's values).
func (s *synth) tablesOfShape(vs []*val) bool {
	return len(s.tr.Steps()) < 2 || s.sameEveryStep(vs)
}

// sameEveryStep reports whether every value is equal at each captured
// step (trivially so in a one-pass trace): what a call makes from the
// request's shapes and constants, never from the latents.
func (s *synth) sameEveryStep(vs []*val) bool {
	for _, v := range vs {
		if !s.invariant(v.format, func(st int) ([]float32, bool) { return s.at(v, st) }, 0) {
			return false
		}
	}
	return true
}

// tensorArgs are the call scope's argument values.
func tensorArgs(sc *scope) []*val {
	var out []*val
	for _, v := range sc.vals {
		if sc.arg[v] {
			out = append(out, v)
		}
	}
	return out
}

// constantResidual explains t = a + C, C a constant of the request's
// shapes (a position table added inside a scope whose arguments vary).
func (s *synth) constantResidual(t *val, sc *scope, vals []*val) *val {
	args := tensorArgs(sc)
	everyArgVaries := s.varying(args)
	if !everyArgVaries {
		// some argument is the same at every step (the text): a table is
		// still read off rows joined from the varying ones, where the
		// rows from the others add exactly nothing
		if w := s.joinedResidual(t, vals); w != nil {
			return w
		}
	}
	cands := sameShape(t, vals)
	for _, v := range vals {
		if v.opaque || v.numel() != t.numel() || slices.Equal(v.shape, t.shape) || len(v.shape) > 4 {
			continue
		}
		for _, perm := range permutations(len(v.shape)) {
			pv := v
			if !isIdentity(perm) {
				pv = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "permute"})
			}
			if r := s.reshape(pv, t.shape); r != nil {
				cands = append(cands, r)
			}
		}
	}
	note := "t − a, equal at every captured step inside a scope whose arguments all vary: a table the model adds (a position table)"
	if !everyArgVaries {
		// a scope with constant arguments: only a that varies itself
		// shows, by t − a not varying, that what is added is constant
		cands = slices.DeleteFunc(cands, func(a *val) bool { return !s.varying([]*val{a}) })
		note = "t − a, equal at every captured step while a varies: a table the model adds (a position table)"
	} else {
		for _, j := range s.joinedViews(t, vals) {
			cands = append(cands, j.v)
		}
	}
	return s.tableResidual(t, sc, cands, note)
}

// joinedResidual is constantResidual over rows joined from two values of
// which one varies and one does not: t − join must be zero on the
// constant one's rows.
func (s *synth) joinedResidual(t *val, vals []*val) *val {
	var cands []*val
	for _, j := range s.joinedViews(t, vals) {
		vary := [2]bool{s.varying([]*val{j.parts[0]}), s.varying([]*val{j.parts[1]})}
		if vary[0] == vary[1] {
			continue
		}
		fixed, lo := 0, 0
		if vary[0] {
			fixed, lo = 1, j.parts[0].shape[1]
		}
		hi := lo + j.parts[fixed].shape[1]
		d := t.shape[2]
		zero := true
		for i := lo * d; i < hi*d && zero; i++ {
			zero = t.data[i] == j.v.data[i]
		}
		if zero {
			cands = append(cands, j.v)
		}
	}
	return s.tableResidual(t, nil, cands, "t − a, equal at every captured step and zero on the rows joined from the arguments that do not vary: a table the model adds to the rows that do (a position table)")
}

// tableResidual explains t = a + C for the first candidate a whose
// residual is a parameter window or equal at every step; sc (nil: no
// parameter windows) is the scope whose parameters may hold the table.
func (s *synth) tableResidual(t *val, sc *scope, cands []*val, note string) *val {
	for _, a := range cands {
		r := make([]float32, len(t.data))
		for i := range r {
			r[i] = t.data[i] - a.data[i]
		}
		if sc != nil {
			if crop := s.paramCrop(&val{shape: t.shape, data: r, format: t.format}, t, sc); crop != nil {
				if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, crop}, out: t.format, label: "parameter table"}}); w != nil {
					return w
				}
			}
		}
		ok := s.invariant(t.format, func(step int) ([]float32, bool) {
			tv, ok1 := s.at(t, step)
			av, ok2 := s.at(a, step)
			if !ok1 || !ok2 {
				return nil, false
			}
			d := make([]float32, len(tv))
			for i := range d {
				d[i] = tv[i] - av[i]
			}
			return d, true
		}, 3*tolerance(t.format))
		if !ok || relRMS(t.format, r, t.data) < 1e-3 {
			continue
		}
		s.refineResidual(t, a, r)
		if w := s.gridSinusoid(t, a, r); w != nil {
			return w
		}
		c := &val{shape: slices.Clone(t.shape), data: r, format: f32}
		s.em.constant(c, note)
		if w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{a, c}, out: t.format, label: "constant table"}}); w != nil {
			return w
		}
	}
	return nil
}

// refineResidual narrows a table r = t − a read off a narrow-format
// capture: t holds a + C rounded to bf16 or f16, so one step's t − a is C
// only to half a unit of t. Each step bounds every entry to an interval
// (where f32(a + c) rounds to t); the middle of the intersection over
// the steps is kept where it gives every step's t exactly, step 0's
// difference elsewhere.
func (s *synth) refineResidual(t, a *val, r []float32) {
	f := t.format
	steps := s.tr.Steps()
	if f == f32 || f == precision.F64 || len(steps) < 2 {
		return
	}
	ts, as := make([][]float32, 0, len(steps)), make([][]float32, 0, len(steps))
	for _, st := range steps {
		tv, ok1 := s.at(t, st)
		av, ok2 := s.at(a, st)
		if !ok1 || !ok2 || len(tv) != len(r) || len(av) != len(r) {
			return
		}
		ts, as = append(ts, tv), append(as, av)
	}
	for i := range r {
		lo, hi := math.Inf(-1), math.Inf(1)
		for n := range ts {
			below, above := halfUnits(f, ts[n][i])
			lo = math.Max(lo, float64(ts[n][i])-below-float64(as[n][i]))
			hi = math.Min(hi, float64(ts[n][i])+above-float64(as[n][i]))
		}
		if !(lo < hi) {
			continue
		}
		c := float32((lo + hi) / 2)
		exact := true
		for n := range ts {
			exact = exact && f.Round(as[n][i]+c) == ts[n][i]
		}
		if exact {
			r[i] = c
		}
	}
}

// halfUnits are half the gaps from x to its neighbours in f (bf16 or
// f16): below toward zero and above away from it, signed as x is.
func halfUnits(f precision.Format, x float32) (below, above float64) {
	bits := 8 // bf16's significand
	if f == precision.F16 {
		bits = 11
	}
	if x == 0 {
		return 0, 0 // a zero's neighbours are subnormal: leave it to step 0
	}
	m, e := math.Frexp(math.Abs(float64(x)))
	up := math.Ldexp(1, e-bits) / 2
	down := up
	if m == 0.5 {
		down /= 2 // a power of two: the gap below is half the gap above
	}
	if x < 0 {
		return up, down
	}
	return down, up
}

// stepKey is the first of keys in step 0's scope ("s0/…"), or "".
func stepKey(keys []string) string {
	for _, k := range keys {
		if strings.HasPrefix(k, "s0/") {
			return k
		}
	}
	return ""
}

// paramCrop finds c [1, h·w, D] as a window of a parameter table read as
// a square grid [1, g, g, D] (a learned position table cropped to the
// image), at every offset.
func (s *synth) paramCrop(c, t *val, sc *scope) *val {
	if len(c.shape) != 3 {
		return nil
	}
	d, n := c.shape[2], c.shape[1]
	h := int(math.Round(math.Sqrt(float64(n))))
	if h*h != n {
		return nil
	}
	// the window must match c to t's tolerance relative to t (c is t − a:
	// its rounding noise is t's)
	tol := tolerance(c.format) * rms(t.data) / math.Max(rms(c.data), 1e-30)
	for _, p := range sc.vals {
		if !p.param || len(p.shape) == 0 || p.numel()%d != 0 || p.shape[len(p.shape)-1] != d {
			continue
		}
		rows := p.numel() / d
		g := int(math.Round(math.Sqrt(float64(rows))))
		if g*g != rows || g < h {
			continue
		}
		grid := &val{shape: []int{1, g, g, d}, data: p.data}
		for top := 0; top+h <= g; top++ {
			byRows := &val{shape: []int{1, h, g, d}, data: sliceData(grid, 1, top, top+h)}
			for left := 0; left+h <= g; left++ {
				if relRMS(c.format, sliceData(byRows, 2, left, left+h), c.data) > tol {
					continue
				}
				r := s.reshape(p, []int{1, g, g, d})
				r = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: top, End: top + h}, args: []*val{r}, out: p.format})
				r = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: left, End: left + h}, args: []*val{r}, out: p.format})
				return s.reshape(r, c.shape)
			}
		}
	}
	return nil
}

func rms(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / math.Max(float64(len(x)), 1))
}

// joinedViews are the concatenations, along the rows, of two of vals
// read as rows of t's width ([B, n, D], through a permutation: a patch
// convolution's [B·F, D, h, w] output as tokens) whose rows add up to
// t's: what a table may be added to after the text and image tokens are
// joined (CogVideoX's patch embedding).
// joined is a concatenation joinedViews made and its two pieces.
type joined struct {
	v     *val
	parts [2]*val
}

func (s *synth) joinedViews(t *val, vals []*val) []joined {
	if len(t.shape) != 3 {
		return nil
	}
	b, n, d := t.shape[0], t.shape[1], t.shape[2]
	var views []*val
	for _, v := range vals {
		if v.opaque || v.numel()%(b*d) != 0 || v.numel() >= t.numel() || len(v.shape) > 4 || len(v.shape) < 2 {
			continue
		}
		rows := v.numel() / (b * d)
		for a := range v.shape {
			if v.shape[a] != d {
				continue
			}
			// the width moved last, the other axes in their order: the
			// rows in the value's own order (channels-last)
			perm := append(slices.DeleteFunc(slices.Collect(func(yield func(int) bool) {
				for i := range v.shape {
					if !yield(i) {
						return
					}
				}
			}), func(i int) bool { return i == a }), a)
			pv := v
			if !isIdentity(perm) {
				pv = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "permute"})
			}
			if r := s.reshape(pv, []int{b, rows, d}); r != nil {
				views = append(views, r)
			}
		}
	}
	var out []joined
	for i, x := range views {
		for j, y := range views {
			if i != j && x.shape[1]+y.shape[1] == n {
				if c := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{x, y}, out: t.format, label: "joined rows"}); c != nil {
					out = append(out, joined{v: c, parts: [2]*val{x, y}})
				}
			}
		}
	}
	return out
}
