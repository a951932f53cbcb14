package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// leafFit is what fitting a leaf call found: its kind (what the op is,
// read from shapes and values, never from names) and the evidence.
type leafFit struct {
	kind       string // linear, conv, embedding, norm, sinusoid, rope_table, glue, piecewise, swish
	label      string // piecewise: the fitted form
	act        exec.ActKind
	squared    bool // glue, glu, experts: the activation is squared, f(x)·f(x)
	ungated    bool // experts: each expert reads f(x·w1ᵀ), no up
	norm       exec.NormParams
	rope       exec.RopeTableParams
	timestep   exec.TimestepParams
	freqs      *freqReading // sinusoid: the frequency entries read off the captures
	candidates []semantics.Candidate
	boundary   string
	in         *val          // a linear's input
	unit       *unitEvidence // experts: the gated unit's numbers, where fitted
	// ropeTried: rope_table fitted from ids, every table tried with its
	// score (the margins of its axes and θ)
	ropeTried []ropeTry
	offset    int     // position_sinusoid: the offset added to the positions
	beta      float32 // swish: β of x·σ(β·x)
}

// ropeTry is one RoPE table candidate and its score.
type ropeTry struct {
	p     exec.RopeTableParams
	score float64
}

// leaf explains a call without children: a linear (2-D weight, or a
// [in, out] one), a patch convolution, an embedding table, a norm (1-D
// parameters), a sinusoidal timestep embedding, RoPE tables from
// positions, or — without parameters — any expression over its
// arguments (activations, identities, scalings).
func (s *synth) leaf(c trace.Call, sc *scope, args map[string]*val, outs map[string]*val) error {
	var results []trace.Port
	for _, p := range c.Tensors {
		if trace.IsResult(p.Name) {
			results = append(results, p)
		}
	}
	xs, params := s.callInputs(c, args)
	targets := make([]*val, len(results))
	for i, p := range results {
		t, err := s.capture(p.Key)
		if err != nil {
			return err
		}
		targets[i] = t
	}
	fits := s.fitLeaf(sc, xs, params, targets)
	if read := withoutScalars(params); len(read) < len(params) && slices.Contains(fits, nil) {
		// a one-number parameter the forward need not read (a gate left
		// at its init, a disabled branch's scale): the forms count a
		// call's parameters, so they are tried again without it
		for i, f := range s.fitLeaf(sc, xs, read, targets) {
			if fits[i] == nil {
				fits[i] = f
			}
		}
	}
	if wn := s.weightNormed(params); wn != nil && slices.Contains(fits, nil) {
		// a weight torch's weight_norm hook makes from its gain and
		// direction before each call: the call's parameters hold those two
		for i, f := range s.fitLeaf(sc, xs, wn, targets) {
			if fits[i] == nil {
				fits[i] = f
			}
		}
	}
	roped := false // one record of a call's RoPE tables
	for i, f := range fits {
		if f == nil || f.fit == nil {
			continue
		}
		if f.fit.kind == "linear" {
			s.linears = append(s.linears, f)
		}
		switch {
		case f.fit.kind == "linear" && len(xs) > 0 && xs[0].shape[len(xs[0].shape)-1] > f.shape[len(f.shape)-1]:
			s.mlps = append(s.mlps, mlpRecord{scope: sc.module, boundary: targets[i].origin, x: xs[0]})
		case f.fit.kind == "sinusoid":
			scale := 1.0
			if x := xs[0]; x.from != nil && x.from.op == program.OpMul && !x.request {
				for _, a := range x.from.args {
					if a != nil && a.numel() == 1 && a.from == nil && len(a.keys) == 0 {
						scale = float64(a.data[0])
					}
				}
			}
			s.sinusoids = append(s.sinusoids, sinusoidRecord{scope: sc.module, boundary: targets[i].origin, fit: f.fit, inputScale: scale, out: f})
		case f.fit.kind == "position_sinusoid":
			s.positionTables = append(s.positionTables, sinusoidRecord{scope: sc.module, boundary: targets[i].origin, fit: f.fit, out: f})
		case f.fit.kind == "norm":
			s.norms = append(s.norms, normRecord{scope: sc.module, boundary: targets[i].origin, fit: f.fit})
		case f.fit.kind == "rope_table" && !roped:
			s.ropes = append(s.ropes, ropeRecord{scope: sc.module, boundary: targets[i].origin, fit: f.fit})
			roped = true
		}
	}
	for i, p := range results {
		if fits[i] != nil {
			outs[p.Name] = fits[i]
			continue
		}
		t := targets[i]
		if s.shapeConstant(t, xs) {
			outs[p.Name] = t
			continue
		}
		t.opaque = true
		t.unsearched = s.hurried()
		s.opaque = append(s.opaque, t)
		outs[p.Name] = t
	}
	return nil
}

// leafScope is a scope of a leaf call's arguments and parameters alone.
func leafScope(sc *scope, xs, params []*val) *scope {
	l := sc.emptied()
	for _, x := range xs {
		l.add(x, false)
		l.arg[x] = true
	}
	for _, p := range params {
		l.add(p, false)
	}
	return l
}

// errOf is v's rel-RMS error against t (+Inf for no value).
func errOf(v, t *val) float64 {
	if v == nil {
		return math.Inf(1)
	}
	return relRMS(t.format, v.data, t.data)
}

// withoutScalars is params less those of one number.
func withoutScalars(params []*val) []*val {
	return slices.DeleteFunc(slices.Clone(params), func(p *val) bool { return p.numel() == 1 })
}

// fitLeaf returns, per target, the explained value (nil: not explained).
func (s *synth) fitLeaf(sc *scope, xs, params []*val, targets []*val) []*val {
	out := make([]*val, len(targets))
	if len(targets) == 1 && len(xs) == 0 && len(params) == 1 && isMatrix(params[0]) {
		// a call given only the request's shape: a position table's rows
		f := s.fitLeadingRows(params[0], targets[0])
		if f == nil {
			f = s.fitGatheredEntries(params[0], targets[0])
		}
		if f == nil {
			f = s.fitResizedRows(params[0], targets[0])
		}
		if f != nil {
			out[0] = adopt(targets[0], f)
		}
		return out
	}
	if len(targets) == 1 && len(xs) == 0 && len(params) == 1 && len(params[0].shape) > 2 {
		// the same, the table held with leading axes of one ([1, 1, L, C])
		if f := s.fitResizedRows(params[0], targets[0]); f != nil {
			out[0] = adopt(targets[0], f)
			return out
		}
	}
	if len(targets) == 1 && len(xs) >= 1 {
		t := targets[0]
		fit := s.fitGRN(xs, params, t) // nil but for per-channel parameters [1, .., C] of a same-shape result
		switch {
		case fit != nil:
		case len(params) == 0:
			fit = s.fitSinusoid(xs[0], t)
			if fit == nil {
				fit = s.fitPositionSinusoid(xs[0], t)
			}
			if fit == nil {
				fit = s.idsPositionSinusoid(xs[0], t)
			}
			if fit == nil {
				fit = s.fitFourierFeatures(xs[0], t)
			}
			if fit == nil {
				fit = s.fitComplexRope(xs, t)
			}
			if fit == nil {
				fit = s.fitRotationRope(xs, t)
			}
			if fit == nil {
				fit = s.fitWeightNorm(xs, t)
			}
			if fit == nil {
				fit = s.fitMaxPool(xs[0], t)
			}
			if fit == nil {
				fit = s.fitAvgPool(xs[0], t)
			}
			if fit == nil {
				fit = s.fitResample(xs[0], t)
			}
			// windows torch.nn names: adaptive max pools to sizes that do
			// not divide, power-average pools, unfold and fold
			for _, try := range []func(x, t *val) *val{s.fitAdaptiveMaxPool, s.fitLPPool, s.fitUnfold, s.fitFold} {
				if fit == nil {
					fit = try(xs[0], t)
				}
			}
			if fit == nil {
				fit = s.glueWithinBudget(t, sc)
			}
			// The forms below are tried where glue fails, or where it is
			// only loose: in a narrow format ReLU is within tolerance of a
			// leaky ReLU of slope 0.01, and the tighter form must win.
			for _, try := range []func() *val{
				func() *val { return s.fitPiecewise(xs[0], t) },
				// a table of RoPE angles (cos and sin taken by its
				// reader): tried where every other form fails
				func() *val { return s.fitAngleRope(xs, t) },
				func() *val { return s.fitPackedRope(xs, t) },
				// a rotary module that keeps its tables (buffers): solved
				// from its argument and result, then explained
				func() *val { return s.fitModuleRope(xs, t, sc) },
				func() *val { return s.fitSwish(xs[0], t) },
				func() *val { return s.fitComposedAct(xs[0], t) },
				// x with a function of itself or of −x (logsigmoid,
				// tanhshrink, softsign), a clamp, a shrink
				func() *val { return s.fitSignedAct(xs[0], t) },
				// a group or instance norm without γ and β over a
				// channels-first map; a fixed filter over a sequence (a
				// resampler's buffer): only where nothing else came near
				func() *val {
					if fit != nil {
						return nil
					}
					return s.channelsFirstNorm(xs[0], nil, t)
				},
				func() *val {
					if fit != nil {
						return nil
					}
					return s.fixedFilter1D(xs[0], t)
				},
				func() *val {
					if fit != nil {
						return nil
					}
					return s.fixedUpFilter1D(xs[0], t)
				},
				func() *val {
					if fit != nil {
						return nil
					}
					return s.fixedFilter2D(xs[0], t)
				},
				// a fixed linear map on blocks of each channel (a wavelet
				// patcher and its inverse): only where nothing else came near
				func() *val {
					if fit != nil {
						return nil
					}
					return s.fixedBlockMap(xs[0], t)
				},
				func() *val {
					if fit != nil {
						return nil
					}
					return s.fixedBlockUnmap(xs[0], t)
				},
			} {
				if fit != nil && relRMS(t.format, fit.data, t.data) <= looseFloor(t.format) {
					break
				}
				if v := try(); v != nil && (fit == nil || relRMS(t.format, v.data, t.data) <= relRMS(t.format, fit.data, t.data)/4) {
					fit = v
				}
			}
			if fit == nil {
				// a sinusoid table of positions made from the argument's
				// shape alone (a relative-offset table's)
				fit = s.shapePositionSinusoid(xs[0], t)
			}
		case isMatrix(params[0]) && slices.ContainsFunc(xs, (*val).integral):
			// the ids may be any integer argument (a mask may come first)
			for _, x := range xs {
				if x.integral() {
					if fit = s.fitEmbedding(x, params, t); fit != nil {
						break
					}
				}
			}
		case isMatrix(params[0]):
			fit = s.fitLinear(xs[0], params, t)
			if fit == nil {
				fit = s.fitGroupedLinear(xs[0], params, t)
			}
			if fit == nil {
				fit = s.fitPackedAttention(sc.module, xs, params, t)
			}
			if fit == nil {
				// relative logits of the queries over its tables (a
				// position module: BoTNet's PosEmbedRel)
				fit = s.queryBiasOf(t, leafScope(sc, xs, params))
			}
		case expertParams(params):
			fit = s.fitExperts(xs, params, t)
		case len(params[0].shape) == 3 && params[0].shape[2] == 1:
			fit = s.fitPointConv(xs[0], params, t)
		case len(params[0].shape) == 3:
			if fit = s.fitConv1D(xs[0], params, t); fit == nil {
				fit = s.fitConvBlocks(xs[0], params, t)
			}
			if fit == nil {
				fit = s.fitConvTransposed(xs[0], params, t)
			}
			if fit == nil {
				// overlapping windows along the sequence
				fit = s.fitConvTransposed2D(xs[0], params, t)
			}
			if fit == nil {
				fit = s.fitModePaddedConv(xs[0], params, t)
			}
		case len(params[0].shape) >= 4:
			fit = s.leafConv(sc.module, xs, params, t)
		case len(params) == 1 && len(params[0].shape) == 1 && len(t.shape) == 2 && t.shape[1] == 2*params[0].numel():
			fit = s.fitFourier(xs[0], params[0], t)
		case allVectors(params):
			fit = s.fitNorm(xs[0], params, t)
			if fit == nil && len(xs) == 1 {
				// a scale and a shift of the call's own (a learnable
				// affine block): before glue's searches
				fit = s.fitParamAffine(xs[0], params, t)
			}
			if e := errOf(fit, t); e > looseFloor(t.format) {
				// a norm within a narrow format's tolerance only: rows
				// whose RMS is near 1 make rms_norm(x)·γ look like x·γ
				// (a LayerScale at random weights); glue's forms win
				// where a quarter as far
				if v := s.glueWithinBudget(t, sc); v != nil && errOf(v, t) <= e/4 {
					fit = v
				}
			}
		}
		if fit == nil && len(xs) == 2 && allVectors(params) {
			fit = s.fitGatedNorm(xs, params, t)
		}
		if fit == nil && len(params) == 1 && len(xs) == 1 {
			fit = s.fitAttentionPool(sc.module, xs[0], params, t)
		}
		if fit == nil && len(xs) == 1 && len(params) > 0 {
			// scalar parameters of a learned activation
			fit = s.fitSignSplit(xs[0], params, t)
		}
		if fit == nil && len(xs) == 1 && len(params) == 1 {
			// a learned slope of the negative side
			fit = s.fitPReLU(xs[0], params[0], t)
		}
		if fit == nil && len(xs) == 1 && len(params) == 1 && len(params[0].shape) == 1 {
			// a bias of its own added before a fixed activation (a fused
			// leaky ReLU)
			fit = s.biasedPiecewise(xs[0], params[0], t)
		}
		if cols := s.channelColumns(params, xs[0]); fit == nil && len(xs) == 1 && cols != nil {
			// per-channel parameters kept as columns ([C, 1, 1], [1, C,
			// 1]): a norm over the channels, a learned periodic activation
			if fit = s.fitNorm(xs[0], cols, t); fit == nil {
				fit = s.fitSnake(xs[0], params, t)
			}
		}
		if fit == nil && len(params) > 0 {
			// none of the parameterised leaves: an expression over the
			// arguments and the parameters (a bias added, say)
			fit = s.glueWithinBudget(t, sc)
		}
		if fit != nil {
			out[0] = adopt(t, fit)
		}
		return out
	}
	if len(targets) >= 2 && len(xs) == 1 && len(params) >= 2 {
		// a recurrent layer: its output, then its final states h_n (c_n,
		// the LSTM's cells, no op returns: left to the trace)
		if y, r := s.fitRecurrent(xs[0], params, targets[0]); y != nil {
			out[0] = adopt(targets[0], y)
			if hn := s.finalStates(r.each, r.dirs, targets[1]); hn != nil {
				out[1] = adopt(targets[1], hn)
			}
			r.scope = sc.module
			s.recurrents = append(s.recurrents, r)
			return out
		}
	}
	if len(targets) == 2 && len(xs) >= 1 && len(params) > 0 && isMatrix(params[0]) && len(targets[1].shape) == 3 {
		// nn.MultiheadAttention with need_weights: the output and the
		// head-averaged weights [B, L, S], which nothing reads
		if a := s.fitPackedAttention(sc.module, xs, params, targets[0]); a != nil {
			out[0] = adopt(targets[0], a)
			return out
		}
	}
	if (len(targets) == 3 || len(targets) == 2) && routerParams(params) && len(xs) >= 1 {
		if r := s.fitRouter(xs[0], params, targets); r != nil {
			for i := range targets {
				out[i] = adopt(targets[i], r[i])
			}
			return out
		}
	}
	if len(targets) == 2 && len(params) == 0 {
		if cos, sin := s.fitRopeTable(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		if cos, sin := s.fitFreeRope(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		if cos, sin := s.fitRopeOnRanges(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		if cos, sin := s.fitLearnedRope(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		// tables made from the request's shape alone: positions on a grid
		if s.varying(xs) && s.invariant(targets[0].format, func(st int) ([]float32, bool) { return s.at(targets[0], st) }, 0) {
			if cos, sin := s.fitGridRope(targets[0], targets[1]); cos != nil {
				out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
				return out
			}
		}
		// float coordinates the model makes from the grid of sizes it is
		// handed as numbers (a coordinate map scaling each axis)
		if s.varying(xs) && sc.call.Scalars != nil && s.invariant(targets[0].format, func(st int) ([]float32, bool) { return s.at(targets[0], st) }, 0) {
			if cos, sin := s.fitShapeCoordRope(sc.call.Scalars, targets[0], targets[1]); cos != nil {
				out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
				return out
			}
		}
		// ids of several columns turning one frequency ladder, each
		// frequency by a column of its own (interleaved, sectioned)
		if cos, sin := s.fitAxisMapRope(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		// the same ladder, its pairs in another order than the ladder's
		// (each axis's frequencies interleaved in the ladder, laid out
		// axis by axis)
		if cos, sin := s.fitPairOrderRope(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		// float coordinates through an affine map times a ladder read
		// off the angles (bounds reduced by their mean, still channels)
		if cos, sin := s.fitCoordRope(xs, targets[0], targets[1]); cos != nil {
			out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
			return out
		}
		// fractional coordinates made from the request's shape alone (a
		// grid's cells' centres or linspace(−1, 1) per axis), the call
		// handed only the request: a ladder read off the angles
		if s.varying(xs) && s.invariant(targets[0].format, func(st int) ([]float32, bool) { return s.at(targets[0], st) }, 0) || len(s.tr.Steps()) < 2 {
			if cos, sin := s.fitGridCoordRope(targets[0], targets[1]); cos != nil {
				out[0], out[1] = adopt(targets[0], cos), adopt(targets[1], sin)
				return out
			}
		}
	}
	if len(params) == 0 && len(targets) <= 4 {
		// tables made without ids among the arguments (the same at every
		// step: from the request's shapes and constants): ids read back
		var tabs []*val
		var at []int
		for i, t := range targets {
			if s.sameEveryStep([]*val{t}) {
				tabs, at = append(tabs, t), append(at, i)
			}
		}
		for k, f := range s.fitReadRope(tabs) {
			if f != nil {
				out[at[k]] = adopt(tabs[k], f)
			}
		}
	}
	for i, t := range targets {
		// with parameters: a module of several results that no
		// parameterised leaf explains (a table added to a projection,
		// chunked): each result an expression over its arguments and
		// parameters
		if out[i] == nil {
			if v := s.glueWithinBudget(t, sc); v != nil {
				out[i] = adopt(t, v)
			}
		}
	}
	return out
}

// adopt gives target's reference data the binding of the fitted value.
func adopt(target, fit *val) *val {
	if fit.from == nil && fit.name != "" {
		fit.keys = append(fit.keys, target.keys...)
		return fit
	}
	return &val{shape: target.shape, data: target.data, format: target.format, origin: target.origin,
		from: fit.from, name: fit.name, keys: append(slices.Clone(fit.keys), target.keys...), seq: target.seq, fit: fit.fit, intType: target.intType}
}

func isMatrix(v *val) bool { return v != nil && len(v.shape) == 2 }

func allVectors(vs []*val) bool {
	for _, v := range vs {
		if v == nil || len(v.shape) != 1 {
			return false
		}
	}
	return len(vs) > 0 && len(vs) <= 2
}

// integral reports whether every value is an integer (token ids,
// positions, a mask's 0 and −∞ or the format's lowest) that says so: past
// 2^24 every f32 is whole, and in a narrow format every value past
// 2^(its significand bits) is, so activations grown that large (a deep
// network without residual norms) are not ids. A mask's fill (past 1e30)
// still counts. A value of many elements is integral in a narrow format
// only where some nonzero entry lies below that bound or is a mask's fill
// (a mask of 0 and −∞, or of 0 and bf16's lowest −3.39·10³⁸, alone: no
// activation is that).
func (v *val) integral() bool {
	small := false
	bound := float64(wholeBound(v.format))
	for _, x := range v.data {
		a := math.Abs(float64(x))
		if x != float32(math.Trunc(float64(x))) || a >= 1<<24 && a < 1e30 {
			return false
		}
		small = small || x != 0 && (a < bound || a >= 1e30)
	}
	return len(v.data) > 0 && (small || v.intType || len(v.data) < 64 || bound == 1<<24 || slices.Max(v.data) == 0 && slices.Min(v.data) == 0)
}

// wholeBound is the magnitude from which every value of f is a whole
// number: 2^(significand bits), 2^24 for f32 and wider.
func wholeBound(f precision.Format) int {
	switch f {
	case precision.BF16:
		return 1 << 8
	case precision.F16:
		return 1 << 11
	}
	return 1 << 24
}

// tolerance is the rel-RMS under which a candidate reproduces a value of
// format f: a few roundings of the format, far below what a wrong
// candidate leaves (a wrong factor leaves ≥ 1e-2 in every planted and
// conformance case).
func tolerance(f precision.Format) float64 {
	switch f {
	case precision.BF16:
		return 1.5e-2
	case precision.F16:
		return 2e-3
	}
	return 1e-4
}

// bestFit is best's winner labelled as a leaf fit of kind, every
// candidate's score kept as its evidence; nil where none reproduces target.
func (s *synth) bestFit(target *val, cands []*expr, kind string) *val {
	v, ev := s.best(target, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: kind, candidates: ev}
	return v
}

// best scores candidates against target and returns the winner when it
// reproduces target, with every candidate's score.
func (s *synth) best(target *val, cands []*expr) (*val, []semantics.Candidate) {
	var win *val
	bestScore := math.Inf(1)
	var ev []semantics.Candidate
	type scored struct {
		v  *val
		sc float64
	}
	var within []scored
	for _, e := range cands {
		v, sc := s.ev.score(e, target)
		ev = append(ev, semantics.Candidate{Value: e.label, Score: finite(sc)})
		if sc < bestScore {
			win, bestScore = v, sc
		}
		if v != nil && sc <= tolerance(target.format) {
			within = append(within, scored{v, sc})
		}
	}
	if win == nil || bestScore > tolerance(target.format) {
		return nil, ev
	}
	if !s.everyStep(win, target, tolerance(target.format)) {
		// a small target matched at step 0 by coincidence (silu(0) = 0):
		// the best candidate that holds at every step, if any
		slices.SortStableFunc(within, func(a, b scored) int { return cmpFloat(a.sc, b.sc) })
		win = nil
		for _, c := range within {
			if s.everyStep(c.v, target, tolerance(target.format)) {
				win = c.v
				break
			}
		}
		if win == nil {
			return nil, ev
		}
	}
	return win, ev
}

// finite keeps a score JSON can hold.
func finite(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return math.MaxFloat64
	}
	return x
}

func (s *synth) fitLinear(x *val, params []*val, t *val) *val {
	w := params[0]
	var bias *val
	if len(params) > 1 && len(params[1].shape) == 1 {
		bias = params[1]
	}
	in, outW := x.shape[len(x.shape)-1], t.shape[len(t.shape)-1]
	var cands []*expr
	if w.shape[0] == outW && w.shape[1] == in {
		cands = append(cands, &expr{op: program.OpLinear, args: []*val{x, w, bias}, out: t.format, label: "linear"})
	}
	if w.shape[0] == in && w.shape[1] == outW {
		// a weight stored [in, out] (Conv1D)
		if wt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{w}, out: w.format, label: "[in, out] weight"}); wt != nil {
			cands = append(cands, &expr{op: program.OpLinear, args: []*val{x, wt, bias}, out: t.format, label: "linear [in, out]"})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, ev := s.best(t, cands)
	if v == nil && t.format == precision.F32 && s.em.act != precision.F32 && t.numel() >= 16 && representable(t, s.em.act) {
		// an f32 result the activations' format holds exactly: the linear
		// computed in that format, then cast (F.linear(x, w).float(), a
		// router's logits), tried where the f32 linear fails
		proxy := *t
		proxy.format = s.em.act
		var narrow []*expr
		for _, c := range cands {
			n := *c
			n.out = s.em.act
			narrow = append(narrow, &n)
		}
		if w, nev := s.best(&proxy, narrow); w != nil {
			ev = append(ev, nev...)
			v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: precision.F32}, args: []*val{w}, out: precision.F32, label: "cast"})
		}
	}
	if v != nil {
		v.fit = &leafFit{kind: "linear", candidates: ev, in: x}
	}
	return v
}

// fitLeadingRows explains t [.., n, C], a call's result that no tensor
// argument feeds (a module handed the input's shape), as rows c…c+n−1 of
// the table [R, C]: a position table read at positions made from the
// request's shape (RoFormer's sinusoidal table, an nn.Embedding read by
// arange). The offset c is read off the values (the first rows some
// models reserve).
func (s *synth) fitLeadingRows(table, t *val) *val {
	rows, cols := table.shape[0], table.shape[1]
	if len(t.shape) < 2 || t.shape[len(t.shape)-1] != cols || t.numel()%cols != 0 {
		return nil
	}
	n := t.shape[len(t.shape)-2]
	if t.numel() != n*cols || n < 2 {
		return nil // one copy of the rows only: a batch of them is another form
	}
	for c := 0; c <= min(16, rows-n); c++ {
		if relRMS(t.format, table.data[c*cols:(c+n)*cols], t.data) > tolerance(t.format) {
			continue
		}
		pos := &val{shape: []int{n}, data: make([]float32, n), format: precision.F32, origin: t.origin + "/positions"}
		for i := range pos.data {
			pos.data[i] = float32(c + i)
		}
		s.em.iota(pos)
		g := &expr{op: program.OpGather, args: []*val{table, pos}, out: table.format, label: fmt.Sprintf("table rows %d…%d", c, c+n-1)}
		if w := s.reshape(s.derive(g), t.shape); w != nil && relRMS(t.format, w.data, t.data) <= tolerance(t.format) {
			return w
		}
		return nil
	}
	return nil
}

func (s *synth) fitEmbedding(ids *val, params []*val, t *val) *val {
	table := params[0]
	if t.shape[len(t.shape)-1] != table.shape[1] {
		return nil
	}
	g := &expr{op: program.OpGather, args: []*val{table, ids}, out: table.format, label: "table"}
	v, ev := s.best(t, []*expr{g})
	if v == nil {
		// rows at ids + c (a learned position table whose first rows are
		// reserved: OPT's offset of 2)
		if c := rowOffset(table, ids, t); c != 0 {
			if shifted := s.derive(&expr{op: program.OpAdd, args: []*val{ids, s.constant(float64(c))}, out: ids.format, label: "offset"}); shifted != nil {
				g = &expr{op: program.OpGather, args: []*val{table, shifted}, out: table.format, label: fmt.Sprintf("table at ids%+d", c)}
				v, ev = s.best(t, []*expr{g})
			}
		}
	}
	if v == nil {
		// rows times a constant (an embedding scale such as √hidden)
		if rows := s.reshape(s.derive(g), t.shape); rows != nil {
			if c, ok := fitScalar(rows, t); ok {
				v, ev = s.best(t, []*expr{{op: program.OpMul, args: []*val{rows, s.constant(c)}, out: t.format, label: fmt.Sprintf("table × %g", c)}})
			}
		}
	}
	if v != nil {
		v.fit = &leafFit{kind: "embedding", candidates: ev}
		if !slices.Equal(v.shape, t.shape) {
			v = s.derive(&expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{v}, out: v.format})
		}
	}
	return v
}

// fitNorm searches the norm's kind, ε and γ offset, and which 1-D
// parameter is γ.
func (s *synth) fitNorm(x *val, params []*val, t *val) *val {
	if !slices.Equal(x.shape, t.shape) {
		return s.headsNorm(x, params, t)
	}
	last := x.shape[len(x.shape)-1]
	assign := [][2]*val{{params[0], nil}}
	if len(params) == 2 {
		assign = [][2]*val{{params[0], params[1]}, {params[1], params[0]}}
	}
	var cands []*expr
	for _, gb := range assign {
		g, b := gb[0], gb[1]
		width := g.shape[0]
		if last%width != 0 || (b != nil && b.shape[0] != width) {
			continue
		}
		group := 0
		if width != last {
			group = width
		}
		for _, kind := range []exec.NormKind{exec.NormLayer, exec.NormRMS} {
			if kind == exec.NormRMS && b != nil {
				continue
			}
			for _, off := range []float32{0, 1} {
				for _, eps := range epsCandidates(kind, x, g, b, off, group, t) {
					p := exec.NormParams{Kind: kind, Eps: eps, Offset: off, Group: group}
					cands = append(cands, &expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{x, g, b}, out: t.format,
						label: fmt.Sprintf("%s eps=%g offset=%g", kind, eps, off)})
				}
			}
		}
	}
	v, ev := s.bestNorm(t, cands)
	if v != nil {
		v = s.simplestEps(v, t)
		v.fit = &leafFit{kind: "norm", norm: v.from.attrs.Norm, candidates: ev}
		return v
	}
	// the norms over other axes, then a batch norm at its initial
	// statistics: the first near exact wins; where each is only loosely
	// within tolerance (bf16: a group norm of one group over a conv
	// output of near-unit statistics comes within it), the closest
	var loose *val
	var looseRec *batchNormRecord
	for _, try := range []func() (*val, *batchNormRecord){
		func() (*val, *batchNormRecord) { return s.groupedNorm(x, params, t), nil },
		func() (*val, *batchNormRecord) { return s.channelsFirstNorm(x, params, t), nil },
		func() (*val, *batchNormRecord) { return s.perPositionNorm(x, params, t), nil },
		func() (*val, *batchNormRecord) {
			v, rec := s.initialBatchNormFit(x, params, t)
			return v, &rec
		},
		// an RMS norm with a bias as well (diffusers' RMSNorm(bias=True):
		// DC-AE's), last: a batch norm at random statistics comes near it
		func() (*val, *batchNormRecord) { return s.biasedRMSNorm(x, params, t), nil },
	} {
		v, rec := try()
		if v == nil {
			continue
		}
		e := relRMS(t.format, v.data, t.data)
		if loose == nil || e < relRMS(t.format, loose.data, t.data) {
			loose, looseRec = v, rec
		}
		if e <= looseFloor(t.format) {
			break
		}
	}
	if looseRec != nil {
		s.batchNorms = append(s.batchNorms, *looseRec)
	}
	return loose
}

// biasedRMSNorm explains t as an RMS norm of x over its last axis (or
// groups of it) times γ plus β, the two vectors in either order.
func (s *synth) biasedRMSNorm(x *val, params []*val, t *val) *val {
	if len(params) != 2 || !slices.Equal(x.shape, t.shape) {
		return nil
	}
	last := x.shape[len(x.shape)-1]
	var cands []*expr
	for _, gb := range [][2]*val{{params[0], params[1]}, {params[1], params[0]}} {
		g, b := gb[0], gb[1]
		if len(g.shape) != 1 || len(b.shape) != 1 || last%g.shape[0] != 0 || b.shape[0] != g.shape[0] {
			continue
		}
		group := 0
		if g.shape[0] != last {
			group = g.shape[0]
		}
		for _, off := range []float32{0, 1} {
			for _, eps := range epsCandidates(exec.NormRMS, x, g, b, off, group, t) {
				p := exec.NormParams{Kind: exec.NormRMS, Eps: eps, Offset: off, Group: group}
				cands = append(cands, &expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{x, g, b}, out: t.format,
					label: fmt.Sprintf("rms eps=%g offset=%g, a bias", eps, off)})
			}
		}
	}
	v, ev := s.bestNorm(t, cands)
	if v == nil {
		return nil
	}
	v = s.simplestEps(v, t)
	v.fit = &leafFit{kind: "norm", norm: v.from.attrs.Norm, candidates: ev}
	return v
}

// channelsFirstNorm explains a group norm over x [B, C, ...] with the
// channels first (torch's GroupNorm, an audio encoder's first conv layer):
// G groups of C/G channels, each normalised over its channels and every
// position, then γ and β per channel. x is read as [B, G, (C/G)·rest], a
// layer norm without γ over the last axis, read back, then times γ and
// plus β laid along the channels; every G dividing C is tried.
func (s *synth) channelsFirstNorm(x *val, params []*val, t *val) *val {
	if len(x.shape) < 3 || !slices.Equal(x.shape, t.shape) || len(params) > 2 {
		return nil
	}
	b, c := x.shape[0], x.shape[1]
	rest := x.numel() / (b * c)
	if len(params) == 0 {
		return s.channelsFirstPlainNorm(x, t)
	}
	col := append([]int{c}, slices.Repeat([]int{1}, len(x.shape)-2)...)
	g := params[0]
	var beta *val
	if !slices.Equal(g.shape, []int{c}) {
		return nil
	}
	if len(params) == 2 {
		if beta = params[1]; !slices.Equal(beta.shape, []int{c}) {
			return nil
		}
	}
	gc, bc := s.reshape(g, col), s.reshape(beta, col)
	var cands []*expr
	var inner []exec.NormParams
	for groups := c; groups >= 1; groups-- {
		if c%groups != 0 {
			continue
		}
		xr := s.reshape(x, []int{b, groups, c / groups * rest})
		for _, eps := range commonEps {
			for _, a := range groupNormArithmetics(t.format) {
				n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormLayer, Eps: eps}}, args: []*val{xr, nil, nil}, out: a.inner, round: a.round,
					label: fmt.Sprintf("layer eps=%g over %d groups", eps, groups)})
				label := fmt.Sprintf("group norm of %d groups, eps=%g, channels first%s", groups, eps, a.label)
				if beta == nil {
					cands = append(cands, &expr{op: program.OpMul, args: []*val{s.reshape(n, x.shape), gc}, out: t.format, label: label})
					inner = append(inner, exec.NormParams{Kind: exec.NormLayer, Eps: eps})
					continue
				}
				m := s.derive(&expr{op: program.OpMul, args: []*val{s.reshape(n, x.shape), gc}, out: a.inner, label: "times γ per channel"})
				if m == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpAdd, args: []*val{m, bc}, out: t.format, label: label})
				inner = append(inner, exec.NormParams{Kind: exec.NormLayer, Eps: eps})
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "norm", norm: inner[slices.Index(cands, v.from)], candidates: ev}
	return v
}

// channelsFirstPlainNorm is channelsFirstNorm without γ and β (a
// GroupNorm made with affine=False, an InstanceNorm: G = C): over x
// [B, C, ...] read as [B, G, (C/G)·rest], a layer norm without γ over
// the last axis, read back; every G dividing C is tried, and in a
// narrow format PyTorch's CUDA arithmetic too (statistics rounded, the
// value rounded once).
func (s *synth) channelsFirstPlainNorm(x, t *val) *val {
	b, c := x.shape[0], x.shape[1]
	rest := x.numel() / (b * c)
	if rest < 2 || !standardised(t, b) {
		return nil
	}
	var cands []*expr
	var inner []exec.NormParams
	for groups := c; groups >= 1; groups-- {
		if c%groups != 0 {
			continue
		}
		xr := s.reshape(x, []int{b, groups, c / groups * rest})
		for _, eps := range commonEps {
			for _, a := range groupNormArithmetics(t.format) {
				n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormLayer, Eps: eps}}, args: []*val{xr, nil, nil}, out: t.format, round: a.round,
					label: fmt.Sprintf("layer eps=%g over %d groups", eps, groups)})
				if n == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(x.shape)}, args: []*val{n}, out: t.format,
					label: fmt.Sprintf("group norm of %d groups, eps=%g, channels first, no affine%s", groups, eps, a.label)})
				inner = append(inner, exec.NormParams{Kind: exec.NormLayer, Eps: eps})
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "norm", norm: inner[slices.Index(cands, v.from)], candidates: ev}
	return v
}

// standardised reports whether each of t's b samples has mean near 0 and
// variance near 1, as a norm over equal groups of it leaves them (the
// groups' means are 0 and their variances 1 less ε's share): a cheap
// test before any group count is tried.
func standardised(t *val, b int) bool {
	n := len(t.data) / b
	for i := range b {
		var sum, sq float64
		for _, v := range t.data[i*n : (i+1)*n] {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		mean := sum / float64(n)
		if math.Abs(mean) > 1e-2 || math.Abs(sq/float64(n)-mean*mean-1) > 0.1 {
			return false
		}
	}
	return true
}

// groupNormArithmetic is one way a group norm's steps are stored: the
// normalised value and its product with γ in inner, the norm's rounding
// points round.
type groupNormArithmetic struct {
	inner precision.Format
	round exec.Round
	label string
}

// groupNormArithmetics are the ways a group norm of a map in format f is
// computed: as primitives, each stored in f; and, in a narrow format, as
// PyTorch's CUDA kernel does, the statistics rounded to f and read back,
// x̂·γ + β in f32, rounded once (exec.RoundMoments).
func groupNormArithmetics(f precision.Format) []groupNormArithmetic {
	out := []groupNormArithmetic{{inner: f}}
	if f != precision.F32 {
		out = append(out, groupNormArithmetic{inner: precision.F32, round: exec.RoundMoments, label: " (statistics in " + f.String() + ", affine in f32)"})
	}
	return out
}

// groupedNorm explains t as an RMS norm whose statistics are over groups
// of the last axis while its γ spans the whole axis (a grouped RMSNorm,
// Mamba-2's gated norm of n_groups > 1): each group normalised without γ
// (exec.NormParams.Group), then times γ, each step rounded to t's format
// as torch's weight · x̂.to(dtype) is. Group sizes are the axis's divisors;
// tried once the norm over the whole axis failed.
func (s *synth) groupedNorm(x *val, params []*val, t *val) *val {
	last := x.shape[len(x.shape)-1]
	g := params[0]
	if len(params) != 1 || len(g.shape) != 1 || g.shape[0] != last {
		return nil
	}
	var cands []*expr
	var inner []exec.NormParams
	for size := last / 2; size > 1; size-- {
		if last%size != 0 {
			continue
		}
		for _, eps := range commonEps {
			p := exec.NormParams{Kind: exec.NormRMS, Eps: eps, Group: size}
			n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{x, nil, nil}, out: t.format,
				label: fmt.Sprintf("rms over groups of %d, eps=%g", size, eps)})
			if n == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpMul, args: []*val{n, g}, out: t.format, label: fmt.Sprintf("rms eps=%g offset=0 group=%d, times γ", eps, size)})
			inner = append(inner, p)
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "norm", norm: inner[slices.Index(cands, v.from)], candidates: ev}
	return v
}

// headsNorm explains t [.., H·d] as a norm of x [.., H, d] over each
// head's d (statistics per head), the heads joined, then times γ [H·d]
// (xLSTM's multi-head LayerNorm): x read in t's shape, normalised over
// groups of d without γ (exec.NormParams.Group), rounded to t's format,
// then times γ, as torch's weight · x̂.to(dtype) after the reshape.
func (s *synth) headsNorm(x *val, params []*val, t *val) *val {
	n := len(x.shape)
	if len(params) != 1 || n < 2 || len(t.shape) != n-1 || x.numel() != t.numel() || !slices.Equal(x.shape[:n-2], t.shape[:n-2]) {
		return nil
	}
	g, d := params[0], x.shape[n-1]
	last := t.shape[n-2]
	if !slices.Equal(g.shape, []int{last}) || x.shape[n-2]*d != last || d == last {
		return nil
	}
	xr := s.reshape(x, t.shape)
	var cands []*expr
	var inner []exec.NormParams
	for _, kind := range []exec.NormKind{exec.NormLayer, exec.NormRMS} {
		for _, eps := range commonEps {
			p := exec.NormParams{Kind: kind, Eps: eps, Group: d}
			nv := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{xr, nil, nil}, out: t.format,
				label: fmt.Sprintf("%s over each head's %d, eps=%g", kind, d, eps)})
			if nv == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpMul, args: []*val{nv, g}, out: t.format, label: fmt.Sprintf("%s eps=%g offset=0 group=%d, times γ", kind, eps, d)})
			inner = append(inner, p)
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "norm", norm: inner[slices.Index(cands, v.from)], candidates: ev}
	return v
}

// simplestEps keeps the winning norm but takes the first ε of its
// candidates (common values, then measured ones with more digits) that
// scores within 10% of the best: ε's last digits are below what f32
// rounding shows, and the document should not claim them.
//
// In a narrow format (bf16, f16) the rel-RMS of ε's candidates ties
// while the values rounded exactly do not: there the candidate within 10%
// that reproduces the most captured values exactly is kept (the first of
// equals).
func (s *synth) simplestEps(v, t *val) *val {
	w := v.from
	best := relRMS(t.format, v.data, t.data)
	p := w.attrs.Norm
	g, b := w.args[1], w.args[2]
	narrow := t.format != precision.F32 && t.format != precision.F64
	var keep *val
	keepN := -1
	for _, eps := range epsCandidates(p.Kind, w.args[0], g, b, p.Offset, p.Group, t) {
		u := v
		if eps != p.Eps {
			e := *w
			e.attrs.Norm.Eps = eps
			e.label = fmt.Sprintf("%s eps=%g offset=%g", p.Kind, eps, p.Offset)
			var sc float64
			if u, sc = s.ev.score(&e, t); u == nil || sc > 1.1*best {
				continue
			}
		}
		if !narrow {
			return u
		}
		if n := exactCount(t.format, u.data, t.data); n > keepN {
			keep, keepN = u, n
		}
	}
	if keep != nil {
		return keep
	}
	return v
}

// fitParamlessNorm is a norm without parameters (LayerNorm without
// affine), tried by the glue search on same-shape values.
func (s *synth) normCandidates(x *val, t *val) []*expr {
	var cands []*expr
	for _, kind := range []exec.NormKind{exec.NormLayer, exec.NormRMS} {
		for _, eps := range epsCandidates(kind, x, nil, nil, 0, 0, t) {
			p := exec.NormParams{Kind: kind, Eps: eps}
			cands = append(cands, &expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{x, nil, nil}, out: t.format,
				label: fmt.Sprintf("%s eps=%g", kind, eps)})
		}
	}
	if d := t.shape[len(t.shape)-1]; d > 1 && l2Rows(t) {
		// rows of unit length: x / ‖x‖ (F.normalize, an L2 norm: an RMS
		// norm without ε over √d), as cosine attention's q and k
		p := exec.NormParams{Kind: exec.NormRMS, Eps: float32(1e-24 / float64(d))}
		if n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{x, nil, nil}, out: precision.F32, label: "x / √(mean x²)"}); n != nil {
			cands = append(cands, &expr{op: program.OpMul, args: []*val{n, s.constant(1 / math.Sqrt(float64(d)))}, out: t.format, label: "x / ‖x‖ (an L2 norm)"})
		}
	}
	return cands
}

// l2Rows reports whether t's first rows (its last axis) are of unit
// L2 length, to a rounding of its format: an L2 norm's output.
func l2Rows(t *val) bool {
	d := t.shape[len(t.shape)-1]
	if len(t.data) < d {
		return false
	}
	bits := map[precision.Format]int{precision.F32: 23, precision.BF16: 7, precision.F16: 10}[t.format]
	if bits == 0 {
		return false
	}
	tol := math.Ldexp(8, -bits) // each square's rounding, the sum's, the root's
	for r := 0; r < min(4, len(t.data)/d); r++ {
		var ss float64
		for _, x := range t.data[r*d : (r+1)*d] {
			ss += float64(x) * float64(x)
		}
		if math.Abs(math.Sqrt(ss)-1) > tol {
			return false
		}
	}
	return true
}

// bestNorm is s.best over the norm candidates and, in a narrow format,
// their RMS norms with x̂ rounded before ·γ (HF's and diffusers') and
// written out (roundedRMS): ε shows only through the rounding that
// reproduces the output (a plain norm scores every small ε alike), so it
// is read with the rounding where that explains t markedly better at
// every captured step (to a quarter of the plain forms' worst error), with
// the plain forms otherwise: one step alone can pass a wrong ε where the
// rounding is off by an f32 ulp. The rounding it was read with stays
// with it (a pinned rule), so ε and the rounding agree in the document.
func (s *synth) bestNorm(t *val, cands []*expr) (*val, []semantics.Candidate) {
	v, ev := s.best(t, cands)
	rounded := append(roundedRMS(cands, exec.RoundNormalized, "x̂ rounded"), roundedRMS(cands, exec.RoundStats, "written out")...)
	if len(rounded) == 0 {
		return v, ev
	}
	w, ew := s.best(t, append(slices.Clone(cands), rounded...))
	if w == nil || w.from.round == 0 || v != nil && s.stepsError(w, t) > s.stepsError(v, t)/4 {
		return v, ev
	}
	return w, ew
}

// roundedRMS are the RMS norms of cands in a narrow format with rounding
// points r (RoundNormalized: x̂ rounded before ·γ; RoundStats: the norm
// written out in the format's primitives, x², their mean, + ε, rsqrt and
// x·r each rounded), labelled with what.
func roundedRMS(cands []*expr, r exec.Round, what string) []*expr {
	var out []*expr
	for _, c := range cands {
		if c.attrs.Norm.Kind != exec.NormRMS || (c.out != precision.BF16 && c.out != precision.F16) {
			continue
		}
		w := *c
		w.round = r
		w.label += " " + what
		out = append(out, &w)
	}
	return out
}

// fitConv explains a convolution whose kernel equals its stride (a patch
// embedding) as patchify → linear → channels-first, frames kept apart.
func (s *synth) fitConv(x *val, params []*val, t *val) *val {
	w := params[0]
	var bias *val
	if len(params) > 1 && len(params[1].shape) == 1 {
		bias = params[1]
	}
	r := len(w.shape)
	if len(x.shape) != r || len(t.shape) != r || (r != 4 && r != 5) {
		return nil
	}
	p := w.shape[r-1]
	if w.shape[r-2] != p || (r == 5 && w.shape[2] != 1) {
		return nil
	}
	B, C, O := x.shape[0], x.shape[1], w.shape[0]
	H, W := x.shape[r-2], x.shape[r-1]
	if C != w.shape[1] || H%p != 0 || W%p != 0 || t.shape[1] != O {
		return nil
	}
	F := 1
	if r == 5 {
		F = x.shape[2]
	}
	img := x
	if r == 5 {
		img = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{x}, out: x.format})
		img = s.reshape(img, []int{B * F, C, H, W})
	}
	patches := s.derive(&expr{op: program.OpPatchify, attrs: program.Attrs{Patch: exec.PatchParams{Patch: p, Height: H, Width: W}}, args: []*val{img}, out: x.format})
	wm := s.reshape(w, []int{O, C * p * p})
	if patches == nil || wm == nil {
		return nil
	}
	lin := &expr{op: program.OpLinear, args: []*val{patches, wm, bias}, out: t.format, label: "patch"}
	y, err := s.ev.run(lin)
	if err != nil {
		return nil
	}
	y = s.reshape(y, []int{B, F * (H / p) * (W / p), O})
	y = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{y}, out: t.format})
	y = s.reshape(y, t.shape)
	if y == nil || relRMS(t.format, y.data, t.data) > tolerance(t.format) {
		return nil
	}
	s.patchRows = F * (H / p) * (W / p)
	y.fit = &leafFit{kind: "conv", candidates: []semantics.Candidate{{Value: fmt.Sprintf("patch %d", p), Score: relRMS(t.format, y.data, t.data)}}}
	return y
}

// fitPointConv explains a 1-D convolution of kernel 1 (w [O, C, 1]) over
// x [B, C, T]: a linear over the channels, the channels first on both
// sides.
func (s *synth) fitPointConv(x *val, params []*val, t *val) *val {
	w := params[0]
	if len(x.shape) != 3 || len(t.shape) != 3 || x.shape[1] != w.shape[1] || t.shape[1] != w.shape[0] || t.shape[2] != x.shape[2] {
		return nil
	}
	var bias *val
	if len(params) > 1 && len(params[1].shape) == 1 {
		bias = params[1]
	}
	rows := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{x}, out: x.format, label: "channels last"})
	wm := s.reshape(w, []int{w.shape[0], w.shape[1]})
	if rows == nil || wm == nil {
		return nil
	}
	y := s.derive(&expr{op: program.OpLinear, args: []*val{rows, wm, bias}, out: t.format, label: "kernel 1"})
	if y == nil {
		return nil
	}
	v, ev := s.best(t, []*expr{{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{y}, out: t.format, label: "channels first"}})
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// fitConv2D explains a convolution of stride 1 that keeps or shrinks the
// image by its kernel (not a patch embedding): x [B, C, H, W], w [O, C/g,
// kh, kw], g read off the weight's shape (convGroups), the padding read
// off the output's size; a strided one where no stride-1 padding gives
// the output's size (fitStridedConv2D).
func (s *synth) fitConv2D(x *val, params []*val, t *val) *val {
	w := params[0]
	if len(w.shape) != 4 || len(x.shape) != 4 || len(t.shape) != 4 || t.shape[1] != w.shape[0] {
		return nil
	}
	var bias *val
	if len(params) > 1 && len(params[1].shape) == 1 {
		bias = params[1]
	}
	pad2 := t.shape[2] - x.shape[2] + w.shape[2] - 1
	padW2 := t.shape[3] - x.shape[3] + w.shape[3] - 1
	if pad2 < 0 || pad2%2 != 0 || padW2 < 0 || padW2%2 != 0 {
		return s.spacedConv2D(x, w, bias, t)
	}
	groups := convGroups(x, w)
	if groups == 0 {
		return nil
	}
	p := program.ConvParams{Pad: max(pad2, padW2) / 2, Groups: groups}
	e := &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: p}, args: []*val{x, w, bias}, out: t.format,
		label: fmt.Sprintf("conv %dx%d pad %d groups %d", w.shape[2], w.shape[3], p.Pad, groups)}
	if pad2 != padW2 {
		// pads that differ between H and W (a (k, 1) kernel padded
		// (k/2, 0): a depthwise convolution along one axis): the larger
		// on both, the other axis's middle columns kept
		ax, lo := 3, (pad2-padW2)/2
		if padW2 > pad2 {
			ax, lo = 2, (padW2-pad2)/2
		}
		wide := s.derive(e)
		if wide == nil {
			return nil
		}
		e = &expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: lo, End: lo + t.shape[ax]}, args: []*val{wide}, out: t.format,
			label: fmt.Sprintf("conv %dx%d pad (%d, %d) groups %d", w.shape[2], w.shape[3], pad2/2, padW2/2, groups)}
	}
	v, ev := s.storedSums(t, []*expr{e})
	if v == nil {
		// a small image can take a stride-1 reading of its size (4×4 →
		// 2×2: kernel 3 unpadded, or stride 2 padded 1): the values decide
		return s.spacedConv2D(x, w, bias, t)
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// storedSums is best over convolutions cands, and, in a narrow format
// where the winner misses t by more than a rounding or none is within
// tolerance, over the same with their sums stored in t's format one
// product at a time (exec.RoundAccum: PyTorch 1.13's CPU convolutions on
// bf16, whose partial sums drift from one f32 sum by 10⁻² over a few
// hundred taps): the closer of the two readings. Only convolutions
// (OpConv2D) are retried; a tight winner costs nothing more (the stored
// sums are formed scalar by scalar).
func (s *synth) storedSums(t *val, cands []*expr) (*val, []semantics.Candidate) {
	v, ev := s.best(t, cands)
	if t.format == precision.F32 || v != nil && relRMS(t.format, v.data, t.data) <= looseFloor(t.format) {
		return v, ev
	}
	if v != nil {
		cands = []*expr{v.from}
	}
	var stored []*expr
	for _, e := range cands {
		if e == nil || e.op != program.OpConv2D || e.round&exec.RoundAccum != 0 {
			continue
		}
		c := *e
		c.round |= exec.RoundAccum
		c.shapes = nil
		c.label += ", its sums stored one product at a time"
		stored = append(stored, &c)
	}
	if len(stored) == 0 {
		return v, ev
	}
	w, ev2 := s.best(t, stored)
	ev = append(ev, ev2...)
	if w == nil || v != nil && relRMS(t.format, w.data, t.data) >= relRMS(t.format, v.data, t.data) {
		return v, ev
	}
	return w, ev
}

// spacedConv2D is a 2-D convolution whose taps do not read adjacent
// stride-1 positions: strided (fitStridedConv2D), else dilated.
func (s *synth) spacedConv2D(x, w, bias, t *val) *val {
	if v := s.fitStridedConv2D(x, w, bias, t); v != nil {
		return v
	}
	return s.fitDilatedConv(x, w, bias, t)
}

// gateActs are the gate functions a gated norm is tried with.
var gateActs = []exec.ActKind{exec.ActSiLU, exec.ActSigmoid, exec.ActGELUErf}

// fitGatedNorm explains a norm called with two arguments of one shape, a
// value and a gate: the norm (fitNorm) of value · f(gate), the gate's
// function and the product in f32 (a gated RMSNorm, norm(y · silu(z))),
// either argument the gate.
func (s *synth) fitGatedNorm(xs, params []*val, t *val) *val {
	if !slices.Equal(xs[0].shape, xs[1].shape) || !slices.Equal(xs[0].shape, t.shape) {
		return nil
	}
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		x, gate := xs[order[0]], xs[order[1]]
		for _, f := range gateActs {
			g := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{gate}, out: precision.F32, label: "the norm's gate"})
			if g == nil {
				continue
			}
			m := s.derive(&expr{op: program.OpMul, args: []*val{x, g}, out: precision.F32, label: "gated"})
			if m == nil {
				continue
			}
			if v := s.fitNorm(m, params, t); v != nil {
				return v
			}
		}
	}
	return s.normThenGate(xs, params, t)
}

// normThenGate explains a norm called with a value and a gate as the
// norm of the value times f(gate): γ·x̂ stored in the value's format, the
// gate's function and the product in f32, rounded once (a gated RMSNorm
// that normalises before the gate, gated DeltaNet's); either argument the
// gate. Tried once the norm of the gated value failed.
func (s *synth) normThenGate(xs, params []*val, t *val) *val {
	g := params[0]
	if len(params) != 1 || len(g.shape) != 1 || g.shape[0] != t.shape[len(t.shape)-1] {
		return nil
	}
	var cands []*expr
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		x, gate := xs[order[0]], xs[order[1]]
		for _, f := range gateActs {
			a := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{gate}, out: precision.F32, label: fmt.Sprintf("%v(gate)", f)})
			if a == nil {
				continue
			}
			for _, kind := range []exec.NormKind{exec.NormRMS, exec.NormLayer} {
				for _, off := range []float32{0, 1} {
					for _, eps := range commonEps {
						p := exec.NormParams{Kind: kind, Eps: eps, Offset: off}
						n := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: p}, args: []*val{x, g, nil}, out: x.format, label: "γ·x̂"})
						if n == nil {
							continue
						}
						cands = append(cands, &expr{op: program.OpMul, args: []*val{n, a}, out: t.format,
							label: fmt.Sprintf("%s eps=%g offset=%g, then times %v(gate)", kind, eps, off, f)})
					}
				}
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil {
		return nil
	}
	v.fit = &leafFit{kind: "norm", norm: v.from.args[0].from.attrs.Norm, candidates: ev}
	return v
}

// fitConv1D explains a 1-D convolution of stride 1 and kernel k > 1 over
// x [B, C, T] (w [O, C/g, k], g read off the shapes), zeros padded on both
// sides as the output's length says (a causal convolution pads k − 1 and
// its caller keeps the first T): a conv2d over x as a [B, C, 1, T] image
// and w as [O, C/g, 1, k], the same padding on the height then its middle
// row kept.
func (s *synth) fitConv1D(x *val, params []*val, t *val) *val {
	w := params[0]
	if len(w.shape) != 3 || w.shape[2] < 2 || len(x.shape) != 3 || len(t.shape) != 3 || t.shape[0] != x.shape[0] || t.shape[1] != w.shape[0] {
		return nil
	}
	var bias *val
	if len(params) > 1 && len(params[1].shape) == 1 && params[1].shape[0] == w.shape[0] {
		bias = params[1]
	}
	pad2 := t.shape[2] - x.shape[2] + w.shape[2] - 1
	if pad2 < 0 || pad2%2 != 0 {
		if v := s.fitStridedConv1D(x, w, bias, t); v != nil {
			return v
		}
		return s.fitDilatedConv(x, w, bias, t)
	}
	groups := convGroups(x, w)
	if groups == 0 {
		return nil
	}
	p := program.ConvParams{Pad: pad2 / 2, Groups: groups}
	img := s.reshape(x, []int{x.shape[0], x.shape[1], 1, x.shape[2]})
	w4 := s.reshape(w, []int{w.shape[0], w.shape[1], 1, w.shape[2]})
	if img == nil || w4 == nil {
		return nil
	}
	conv := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: p}, args: []*val{img, w4, bias}, out: t.format,
		label: fmt.Sprintf("conv1d %d pad %d groups %d", w.shape[2], p.Pad, groups)})
	if conv == nil {
		return nil
	}
	row := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: p.Pad, End: p.Pad + 1}, args: []*val{conv}, out: t.format, label: "the sequence's row"})
	if row == nil {
		return nil
	}
	v, ev := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{row}, out: t.format, label: "rows as a sequence"}})
	if v == nil {
		// taps spaced apart whose padding keeps the length
		return s.fitDilatedConv(x, w, bias, t)
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// fitStridedConv1D explains a 1-D convolution of stride 2 or more (an
// audio encoder's feature extractor, Whisper's second conv, a raw
// waveform's first conv of stride 64): every stride and padding the
// output's length allows, strides up to the kernel's width (at least 8),
// as a conv1d of x read as [B, C, 1, L].
func (s *synth) fitStridedConv1D(x, w, bias, t *val) *val {
	b, l, k, lt := x.shape[0], x.shape[2], w.shape[2], t.shape[2]
	groups := convGroups(x, w)
	if groups == 0 || lt < 2 {
		return nil
	}
	img := s.reshape(x, []int{b, x.shape[1], 1, l})
	w4 := s.reshape(w, []int{w.shape[0], w.shape[1], 1, k})
	if img == nil || w4 == nil {
		return nil
	}
	var cands []*expr
	for stride := 2; stride <= max(k, 8); stride++ {
		for pad := 0; pad <= k/2; pad++ {
			if d := l + 2*pad - k; d < 0 || d/stride+1 != lt {
				continue
			}
			p := program.ConvParams{Pad: pad, Groups: groups, Stride: stride, Seq: true}
			conv := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: p}, args: []*val{img, w4, bias}, out: t.format,
				label: fmt.Sprintf("conv1d %d stride %d pad %d groups %d", k, stride, pad, groups)})
			if conv != nil {
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{conv}, out: t.format, label: conv.from.label})
			}
		}
	}
	v, ev := s.best(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return nil
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// fitStridedConv2D explains a 2-D convolution of one stride of 2 or more
// along both axes whose kernel overlaps (kernel ≠ stride: an overlapping
// patch embedding's 7×7 of stride 4, a downsampling 3×3 of stride 2):
// every stride and padding both output sizes allow, strides up to the
// kernel's size.
func (s *synth) fitStridedConv2D(x, w, bias, t *val) *val {
	groups := convGroups(x, w)
	if groups == 0 || len(x.shape) != 4 || len(t.shape) != 4 || t.shape[0] != x.shape[0] || t.shape[1] != w.shape[0] {
		return nil
	}
	k := max(w.shape[2], w.shape[3])
	// strides up to the kernel, or up to the sizes' ratio where that is
	// more (a pooling convolution of kernel 3 at stride 4: MViTv2's keys)
	most := k
	if t.shape[2] > 0 && t.shape[3] > 0 {
		most = max(k, min(64, max(x.shape[2]/t.shape[2], x.shape[3]/t.shape[3])))
	}
	var cands []*expr
	for stride := 2; stride <= most; stride++ {
		for pad := 0; pad <= k/2; pad++ {
			dh, dw := x.shape[2]+2*pad-w.shape[2], x.shape[3]+2*pad-w.shape[3]
			if dh < 0 || dw < 0 || dh/stride+1 != t.shape[2] || dw/stride+1 != t.shape[3] {
				continue
			}
			p := program.ConvParams{Pad: pad, Groups: groups, Stride: stride}
			cands = append(cands, &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: p}, args: []*val{x, w, bias}, out: t.format,
				label: fmt.Sprintf("conv %dx%d stride %d pad %d groups %d", w.shape[2], w.shape[3], stride, pad, groups)})
		}
	}
	v, ev := s.storedSums(t, cands)
	if v == nil || relRMS(t.format, v.data, t.data) > tolerance(t.format) {
		return s.fitStdConv2D(x, w, bias, t)
	}
	v.fit = &leafFit{kind: "conv", candidates: ev}
	return v
}

// convGroups is the group count of a convolution of x [B, C, ..] by w
// [O, C/g, ..] read off the shapes: C / w[1] where it divides the
// channels and the filters, else 0.
func convGroups(x, w *val) int {
	if len(x.shape) < 2 || len(w.shape) < 2 || w.shape[1] < 1 || x.shape[1]%w.shape[1] != 0 {
		return 0
	}
	g := x.shape[1] / w.shape[1]
	if w.shape[0]%g != 0 {
		return 0
	}
	return g
}

// sinusoidMaths are the exp, division and sin/cos variants a reference's
// sinusoid may use, CPU's first (the first of equals wins).
var sinusoidMaths = func() []exec.Math {
	base := []exec.Math{exec.MathPrecise, exec.MathRecipDiv, exec.MathFastExp, exec.MathFastExp | exec.MathRecipDiv}
	out := slices.Clone(base)
	for _, m := range base {
		out = append(out, m|exec.MathCUDASinCos)
	}
	return out
}()

// fitSinusoid explains a 1-D input becoming [N, D] as a sinusoidal
// timestep embedding.
func (s *synth) fitSinusoid(x, t *val) *val {
	if len(x.shape) != 1 || len(t.shape) != 2 || t.shape[0] != x.shape[0] || t.shape[1]%2 != 0 {
		return nil
	}
	sinusoids := func(scales func(p exec.TimestepParams) []float32) []*expr {
		var cands []*expr
		for _, flip := range []bool{true, false} {
			for _, shift := range []float32{0, 1} {
				p := exec.TimestepParams{Dim: t.shape[1], FlipSinToCos: flip, FreqShift: shift, Scale: 1, MaxPeriod: 10000}
				for _, scale := range scales(p) {
					p.Scale = scale
					// the reference's exp and division variants decide large
					// arguments (a guidance scale of 6000)
					for _, m := range sinusoidMaths {
						cands = append(cands, &expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{x}, out: t.format,
							math: m, label: fmt.Sprintf("flip=%v shift=%g scale=%g math=%s", flip, shift, scale, m)})
					}
				}
			}
		}
		return cands
	}
	v, ev := s.best(t, sinusoids(func(exec.TimestepParams) []float32 { return []float32{1, 1000} }))
	if v == nil {
		// another scale of the angles, read from the values where 1 and
		// 1000 both fail: applied to t·f, or to t before the frequencies
		// (a timestep times 1e4 first: the angles round another way)
		cands := sinusoids(func(p exec.TimestepParams) []float32 { return s.sinusoidScales(x, t, p) })
		for _, c := range slices.Clone(cands) {
			sc := c.attrs.Timestep.Scale
			xs := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(float64(sc))}, out: x.format, label: fmt.Sprintf("t·%g", sc)})
			if xs == nil {
				continue
			}
			pre := *c
			pre.attrs.Timestep.Scale = 1
			pre.args = []*val{xs}
			pre.label = strings.Replace(c.label, "scale=", "t scaled first by ", 1)
			cands = append(cands, &pre)
		}
		v, ev = s.best(t, cands)
	}
	if v == nil && x.format != precision.F32 {
		// the timestep scaled by 1000 in its own narrow format before the
		// frequencies (scale · t on a bf16 tensor inside the embedding,
		// F5-TTS's): the product rounds, 0.6 · 1000 to 600
		if xs := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(1000)}, out: x.format, label: "t·1000"}); xs != nil {
			cands := sinusoids(func(exec.TimestepParams) []float32 { return []float32{1} })
			for _, c := range cands {
				c.args = []*val{xs}
				c.label = strings.Replace(c.label, "scale=1", "t scaled first by 1000 in "+x.format.String(), 1)
			}
			v, ev = s.best(t, cands)
		}
	}
	if v == nil {
		// another period than 10⁴ (a config's max_period): read off the
		// ratio of the two lowest frequencies' angles, then the scale
		var cands []*expr
		for _, flip := range []bool{true, false} {
			for _, shift := range []float32{0, 1} {
				p := exec.TimestepParams{Dim: t.shape[1], FlipSinToCos: flip, FreqShift: shift, Scale: 1, MaxPeriod: 10000}
				for _, period := range s.sinusoidPeriods(x, t, p) {
					p.MaxPeriod = period
					scales := append([]float32{1, 1000}, s.sinusoidScales(x, t, p)...)
					for _, scale := range scales {
						p.Scale = scale
						for _, m := range sinusoidMaths {
							cands = append(cands, &expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{x}, out: t.format,
								math: m, label: fmt.Sprintf("flip=%v shift=%g scale=%g period=%g math=%s", flip, shift, scale, period, m)})
						}
					}
				}
			}
		}
		v, ev = s.best(t, cands)
	}
	if v != nil {
		var r *freqReading
		v, r = s.readSinusoidTable(v, t)
		if twin := s.otherScaling(v, x, t); twin != nil {
			// the scale applied before the frequencies or after rounds
			// the angles apart by less than an ulp of a frequency does:
			// the table read decides between them
			if w, wr := s.readSinusoidTable(twin, t); s.stepsError(w, t) < s.stepsError(v, t)/2 {
				v, r = w, wr
			}
		}
		v.fit = &leafFit{kind: "sinusoid", timestep: v.from.attrs.Timestep, candidates: ev, freqs: r}
	}
	return v
}

// otherScaling is the fitted sinusoid v of x with its scale moved: onto
// x first where v scales t·f, onto t·f where v scales x first; nil for a
// scale of 1 or a value that does not score.
func (s *synth) otherScaling(v, x, t *val) *val {
	e := *v.from
	switch pre := e.args[0].from; {
	case e.args[0] == x && e.attrs.Timestep.Scale != 1:
		xs := s.derive(&expr{op: program.OpMul, args: []*val{x, s.constant(float64(e.attrs.Timestep.Scale))}, out: x.format,
			label: fmt.Sprintf("t·%g", e.attrs.Timestep.Scale)})
		if xs == nil {
			return nil
		}
		e.args = []*val{xs}
		e.attrs.Timestep.Scale = 1
	case pre != nil && pre.op == program.OpMul && len(pre.args) == 2 && pre.args[0] == x && pre.args[1] != nil && pre.args[1].scalar && e.attrs.Timestep.Scale == 1:
		e.args = []*val{x}
		e.attrs.Timestep.Scale = pre.args[1].data[0]
	default:
		return nil
	}
	e.attrs.Timestep.FreqOverrides = nil
	e.label += " (scale moved)"
	w, _ := s.ev.score(&e, t)
	return w
}

// readSinusoidTable reads the frequency table of the fitted sinusoid v
// under each exp, division and sin/cos variant: an exp one ulp off moves
// the angles as much as the variants differ, so the fit alone may pick the
// wrong one. Another variant's reading replaces v's where it halves the
// error or explains t exactly (with fewer entries read, on a tie at 0):
// a library's sin and cos within an ulp of the variants (a CPU's) leave
// the fit's own reading.
func (s *synth) readSinusoidTable(v, t *val) (*val, *freqReading) {
	bestV, bestR := s.readTable(v, v.from.args[0], t)
	bestErr, bestN := s.stepsError(bestV, t), bestR.count()
	for _, m := range sinusoidMaths {
		if m == v.from.math {
			continue
		}
		twin := *v.from
		twin.math = m
		twin.label += fmt.Sprintf(" (math=%s)", m)
		u, _ := s.ev.score(&twin, t)
		if u == nil {
			continue
		}
		w, r := s.readTable(u, u.from.args[0], t)
		if e, n := s.stepsError(w, t), r.count(); e < bestErr/2 || e == 0 && (bestErr > 0 || n < bestN) {
			bestV, bestR, bestErr, bestN = w, r, e, n
		}
	}
	return bestV, bestR
}

// stepsError is the worst captured step's rel-RMS of v against t.
func (s *synth) stepsError(v, t *val) float64 {
	worst := 0.0
	for _, st := range s.tr.Steps() {
		got, ok1 := s.at(v, st)
		want, ok2 := s.at(t, st)
		if ok1 && ok2 {
			worst = math.Max(worst, relRMS(t.format, got, want))
		}
	}
	return worst
}

// sinusoidScales reads the scale of a timestep sinusoid's angles from its
// values, for the layout p (scale 1): at the two slowest frequencies f
// the angle a = scale·t·f is atan2(sin, cos) while it stays within ±π,
// so each row with t ≠ 0 gives scale = a/(t·f) twice; reads that
// disagree (an angle that wrapped, or no sinusoid at all) give none. The scale is
// offered at 1, 2 and 3 significant digits and as read, 1 and 1000
// (tried before) left out.
func (s *synth) sinusoidScales(x, t *val, p exec.TimestepParams) []float32 {
	freqs, err := exec.TimestepFreqs(p, exec.MathPrecise)
	if err != nil || len(freqs) < 2 {
		return nil
	}
	sinAt, cosAt := exec.TimestepColumns(p)
	var reads []float64
	// every step's rows: a timestep of 0 (1 − σ at σ = 1) shows no scale
	for _, st := range s.tr.Steps() {
		xd, ok1 := s.at(x, st)
		td, ok2 := s.at(t, st)
		if !ok1 || !ok2 || len(td) != len(xd)*p.Dim {
			continue
		}
		for n, tn := range xd {
			if tn == 0 {
				continue
			}
			row := td[n*p.Dim : (n+1)*p.Dim]
			// the lowest frequency's angle read as is, the next one's
			// brought to the turn that reading predicts (r·10⁴ turns it
			// past π)
			lo, next := len(freqs)-1, len(freqs)-2
			a := math.Atan2(float64(row[sinAt+lo]), float64(row[cosAt+lo]))
			b := math.Atan2(float64(row[sinAt+next]), float64(row[cosAt+next]))
			want := a * float64(freqs[next]) / float64(freqs[lo])
			b += 2 * math.Pi * math.Round((want-b)/(2*math.Pi))
			reads = append(reads, a/(float64(tn)*float64(freqs[lo])), b/(float64(tn)*float64(freqs[next])))
		}
	}
	if len(reads) == 0 {
		return nil
	}
	slices.Sort(reads)
	mid := reads[len(reads)/2]
	spread := 1e-3 // the reads' agreement: a narrow format's sin and cos give an angle to ~2⁻⁸
	if t.format == precision.BF16 || t.format == precision.F16 {
		spread = 2e-2
	}
	if !(mid > 0) || math.IsInf(mid, 0) || math.Abs(reads[0]-reads[len(reads)-1]) > spread*mid {
		return nil
	}
	if math.Abs(mid-1) < 1e-2 || math.Abs(mid-1000) < 10 {
		return nil // the scales tried first: what failed there is not the scale
	}
	var out []float32
	for _, digits := range []int{1, 2, 3, 0} {
		sc := float32(mid)
		if digits > 0 {
			pow := math.Pow(10, math.Floor(math.Log10(mid))-float64(digits-1))
			sc = float32(math.Round(mid/pow) * pow)
		}
		if sc != 1 && sc != 1000 && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// sinusoidPeriods reads a sinusoid's max_period off its two lowest
// frequencies: their angles at one timestep stand in the ratio
// P^(−1/(half − shift)) whatever the scale, so P is the ratio's power,
// written to 4 significant digits (in a narrow format, whose sines blur
// the angles and the power spreads, to 1 and 2); none where the rows
// disagree, or where the period is 10⁴ (tried first). A period below 1
// makes the frequencies rise along the table (GLIGEN's boxes: 100^(i/8),
// a period of 1/100): the lowest are its first two. Both readings are
// kept where each holds (one row whose last angles turned past π may
// read as a falling table by chance).
func (s *synth) sinusoidPeriods(x, t *val, p exec.TimestepParams) []float32 {
	half := p.Dim / 2
	if half < 3 || float32(half) <= p.FreqShift {
		return nil
	}
	spread, digits := 1e-2, []int{4}
	if t.format != precision.F32 {
		spread, digits = 0.3, []int{1, 2}
	}
	var out []float32
	for _, rising := range []bool{false, true} {
		reads := s.periodReads(x, t, p, rising)
		if len(reads) == 0 {
			continue
		}
		slices.Sort(reads)
		mid := reads[len(reads)/2]
		if !(mid > 0) || math.IsInf(mid, 0) || (mid > 1) == rising || reads[len(reads)-1]-reads[0] > spread*mid || math.Abs(mid-1e4) < 1e2 {
			continue
		}
		for _, d := range digits {
			if v := float32(roundSignificant(mid, d)); v != 1e4 && v > 0 && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// periodReads are the periods each nonzero timestep's row gives from
// the ratio of its two lowest frequencies' angles: the table's last two
// (falling frequencies, a period above 1) or its first two (rising).
func (s *synth) periodReads(x, t *val, p exec.TimestepParams, rising bool) []float64 {
	half := p.Dim / 2
	sinAt, cosAt := exec.TimestepColumns(p)
	lo, next := half-1, half-2
	if rising {
		lo, next = 0, 1
	}
	var reads []float64
	for _, st := range s.tr.Steps() {
		xd, ok1 := s.at(x, st)
		td, ok2 := s.at(t, st)
		if !ok1 || !ok2 || len(td) != len(xd)*p.Dim {
			continue
		}
		for n, tn := range xd {
			if tn == 0 {
				continue
			}
			row := td[n*p.Dim : (n+1)*p.Dim]
			a := math.Atan2(float64(row[sinAt+lo]), float64(row[cosAt+lo]))
			b := math.Atan2(float64(row[sinAt+next]), float64(row[cosAt+next]))
			if a == 0 || b/a <= 1 {
				continue // the next angle turned past π: the ratio cannot be read
			}
			r := math.Pow(b/a, float64(float32(half)-p.FreqShift))
			if rising {
				r = 1 / r
			}
			reads = append(reads, r)
		}
	}
	return reads
}

// derive runs a movement or helper expression and returns its value (nil
// when it cannot run).
func (s *synth) derive(e *expr) *val {
	for _, a := range e.args {
		if a == nil && !slices.Contains(optionalInputs, e.op) {
			return nil
		}
	}
	v, err := s.ev.run(e)
	if err != nil {
		return nil
	}
	return v
}

func (s *synth) reshape(v *val, shape []int) *val {
	if v == nil {
		return nil
	}
	if slices.Equal(v.shape, shape) {
		return v
	}
	if v.numel() != exec.Numel(shape) {
		return nil
	}
	return s.derive(&expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(shape)}, args: []*val{v}, out: v.format})
}

// commonEps are the ε configs write most, and torch's default where a
// norm is given none (nn.RMSNorm(eps=None), F.rms_norm: the machine ε of
// the input's dtype, f32's and bf16's).
var commonEps = []float32{1e-6, 1e-5, 1e-8, 1e-12, 1.1920929e-07, 0.0078125}

// epsCandidates are the common ε and, where the target is f32 (precise
// enough to show it), ε measured from the values: per element,
// ((x−μ)·γ/(y−β))² − var(x) is ε; the median over the rows, written to 2
// to 5 significant digits (a config's 1.5625e-7 as well as its 1e-6).
func epsCandidates(kind exec.NormKind, x, g, b *val, off float32, group int, t *val) []float32 {
	out := slices.Clone(commonEps)
	if t.format != precision.F32 || group != 0 {
		return out
	}
	e := measuredEps(kind, x, g, b, off, t)
	if !(e > 0) {
		return out
	}
	for digits := 2.0; digits <= 5; digits++ {
		p := math.Pow(10, math.Floor(math.Log10(e))-digits+1)
		if c := float32(math.Round(e/p) * p); c > 0 && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func measuredEps(kind exec.NormKind, x, g, b *val, off float32, t *val) float64 {
	d := x.shape[len(x.shape)-1]
	var es []float64
	for r := 0; r+d <= len(x.data) && len(es) < 1<<14; r += d {
		row := x.data[r : r+d]
		var mu, v float64
		if kind == exec.NormLayer {
			for _, xi := range row {
				mu += float64(xi)
			}
			mu /= float64(d)
		}
		for _, xi := range row {
			v += (float64(xi) - mu) * (float64(xi) - mu)
		}
		v /= float64(d)
		for i, xi := range row {
			gi, bi := float64(off), 0.0
			if g != nil {
				gi += float64(g.data[i])
			} else {
				gi = 1
			}
			if b != nil {
				bi = float64(b.data[i])
			}
			y := float64(t.data[r+i]) - bi
			if math.Abs(y) < 1e-3 || math.Abs(gi) < 1e-3 {
				continue
			}
			q := (float64(xi) - mu) * gi / y
			es = append(es, q*q-v)
		}
	}
	if len(es) == 0 {
		return 0
	}
	slices.Sort(es)
	return es[len(es)/2]
}

// rowOffset is c when t's first row is the table's row ids[0] + c (the
// first exact match), else 0.
func rowOffset(table, ids, t *val) int {
	d := table.shape[1]
	if len(ids.data) == 0 || len(t.data) < d {
		return 0
	}
	row := t.data[:d]
	for j := 0; j < table.shape[0]; j++ {
		if slices.Equal(table.data[j*d:(j+1)*d], row) {
			return j - int(ids.data[0])
		}
	}
	return 0
}

// optionalInputs are the ops whose absent inputs (nil arguments) derive
// passes on: a linear's bias, a norm's γ and β, a convolution's bias, a
// mean's mask, an attention's mask and bias, the experts' indices (dense
// weights) and biases, a recurrence's bias.
var optionalInputs = []program.Op{program.OpLinear, program.OpNorm, program.OpConv2D, program.OpMean, program.OpAttention, program.OpExperts, program.OpSSMScan, program.OpRecurrence}

// leafConv explains t as a convolution of xs[0] by params[0] (a weight of
// four or more axes, params[1] a bias where one is given): a patch
// embedding, a padded, strided, dilated, grouped, transposed or
// standardised convolution, time taps over frames (with the frames before
// passed beside the clip or kept on the module since its last call), or
// borders padded by a mode.
func (s *synth) leafConv(module string, xs, params []*val, t *val) *val {
	var fit *val
	if fit = s.fitConv(xs[0], params, t); fit == nil {
		fit = s.fitConv2D(xs[0], params, t)
	}
	if fit == nil {
		fit = s.fitConvBlocks(xs[0], params, t)
	}
	if fit == nil {
		fit = s.fitConvTransposed(xs[0], params, t)
	}
	if fit == nil {
		// a weight standardised and scaled by a gain of its own
		fit = s.fitScaledStdConv2D(xs[0], params, t)
	}
	if fit == nil {
		// overlapping windows: the input spread by zeros
		fit = s.fitConvTransposed2D(xs[0], params, t)
	}
	module, _, _ = strings.Cut(module, "#")
	if fit == nil {
		// time taps over frames
		fit = s.fitConv3DOf(module, xs[0], params, t)
	}
	if fit == nil && len(xs) == 2 {
		// the frames before passed beside the clip (a frame
		// cache): the clip's past, joined before it
		fit = s.fitConv3DOf(module, s.pastJoined(xs[1], xs[0]), params, t)
	}
	if fit == nil {
		// the frames before kept on the module since its last
		// call
		fit = s.convPast(module, xs[0], params, t)
	}
	if fit == nil {
		// padded by reflecting, repeating or wrapping its borders
		fit = s.fitModePaddedConv(xs[0], params, t)
	}
	if fit == nil {
		fit = s.squeezedConv(module, xs, params, t)
	}
	return fit
}

// squeezedConv explains t as leafConv's convolution of xs[0] with a
// length-one axis taken out, put back after: a 2-D convolution run on a
// video of one frame (x.squeeze(2), conv, unsqueeze(2): QwenImage 2.1's
// VAE), its weight one axis short of its boundaries. nil where no such
// axis is both x's and t's, or the convolution does not explain t.
func (s *synth) squeezedConv(module string, xs, params []*val, t *val) *val {
	x := xs[0]
	if len(params) == 0 || len(x.shape) != len(t.shape) || len(params[0].shape) != len(x.shape)-1 {
		return nil
	}
	for ax := 2; ax < len(x.shape); ax++ {
		if x.shape[ax] != 1 || t.shape[ax] != 1 {
			continue
		}
		drop := func(shape []int) []int { return append(slices.Clone(shape[:ax]), shape[ax+1:]...) }
		sx := s.reshape(x, drop(x.shape))
		st := s.readAs(t, drop(t.shape), func(d []float32) []float32 { return d })
		if sx == nil || st == nil {
			continue
		}
		if fit := s.leafConv(module, append([]*val{sx}, xs[1:]...), params, st); fit != nil {
			if r := s.reshape(fit, t.shape); r != nil {
				r.fit = fit.fit
				return r
			}
		}
	}
	return nil
}
