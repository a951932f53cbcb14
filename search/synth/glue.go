package synth

import (
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// glue explains target as a small expression over the scope's values:
// tried from the simplest form up (the same tensor moved or cut; one
// pointwise function; a scaled value; a residual or product of two;
// attention), the first form that reproduces target within its format's
// tolerance wins. nil: nothing in the vocabulary explains it.
func (s *synth) glue(target *val, sc *scope) *val {
	if s.hurried() {
		return nil
	}
	if v := s.glueOnce(target, sc); v != nil || s.late {
		return v
	}
	s.late = true
	defer func() { s.late = false }()
	return s.glueOnce(target, sc)
}

// glueOnce is one pass of glue: the older forms, or in the late pass only
// the late ones (lateForms), on the target and its reshaped readings.
func (s *synth) glueOnce(target *val, sc *scope) *val {
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

// stored casts v, an f32 value that explains target, to the narrower
// format target was captured in, where the cast reproduces it at least as
// well: the capture's dtype is where the reference rounded (f32 sinusoids
// joined, then .to(bf16) before a linear), and a consumer of the f32
// value would compute on digits the reference never had.
func (s *synth) stored(v, target *val) *val {
	if v.format != precision.F32 || target.format != precision.BF16 && target.format != precision.F16 {
		return v
	}
	w := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: target.format}, args: []*val{v}, out: target.format, label: "cast"})
	if w == nil || relRMS(target.format, w.data, target.data) > relRMS(target.format, v.data, target.data) {
		return v
	}
	return w
}

// transposed explains a target that is an expression of recent values
// with its axes then moved ((conv(x) + x).transpose(1, 2)): the target
// read back in the order of a recent value of that shape, explained
// there, then permuted. Tried once per target, as reshaped is.
func (s *synth) transposed(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) < 2 || len(t.shape) > 4 {
		return nil
	}
	tried := map[string]bool{fmt.Sprint(t.shape): true}
	for _, perm := range permutations(len(t.shape)) {
		inv := make([]int, len(perm))
		for i, a := range perm {
			inv[a] = i
		}
		shape := make([]int, len(perm)) // the proxy's: permute(proxy, perm) has t's shape
		for i, a := range perm {
			shape[a] = t.shape[i]
		}
		key := fmt.Sprint(shape)
		if slices.Equal(shape, t.shape) {
			// axes of one length (a 16×16 map of 16 channels): the shape
			// cannot tell the layouts apart, so an image's channels moved
			// last or first are read by their order
			if isIdentity(perm) || !usualMove(perm) {
				continue
			}
			key = fmt.Sprint(perm)
		}
		// a recent value of that shape, or one longer on one axis (a part
		// of it, then its axes moved: a split projection read channels
		// first, a padded convolution's first T columns read back as rows)
		if tried[key] || !slices.ContainsFunc(vals, func(v *val) bool {
			return !v.opaque && (slices.Equal(v.shape, shape) || longerOnOne(v.shape, shape) || cutReshapes(v.shape, shape))
		}) {
			continue
		}
		tried[key] = true
		// the trace's keys hold t's layout, not the proxy's: read as one
		proxy := s.readAs(t, shape, func(d []float32) []float32 { return permuteData(&val{shape: t.shape, data: d}, inv) })
		proxy.reshapedFrom = true
		if w := s.glueIn(proxy, sc); w != nil {
			return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{w}, out: w.format, label: "axes moved"})
		}
	}
	return nil
}

// usualMove reports whether perm turns an image's axes after the batch
// one step: channels first to last, or back ([0 2 3 1], [0 3 1 2]).
func usualMove(perm []int) bool {
	return slices.Equal(perm, []int{0, 2, 3, 1}) || slices.Equal(perm, []int{0, 3, 1, 2})
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

// heldOrAttention is held, the softmax of scores the scope made times
// its values, where that explains target near exactly; else the
// attention op's explanation where that is closer (a 4-D value that only
// looks like scores: per-head queries [B, H, S, D] with D = S, whose
// softmax times v is near a near-uniform attention in bf16), else held.
func (s *synth) heldOrAttention(held, target *val, sc *scope) *val {
	e := relRMS(target.format, held.data, target.data)
	if e <= looseFloor(target.format) {
		return held
	}
	attn, ropes := len(s.attn), len(s.ropes)
	if a := s.attention(target, sc); a != nil && relRMS(target.format, a.data, target.data) < e {
		return a
	}
	s.attn, s.ropes = s.attn[:attn], s.ropes[:ropes] // not taken: no record
	return held
}

// movedForms is how many of glueIn's first forms only move or cut a
// value (moved, patched, rearranged, cut, viewed): exact where they are
// the computation.
const movedForms = 5

// tighterAttention is an attention's output that explains target closer
// than err, which a value moved or cut explained only within tolerance:
// a copy is exact where it is the computation, so one that is merely
// close is close by chance (bf16's tolerance, and probabilities that
// nearly pick each row's own value: LeViT's position biases at random
// weights). nil where no attention does better.
func (s *synth) tighterAttention(target *val, sc *scope, err float64) *val {
	attn, ropes := len(s.attn), len(s.ropes)
	for _, f := range []func(*val, *scope) *val{s.heldScoresAttention, s.attention} {
		if v := f(target, sc); v != nil && relRMS(target.format, v.data, target.data) < err {
			return v
		}
		s.attn, s.ropes = s.attn[:attn], s.ropes[:ropes] // not taken: no record
	}
	return nil
}

func (s *synth) glueIn(target *val, sc *scope) *val {
	if target.numel() == 0 {
		return nil // no entry to explain (a call on a chunk of no frames)
	}
	tol := tolerance(target.format)
	// an empty value (a chunk of no frames) explains nothing and would
	// leave the forms an axis of length zero to divide by
	vals := slices.DeleteFunc(tablesLast(recentFirst(sc.vals)), func(v *val) bool { return v.numel() == 0 })
	if s.late {
		if v := s.lateForms(target, sc, vals); v != nil {
			return v
		}
		return s.reshaped(target, sc, vals)
	}
	var loose *val // the first explanation within tol but not near exact
	var looseErr float64
	looseMoved := false // loose is a value moved or cut (movedForms)
	for i, try := range []func(*val, []*val) *val{s.moved, s.patched, s.rearranged, s.cut, s.viewed, func(t *val, vs []*val) *val { return s.joined(t, sc, vs) }, s.repeated, s.pointwise, s.axisNorm, s.maskBias, s.paddedCausalMask, s.softmaxed, func(t *val, vs []*val) *val { return s.headGated(t, sc, vs) }, s.combined, s.partPlus, s.broadcastProduct, s.broadcastSum, func(t *val, vs []*val) *val { return s.peeledGate(t, sc, vs) }, s.paramAdded, s.paramScaled, func(t *val, vs []*val) *val { return s.offsetBiasAdded(t, sc, vs) }, func(t *val, _ []*val) *val { return s.ownNorm(t, sc) }, s.rowGated, s.routed, func(t *val, vs []*val) *val { return s.expertModules(t, sc, vs) }, s.summed, s.pooled, s.pooledMap, s.pooledMaxMap, s.resizedMap, s.pooledBranchSum, s.branchSoftmax, s.branchWeighted, s.maxOverAxis, s.projected, s.padded, s.edgePadded, func(t *val, vs []*val) *val { return s.zeroPadded(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.modulated(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.gated(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.gatedSum(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.rotated(t, sc) },
		// modulation and gates that change along the rows: fitted on the
		// host, so tried before any attention search (whose refinement
		// costs thousands of evaluations on a target it cannot explain)
		s.rowRuns,
		func(t *val, vs []*val) *val { return s.modulatedRows(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.segmentedRows(t, sc, vs) },
		// a global context (a softmax-weighted sum over the rows) times
		// the values: host scans of slices, after the cheaper forms
		func(t *val, vs []*val) *val { return s.contextWeighted(t, sc, vs) },
		func(t *val, vs []*val) *val { return s.globalQueryKeys(t, sc, vs) },
		s.plusUnitRows,
		// a position table added after a rearrangement: read off t − p
		s.rearrangedPlus,
		// relative logits made from the queries alone (a position
		// module of its own: BoTNet's PosEmbedRel)
		func(t *val, _ []*val) *val { return s.queryBiasOf(t, sc) },
		// a RoPE table of learned per-head frequencies made in the
		// forward from an uncalled module's parameter (timm's mixed RoPE)
		func(t *val, _ []*val) *val { return s.learnedRopeTable(t, sc) },
		// heads cut from maps joined along the channels (DC-AE's
		// multi-scale q, k and v, read before its attention)
		func(t *val, _ []*val) *val { return s.joinedMapCut(t, sc) },
		// a video's frames averaged two by two, the first kept alone
		s.framePairsAveraged,
		// a value's elements moved, then cut along one axis (a
		// depth-to-space upsampler dropping its first frame)
		s.rearrangedCut,
		// each axis read at positions of its own (a nearest resize of
		// any rank, in a format that repeats values)
		s.axisGathered,
		// values moved, or pieces joined, then clamped (a decoded
		// clip brought into [−1, 1])
		s.clampedMoves,
		// a value where a mask keeps its rows, a learned null vector
		// where it drops them
		s.nullBlended} {
		v := try(target, vals)
		if v == nil {
			continue
		}
		e := relRMS(target.format, v.data, target.data)
		if e > tol || (loose != nil && e > looseErr/4) || !s.everyStep(v, target, tol) {
			continue
		}
		if e > looseFloor(target.format) && wrongRow(v, target, tol) {
			// within tolerance on the whole, but some row far off: a
			// different computation for a few rows (a class token's own
			// residual) that the other rows' agreement hides
			continue
		}
		if e > looseFloor(target.format) && loose == nil {
			// within tolerance but far from exact: keep it and let the
			// later forms try for a tight one (an f32 norm of a value
			// already normalised is the value to 3e-5, not to 1e-7)
			loose, looseErr, looseMoved = v, e, i < movedForms
			continue
		}
		return s.stored(s.consuming(v, target, sc), target)
	}
	if loose != nil {
		if looseMoved && !s.peeling {
			if v := s.tighterAttention(target, sc, looseErr); v != nil {
				return v
			}
			// a value near another in a narrow format, off by more than
			// its rounding: a map near the identity on small values
			// (3·tanh(x/3), a decoder's input cap), one of glue's late
			// forms that a loose reading would otherwise keep from trying
			if v := s.softCapped(target, vals); v != nil && relRMS(target.format, v.data, target.data) < looseErr/4 {
				return s.stored(s.consuming(v, target, sc), target)
			}
		}
		if v := s.tighterTable(target, sc, vals, looseErr); v != nil {
			return s.stored(s.consuming(v, target, sc), target)
		}
		return s.stored(s.consuming(loose, target, sc), target)
	}
	if s.peeling {
		// t − b of peeledAdd: the first forms only, rows of a value in
		// another order, and rows that are a map's cells
		if v := s.rowsAsMap(target, sc, vals); v != nil {
			return v
		}
		return s.rowsGathered(target, vals)
	}
	if v := s.replicatePadded(target, vals); v != nil {
		return v
	}
	if v := s.heldScoresAttention(target, sc); v != nil {
		return s.heldOrAttention(v, target, sc)
	}
	if v := s.attention(target, sc); v != nil {
		return v
	}
	if v := s.relShiftAttention(target, sc); v != nil {
		return v
	}
	if v := s.gatedBiasAttention(target, sc); v != nil {
		return v
	}
	if v := s.disentangledAttention(target, sc); v != nil {
		return v
	}
	if v := s.gridAttention(target, sc); v != nil {
		return v
	}
	if v := s.jointAttention(target, sc); v != nil {
		return v
	}
	if v := s.linearAttention(target, sc); v != nil {
		return v
	}
	if v := s.latentAttention(target, sc); v != nil {
		return v
	}
	if v := s.gatedAttention(target, sc); v != nil {
		return v
	}
	if v := s.diffAttention(target, sc); v != nil {
		return v
	}
	if v := s.joinedAttention(target, sc); v != nil {
		return v
	}
	if v := s.summedAttention(target, sc); v != nil {
		return v
	}
	if v := s.kvAttention(target, sc); v != nil {
		return v
	}
	if v := s.windowRowsAttention(target, sc); v != nil {
		return v
	}
	if v := s.channelAttention(target, sc); v != nil {
		return v
	}
	if v := s.dynamicBiasAttention(target, sc); v != nil {
		return v
	}
	if v := s.constantResidual(target, sc, vals); v != nil {
		return v
	}
	if v := s.sinusoidAdded(target, vals); v != nil {
		return v
	}
	if v := s.shiftedJoin(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.manySummed(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.resizedSum(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.piecewiseJoin(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.gatedJoin(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.positionGatedSum(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.filled(target); v != nil {
		return s.stored(v, target)
	}
	if v := s.movedCombined(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.rowAddedResidual(target, vals); v != nil {
		return v
	}
	if v := s.attentionBeside(target, sc, vals); v != nil {
		return v
	}
	if v := s.joinedWide(target, sc, vals); v != nil {
		return v
	}
	if v := s.attentionPlus(target, sc, vals); v != nil {
		return v
	}
	if v := s.attentionBesideConv(target, sc, vals); v != nil {
		return v
	}
	if v := s.outlookAttention(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.hardAssigned(target, sc); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.angularAttention(target, sc); v != nil {
		return v
	}
	if v := s.scaledSum(target, vals); v != nil && relRMS(target.format, v.data, target.data) <= tol && s.everyStep(v, target, tol) {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.resizedResidual(target, sc, vals); v != nil && relRMS(target.format, v.data, target.data) <= tol && s.everyStep(v, target, tol) {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.scaledByValue(target, vals); v != nil && relRMS(target.format, v.data, target.data) <= tol && s.everyStep(v, target, tol) {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.offsetCut(target, vals); v != nil && relRMS(target.format, v.data, target.data) <= tol && s.everyStep(v, target, tol) {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.ssmScanned(target, sc, vals); v != nil {
		return v
	}
	if v := s.quotient(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.averaged(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.piecewiseOfValue(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.reshaped(target, sc, vals); v != nil {
		return v
	}
	// forms tried once every older form failed
	if v := s.joinedOfParts(target, sc, vals); v != nil {
		return v
	}
	if v := s.rotatedLinearAttention(target, sc); v != nil {
		return v
	}
	if v := s.movedSum(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.gatedMoved(target, sc, vals); v != nil && relRMS(target.format, v.data, target.data) <= tolerance(target.format) && s.everyStep(v, target, tolerance(target.format)) {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.activatedSum(target, vals); v != nil && s.everyStep(v, target, tolerance(target.format)) {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.broadcastCut(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.rolled(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.unitAxesSinusoid(target, vals); v != nil {
		return v
	}
	if v := s.sinusoidsJoined(target, vals); v != nil {
		return s.stored(v, target)
	}
	if v := s.aVector(target, sc); v != nil {
		return s.stored(v, target)
	}
	if v := s.rowsJoined(target, sc, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.cutOfScaledSum(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.seqFirstAttention(target, sc); v != nil {
		return v
	}
	if v := s.peeledAdd(target, sc, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.channelShortcut(target, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.coordTableAdded(target, sc, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.insertedRows(target, sc, vals); v != nil {
		return s.stored(s.consuming(v, target, sc), target)
	}
	if v := s.rowsGathered(target, vals); v != nil {
		return v
	}
	// attention over a map's cells or a value's blocks read as rows, or
	// with its heads merged last: after every other reading of the target
	// (its axes moved, above) has failed, as each search costs as much as
	// an attention's; before its rows are split apart
	switch len(target.shape) {
	case 5:
		if v := s.clipMapsAttention(target, sc); v != nil {
			return v
		}
	case 4:
		if v := s.blocksAttention(target, sc); v != nil {
			return v
		}
		if v := s.mapsAttention(target, sc, false); v != nil {
			return v
		}
	case 3:
		// only for the head counts the scope's own scores show
		if v := s.headsLastAttention(target, sc, s.hintedHeadDims(sc, target)); v != nil {
			return v
		}
		if v := s.stridedWindowsAttention(target, sc); v != nil {
			return v
		}
	}
	if v := s.classRowsApart(target, sc); v != nil {
		return v
	}
	if v := s.firstFrameApart(target, sc); v != nil {
		return v
	}
	return nil
}

// lateForms are the forms glue tries in its second pass, once every
// older form failed on the target and on its reshaped readings, over the
// scope's values and the parameters of its uncalled sub-modules: a
// table's rows at integer ids (gatheredRows: an embedding module whose
// forward looks its table up before a child norm), a causal
// depthwise convolution of a value's columns, a parameterless norm of a
// value's first or last columns, a residual plus two scaled
// branches, a cut scaled in runs of columns, a selective scan times a
// gate, a scan over channels (Mamba-1's), a gated diagonal linear
// recurrence (gatedRecurrence), a token shift (shiftedRows), an
// interpolation of two values by a parameter (mixedRows), a decayed
// average over the positions so far (decayedAverage), a causal linear
// attention with a decay per head (decayedLinearAttention), a gated
// delta rule over a causal conv's [q | k | v] (gatedDeltaRule), attention
// times σ of a cut of a wider value (cutGatedAttention), attention, plain
// or gated, ranked over a few temperatures and refined on its six best
// choices (widerAttention).
func (s *synth) lateForms(target *val, sc *scope, vals []*val) *val {
	// the weights of sub-modules no call holds, which a forward may use
	// itself (F.conv1d(x, self.conv1d.weight, ...))
	vals = append(slices.Clone(vals), s.uncalledParams(sc.module)...)
	// the scans keep the value they explain as they make it; every other
	// form's value is consumed and stored as glue's first forms' are
	for _, f := range []struct {
		try   func(*val, *scope, []*val) *val
		plain bool
	}{
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gatheredRows(t, vs) }, plain: true},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gatheredEntries(t, vs) }, plain: true},
		// a value moved, its last axis padded by a mode (rows repeat, so
		// no gather of whole rows tells them apart)
		{try: func(t *val, _ *scope, vs []*val) *val { return s.paddedMove(t, vs) }, plain: true},
		// ids of the table rows nearest a value's rows (a vector quantizer)
		{try: s.nearestRows, plain: true},
		// attention within frames, tried once every other reading failed
		{try: func(t *val, c *scope, _ []*val) *val { return s.frameBlockedAttention(t, c) }, plain: true},
		// tiles blended over their overlaps and summed (a tiled decode)
		{try: s.overlapAdded, plain: true},
		// a value brought to a grid and back (a fake quantisation)
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gridQuantised(t, vs) }, plain: true},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.bilinearSum(t, vs) }},
		{try: s.maxOverAxisPlus},
		{try: s.viewTimesPart},
		{try: func(t *val, c *scope, _ []*val) *val { return s.factorizedAttention(t, c) }},
		// a step-by-step attention's scores, probabilities and output
		{try: func(t *val, c *scope, _ []*val) *val { return s.scoresOf(t, c) }},
		{try: func(t *val, c *scope, _ []*val) *val { return s.gatedProbabilities(t, c) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.softmaxOf(t, vs) }},
		{try: func(t *val, c *scope, _ []*val) *val { return s.weighedValues(t, c) }},
		{try: func(t *val, c *scope, _ []*val) *val { return s.mapsWeighedValues(t, c) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.causalConv(t, vs) }},
		// a smaller value copied along an axis, read off the target
		{try: func(t *val, c *scope, _ []*val) *val { return s.copied(t, c) }},
		// a value plus an uncalled module's table (a position embedding
		// whose weight the forward reads, resized, without calling it)
		{try: s.peeledAddLate},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.normedCut(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.weightedSum(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.scaledRuns(t, vs) }},
		{try: s.ssmScanned, plain: true},
		{try: s.channelScanned, plain: true},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gatedRecurrence(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.shiftedRows(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.mixedRows(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.decayedAverage(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.decayedLinearAttention(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gatedDeltaRule(t, vs) }},
		{try: func(t *val, c *scope, _ []*val) *val { return s.cutGatedAttention(t, c) }},
		{try: s.routedHeadsAttention},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.fourierMixed(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.softCapped(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gatedMemory(t, vs) }, plain: true},
		{try: func(t *val, c *scope, _ []*val) *val { return s.unscaledAttention(t, c) }, plain: true},
		{try: func(t *val, c *scope, _ []*val) *val { return s.cosineAttention(t, c) }, plain: true},
		{try: func(t *val, _ *scope, _ []*val) *val { return s.sineGridTable(t) }, plain: true},
		{try: func(t *val, c *scope, _ []*val) *val { return s.widerAttention(t, c) }, plain: true},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.mixGate(t, vs) }},
		{try: s.mixSinkhorn},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.mixCollapse(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.streamsMixed(t, vs) }},
		{try: func(t *val, c *scope, _ []*val) *val { return s.sharedKVAttention(t, c) }, plain: true},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.gatheredScores(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.rejected(t, vs) }},
		{try: func(t *val, _ *scope, vs []*val) *val { return s.channelAffine(t, vs) }},
		// a branch added through a gate of one parameter, tanh(α)·b
		{try: func(t *val, _ *scope, vs []*val) *val { return s.scalarGated(t, vs) }},
		// last, where every other reading failed: a weight of the call's own, scaled by its fan-in or filtered
		// first (StyleGAN-derived layers)
		{try: func(t *val, _ *scope, vs []*val) *val { return s.equalisedLinear(t, vs) }},
		{try: s.ownConv},
		// a map modulated per channel right after it is made
		{try: s.modulatedExplained},
		// a value times the orthogonal basis of a weight (its QR)
		{try: func(t *val, _ *scope, vs []*val) *val { return s.qrProjected(t, vs) }},
		// a residual plus a layer-scaled update or difference made in
		// the forward (a re-parameterisable mixer's training form)
		{try: func(t *val, _ *scope, vs []*val) *val { return s.scaledUpdate(t, vs) }},
	} {
		v := f.try(target, sc, vals)
		switch {
		case v == nil:
		case len(v.data) == len(target.data) && relRMS(target.format, v.data, target.data) > looseFloor(target.format) && wrongRow(v, target, tolerance(target.format)):
			// as in glue's first forms: a row far off is another computation
		case f.plain:
			return v
		default:
			return s.stored(s.consuming(v, target, sc), target)
		}
	}
	return nil
}

// axisCuts yields every contiguous slice of one axis of v that holds as
// many values as t: {axis, start, size}.
func axisCuts(t, v *val) iter.Seq[[3]int] {
	return func(yield func([3]int) bool) {
		for ax := range v.shape {
			rest := v.numel() / v.shape[ax]
			if rest == 0 || t.numel()%rest != 0 {
				continue
			}
			size := t.numel() / rest
			if size >= v.shape[ax] {
				continue
			}
			for start := 0; start+size <= v.shape[ax]; start++ {
				if !yield([3]int{ax, start, size}) {
					return
				}
			}
		}
	}
}

// offsetCut explains t as a cut of a wider value plus one constant
// (1 + scale of one chunk of a modulation vector, made as its own
// boundary before a norm that reads it): the constant read off the
// difference, which must be the same everywhere. Tried once every other
// form failed.
func (s *synth) offsetCut(t *val, vals []*val) *val {
	if t.numel() < 4 {
		// one number is any entry plus a constant: no evidence
		return nil
	}
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.opaque || v.numel() <= t.numel() || len(v.shape) == 0 {
			continue
		}
		for c := range axisCuts(t, v) {
			ax, start, size := c[0], c[1], c[2]
			d := sliceData(v, ax, start, start+size)
			var mean float64
			for i, x := range d {
				mean += float64(t.data[i] - x)
			}
			mean /= float64(len(d))
			if mean == 0 {
				continue
			}
			off := make([]float32, len(d))
			for i, x := range d {
				off[i] = x + float32(mean)
			}
			if relRMS(t.format, off, t.data) > tol {
				continue
			}
			b := math.Round(mean*1e6) / 1e6
			c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: start, End: start + size}, args: []*val{v}, out: v.format, label: "slice"})
			c = s.reshape(c, t.shape)
			if c == nil {
				return nil
			}
			w, _ := s.best(t, []*expr{{op: program.OpAdd, args: []*val{c, s.constant(b)}, out: t.format, label: "offset cut"}})
			return w
		}
	}
	return nil
}

// joinedWide is joined with pieces along the last axis that are sums,
// products or gated units of values (a parallel block's MLP, silu(gate)·
// value of one projection's halves, joined after the attention's columns
// before one output projection), and pieces that are a later part of a
// value (innerPart): tried once every other form failed, as the pieces
// multiply.
func (s *synth) joinedWide(t *val, sc *scope, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) < 2 {
		return nil
	}
	s.latePieces = true
	defer func() { s.latePieces = false }()
	return s.joinedAt(t, sc, vals, 0)
}

// joinedOfParts is joined with pieces that are joins holding leading
// parts of values (a caption rebuilt from the first half of the running
// caption's channels and a projection of its own, then joined before
// the image rows): tried once every other form failed.
func (s *synth) joinedOfParts(t *val, sc *scope, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) < 2 {
		return nil
	}
	s.nestedParts = true
	defer func() { s.nestedParts = false }()
	return s.joinedAt(t, sc, vals, 0)
}

// windows are the values of t's rank longer than t on one axis other
// than ax (and equal on the rest), cut to t's length there at their start
// and at their end.
func (s *synth) windows(t *val, ax int, vals []*val) []*val {
	var out []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) != len(t.shape) {
			continue
		}
		long := -1
		for a := range v.shape {
			switch {
			case a == ax || v.shape[a] == t.shape[a]:
			case v.shape[a] > t.shape[a] && long == -1:
				long = a
			default:
				long = -2
			}
		}
		if long < 0 {
			continue
		}
		for _, start := range []int{0, v.shape[long] - t.shape[long]} {
			if w := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: long, Start: start, End: start + t.shape[long]}, args: []*val{v}, out: v.format, label: "window"}); w != nil {
				out = append(out, w)
			}
		}
	}
	return out
}

// attentionBeside explains t [B, S, W] as attention joined along the
// width with a value of the scope (a parallel block's [attention, MLP]
// read by one fused output projection, the attention made inside the
// call and never a result of its own): the value found as t's first or
// last columns at every step, the rest explained as attention whose q,
// k and v may also be the leading blocks of a projection wider than
// them ([q|k|v|mlp] fused). Tried once every other form failed.
func (s *synth) attentionBeside(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	tol := tolerance(t.format)
	attend := func(rest *val) *val { return s.attention(rest, sc) }
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != t.shape[0] || v.shape[1] != t.shape[1] || v.shape[2] >= t.shape[2] {
			continue
		}
		same := func(sub *val) *val {
			if relRMS(t.format, v.data, sub.data) > tol || !s.everyStep(v, sub, tol) {
				return nil
			}
			return v
		}
		if w := s.besideWidth(t, v.shape[2], same, attend, "attention joined with a value"); w != nil {
			return w
		}
	}
	return nil
}

// reshaped explains a target stored in another shape than the values it
// is made of (rows flattened, [B·S, D] for [B, S, D]): the target read in
// the shape of a recent value of as many elements, explained there, then
// reshaped. Tried once per target (the proxy is not reshaped again).
func (s *synth) reshaped(t *val, sc *scope, vals []*val) *val {
	if t.reshapedFrom {
		return nil
	}
	if w := s.imageAsRows(t, sc); w != nil {
		return w
	}
	if w := s.transposed(t, sc, vals); w != nil {
		return w
	}
	if w := s.channelsLastRows(t, sc, vals); w != nil {
		return w
	}
	if w := s.rowsAsMap(t, sc, vals); w != nil {
		return w
	}
	tried := map[string]bool{fmt.Sprint(t.shape): true}
	for _, v := range vals {
		key := fmt.Sprint(v.shape)
		if tried[key] || v.numel() != t.numel() || len(tried) > 3 {
			continue
		}
		tried[key] = true
		proxy := *t
		proxy.shape = slices.Clone(v.shape)
		proxy.reshapedFrom = true
		if w := s.glueIn(&proxy, sc); w != nil {
			return s.reshape(w, t.shape)
		}
	}
	return nil
}

// imageAsRows explains an image target [B, C, H, W] as rows [B, H·W, C]
// made in the scope (a sequence of tokens laid out as an image for a
// convolution: unflatten, then channels first), then moved back.
func (s *synth) imageAsRows(t *val, sc *scope) *val {
	if len(t.shape) != 4 {
		return nil
	}
	B, C, H, W := t.shape[0], t.shape[1], t.shape[2], t.shape[3]
	rows := s.readAs(t, []int{B, H * W, C}, func(d []float32) []float32 {
		r := make([]float32, len(d))
		for b := range B {
			for c := range C {
				for p := range H * W {
					r[(b*H*W+p)*C+c] = d[(b*C+c)*H*W+p]
				}
			}
		}
		return r
	})
	rows.reshapedFrom = true
	w := s.glueIn(rows, sc)
	if w == nil {
		w = s.channelsLastOperands(rows, sc, recentFirst(sc.vals))
	}
	if w == nil {
		return nil
	}
	img := s.reshape(w, []int{B, H, W, C})
	if img == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2}}, args: []*val{img}, out: img.format, label: "channels first"})
}

// rowsAsMap explains a rows target [B, N, C] as a map [B, C, H, W] made in
// the scope, its cells then read as rows (reshape to [B, C, H·W],
// channels last): EdgeNeXt's split convolutions joined along the channels
// before its transposed attention. The grids are those of the scope's
// maps of N cells (two at most); tried once per target.
func (s *synth) rowsAsMap(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.reshapedFrom || t.shape[1] < 2 {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	var grids [][2]int
	for _, v := range vals {
		if len(v.shape) != 4 || v.shape[0] != b || v.shape[2]*v.shape[3] != n || len(grids) == 2 {
			continue
		}
		if g := [2]int{v.shape[2], v.shape[3]}; !slices.Contains(grids, g) {
			grids = append(grids, g)
		}
	}
	for _, g := range grids {
		proxy := s.readAs(t, []int{b, c, g[0], g[1]}, func(d []float32) []float32 {
			return permuteData(&val{shape: []int{b, n, c}, data: d}, []int{0, 2, 1})
		})
		proxy.reshapedFrom = true
		w := s.glueIn(proxy, sc)
		if w == nil {
			continue
		}
		if r := s.cellsAsRows(w, t); r != nil {
			return r
		}
	}
	return nil
}

// channelsLastRows explains a rows target [B, N, C] as an expression over a
// recent channels-first value [B, C, d1, …, dk] (a convolution's output,
// N = d1·…·dk) read as rows, channels last (permute, then flatten: what
// a model does before adding a vector to every token), the reading
// joining the scope for that one search. Tried once per target, late,
// where a value of those numbers exists and no form took the target.
func (s *synth) channelsLastRows(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	for _, v := range vals {
		k := len(v.shape) - 2
		if v.opaque || k < 1 || k > 3 || v.shape[0] != b || v.shape[1] != c || v.numel() != t.numel() || k == 1 && v.shape[2] == c {
			continue
		}
		perm := []int{0}
		for a := range k {
			perm = append(perm, a+2)
		}
		perm = append(perm, 1)
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "channels last"})
		rows := s.reshape(p, []int{b, n, c})
		if rows == nil {
			continue
		}
		proxy := *t
		proxy.reshapedFrom = true
		sc.vals = append(sc.vals, rows)
		w := s.glueIn(&proxy, sc)
		sc.vals = slices.DeleteFunc(sc.vals, func(x *val) bool { return x == rows })
		if w != nil {
			return w
		}
	}
	return s.channelsLastOperands(t, sc, vals)
}

// channelsLastOperands explains a rows target [B, N, C] as attention over
// the scope's own channels-first values ([B, C', d1, …]: 1×1 convolutions'
// q, k and v of a conv-form attention, fused or apart, the keys' grid
// perhaps another than the queries': Visformer's, LeViT's in its conv
// mode) read as rows, channels last, the four most recent joining the
// scope's own values for that one search.
func (s *synth) channelsLastOperands(t *val, sc *scope, vals []*val) *val {
	b, c := t.shape[0], t.shape[2]
	// only where one of them is a fused projection for the target's width
	// and rows ([k | v] or [q | k | v]: 2C or 3C channels over the
	// target's N cells), as a conv-form attention makes: every other
	// channels-first reading would pay an attention search for nothing
	fused := func(v *val) bool {
		return sc.own[v] && !v.opaque && len(v.shape) >= 3 && len(v.shape) <= 5 && v.shape[0] == b &&
			(v.shape[1] == 2*c || v.shape[1] == 3*c) && v.numel() == t.numel()/c*v.shape[1]
	}
	if !slices.ContainsFunc(vals, fused) {
		return nil
	}
	var added []*val
	for _, v := range vals {
		k := len(v.shape) - 2
		if v.opaque || !sc.own[v] || v.integral() || k < 1 || k > 3 || v.shape[0] != b || v.shape[1] == c && v.numel() == t.numel() || len(added) == 4 {
			continue
		}
		n := v.numel() / (b * v.shape[1])
		perm := []int{0}
		for a := range k {
			perm = append(perm, a+2)
		}
		perm = append(perm, 1)
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "channels last"})
		if rows := s.reshape(p, []int{b, n, v.shape[1]}); rows != nil {
			added = append(added, rows)
		}
	}
	if len(added) == 0 {
		return nil
	}
	for _, r := range added {
		sc.add(r, true)
	}
	proxy := *t
	proxy.reshapedFrom = true
	w := s.attention(&proxy, sc)
	sc.vals = slices.DeleteFunc(sc.vals, func(x *val) bool { return slices.Contains(added, x) })
	for _, r := range added {
		delete(sc.own, r)
	}
	return w
}

// tablesLast moves the RoPE tables of float coordinates (rope_coords) after
// the other values: operands of few forms, they take no place of the
// forms' capped candidate lists (a tiny trace's tables share the shape of
// its streams).
func tablesLast(vs []*val) []*val {
	table := func(v *val) bool { return v.fit != nil && v.fit.kind == "rope_coords" }
	return append(slices.DeleteFunc(slices.Clone(vs), table), slices.DeleteFunc(slices.Clone(vs), func(v *val) bool { return !table(v) })...)
}

func recentFirst(vs []*val) []*val {
	out := slices.Clone(vs)
	slices.Reverse(out)
	return out
}

// wrongRow reports whether some row of v (its last axis) misses t's by
// more than 10·tol of its own size and by more than tol of t's (a row
// near zero, where rounding alone moves it by much of itself, is not
// taken for a wrong one).
func wrongRow(v, t *val, tol float64) bool {
	n := t.shape[len(t.shape)-1]
	if n == 0 || len(v.data) != len(t.data) || len(t.data) == n {
		return false
	}
	all := rms(t.data)
	diff := make([]float32, n)
	for r := 0; r+n <= len(t.data); r += n {
		for i := range diff {
			diff[i] = v.data[r+i] - t.data[r+i]
		}
		if e := rms(diff); e > 10*tol*rms(t.data[r:r+n]) && e > tol*all {
			return true
		}
	}
	return false
}

// looseFloor is the error above which an explanation is loose: kept while
// later forms try for a tighter one. f32 arithmetic done as the reference did
// it lands near 1e-7, so an explanation two orders above that is likely a
// different computation that happens to come close. In a narrow format the
// same computation rounds the same way (most values bit-exact; a value off by
// a rounding everywhere is about u/2 in rel-RMS), so one above a quarter of
// the unit roundoff is a near miss a rounding step hides: a recurrent state
// near its fixed point read from the previous cycle instead of this one.
func looseFloor(f precision.Format) float64 {
	switch f {
	case precision.F32:
		return 1e-6
	case precision.BF16:
		return 0x1p-10
	case precision.F16:
		return 0x1p-13
	}
	return math.Inf(1)
}

// looseActivation is the error above which an activation explaining a
// target of a narrow format is loose: the reference computes it in f32
// and rounds once (or each primitive: ~2e-3 in bf16), so an error of
// several times that is another function the format's rounding hides.
// Not for f32 targets: there another function misses the tolerance.
func looseActivation(f precision.Format) float64 {
	switch f {
	case precision.BF16:
		return 4e-3
	case precision.F16:
		return 5e-4
	}
	return math.Inf(1)
}

// moved: a value itself, reshaped, or permuted then reshaped.
func (s *synth) moved(t *val, vals []*val) *val {
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.numel() != t.numel() || v.opaque {
			continue
		}
		if relRMS(t.format, v.data, t.data) <= tol {
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
			if relRMS(t.format, permuteData(v, perm), t.data) <= tol {
				p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "permute"})
				return s.reshape(p, t.shape)
			}
		}
	}
	// a value read with the target's axes in another order (heads split
	// off the width and moved: [B, S, H·D] → [B, H, S, D]), or one of the
	// k equal parts of a fused projection's width read so
	// (rearrange("b l (k h d) -> k b h l d"))
	if len(t.shape) >= 3 && len(t.shape) <= 5 {
		type piece struct {
			v    *val
			k, i int       // part i of k of the width; k = 1: the whole value
			data []float32 // its values in order
		}
		var pieces []piece
		for _, v := range vals {
			if v.opaque || len(v.shape) < 2 {
				continue
			}
			if v.numel() == t.numel() {
				pieces = append(pieces, piece{v: v, k: 1, data: v.data})
				continue
			}
			last := len(v.shape) - 1
			for _, k := range []int{2, 3} {
				if v.numel() != k*t.numel() || v.shape[last]%k != 0 {
					continue
				}
				w := v.shape[last] / k
				for i := range k {
					pieces = append(pieces, piece{v: v, k: k, i: i, data: sliceData(v, last, i*w, (i+1)*w)})
				}
			}
		}
		for _, pc := range pieces {
			for _, pi := range permutations(len(t.shape)) {
				if isIdentity(pi) {
					continue
				}
				// split: the shape that pi permutes into t's
				split := make([]int, len(t.shape))
				for i, a := range pi {
					split[a] = t.shape[i]
				}
				if relRMS(t.format, permuteData(&val{shape: split, data: pc.data}, pi), t.data) > tol {
					continue
				}
				v := pc.v
				if pc.k > 1 {
					last := len(v.shape) - 1
					w := v.shape[last] / pc.k
					v = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: last, Start: pc.i * w, End: (pc.i + 1) * w}, args: []*val{v}, out: v.format, label: fmt.Sprintf("part %d of %d", pc.i, pc.k)})
					if v == nil {
						continue
					}
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

// window: the leading corner of two axes of v (a table of positions cut
// to the request's grid, table[:h, :w]), reshaped as t.
func (s *synth) window(t, v *val, tol float64) *val {
	for a := range v.shape {
		for b := a + 1; b < len(v.shape); b++ {
			rest := v.numel() / (v.shape[a] * v.shape[b])
			if t.numel()%rest != 0 {
				continue
			}
			m := t.numel() / rest
			for sa := 1; sa < v.shape[a] && sa <= m; sa++ {
				sb := m / sa
				if m%sa != 0 || sb >= v.shape[b] {
					continue
				}
				va := &val{shape: slices.Clone(v.shape), data: sliceData(v, a, 0, sa)}
				va.shape[a] = sa
				if relRMS(t.format, sliceData(va, b, 0, sb), t.data) > tol {
					continue
				}
				c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: a, Start: 0, End: sa}, args: []*val{v}, out: v.format, label: "window"})
				c = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: b, Start: 0, End: sb}, args: []*val{c}, out: v.format, label: "window"})
				return s.reshape(c, t.shape)
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
		for c := range axisCuts(t, v) {
			ax, start, size := c[0], c[1], c[2]
			if relRMS(t.format, sliceData(v, ax, start, start+size), t.data) > tol {
				continue
			}
			c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: start, End: start + size}, args: []*val{v}, out: v.format, label: "slice"})
			return s.reshape(c, t.shape)
		}
		if c := s.window(t, v, tol); c != nil {
			return c
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
				if relRMS(t.format, sliceData(gv, len(shape)-2, i, i+1), t.data) > tol {
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

func sameShape(t *val, vals []*val) []*val {
	var out []*val
	for _, v := range vals {
		if !v.opaque && slices.Equal(v.shape, t.shape) {
			out = append(out, v)
		}
	}
	return out
}

// likeShape is sameShape, and the values of as many elements and the
// same last axis in another shape ([B·S, D] for [B, S, D]: a mixture's
// tokens flattened), reshaped to t's.
func (s *synth) likeShape(t *val, vals []*val) []*val {
	out := sameShape(t, vals)
	last := func(v *val) int { return v.shape[len(v.shape)-1] }
	for _, v := range vals {
		if v.opaque || slices.Equal(v.shape, t.shape) || len(v.shape) == 0 || len(t.shape) == 0 || v.numel() != t.numel() || last(v) != last(t) {
			continue
		}
		if r := s.reshape(v, t.shape); r != nil {
			out = append(out, r)
		}
	}
	return append(out, s.imagesAsRows(t, vals)...)
}

// imagesAsRows are the scope's images [B, C, H, W] read as the rows
// [B, H·W, C] of a target of that shape (a convolution's result back in
// the token sequence: flattened, then channels last), at most two.
func (s *synth) imagesAsRows(t *val, vals []*val) []*val {
	if len(t.shape) != 3 {
		return nil
	}
	var out []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) != 4 || v.shape[0] != t.shape[0] || v.shape[1] != t.shape[2] || v.shape[2]*v.shape[3] != t.shape[1] {
			continue
		}
		r := s.reshape(v, []int{v.shape[0], v.shape[1], t.shape[1]})
		if r == nil {
			continue
		}
		if p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{r}, out: v.format, label: "channels last"}); p != nil {
			out = append(out, p)
		}
		if len(out) == 2 {
			break
		}
	}
	return out
}

// constant is a scalar the program holds, declared where a node first
// reads it (a fit tries hundreds that no node keeps).
// zeros is a constant of zeros the program declares (note says what
// it is and what it is made from).
func (s *synth) zeros(shape []int, f precision.Format, origin, note string) *val {
	z := &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: f, origin: origin}
	s.em.constant(z, note)
	return z
}

func (s *synth) constant(c float64) *val {
	s.seq++
	return &val{shape: []int{1}, data: []float32{float32(c)}, format: f32, seq: s.seq, scalar: true}
}

// leadingPart finds a value of t's shape but for axis ax whose first n
// entries along ax (0 < n < its length, as many as match) are t's from
// off on, and returns that slice of it; nil when none is.
func (s *synth) leadingPart(t *val, ax, off int, vals []*val) *val {
	return s.valuePart(t, ax, off, vals, false)
}

// innerPart finds a value of t's shape but for axis ax whose entries
// [a, a+n) along ax (a > 0, n as many as match) are t's from off on, and
// returns that slice of it; nil when none is. Where the slice's bounds
// come from a request's mask (rows reordered valid first), the program
// holds them as the captured request had them, as leadingPart does.
func (s *synth) innerPart(t *val, ax, off int, vals []*val) *val {
	return s.valuePart(t, ax, off, vals, true)
}

// valuePart is leadingPart (the part starts at 0) or innerPart (later).
func (s *synth) valuePart(t *val, ax, off int, vals []*val, inner bool) *val {
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.opaque || len(v.shape) != len(t.shape) || v.shape[ax] < 2 {
			continue
		}
		same := true
		for i := range v.shape {
			same = same && (i == ax || v.shape[i] == t.shape[i])
		}
		if !same {
			continue
		}
		starts, label := []int{0}, "leading part"
		if inner {
			starts, label = nil, "part"
			for a := 1; a < v.shape[ax]; a++ {
				starts = append(starts, a)
			}
		}
		for _, a := range starts {
			n := 0
			for a+n < v.shape[ax] && off+n < t.shape[ax] && relRMS(t.format, sliceData(v, ax, a+n, a+n+1), sliceData(t, ax, off+n, off+n+1)) <= tol {
				n++
			}
			if n == 0 || !inner && (n == v.shape[ax] || off == 0 && n == t.shape[ax]) {
				continue // nothing, all of it (a whole piece), or all of t alone
			}
			p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: a, End: a + n}, args: []*val{v}, out: v.format, label: label})
			if p != nil && s.everyStep(p, s.part(t, ax, off, off+n), tol) {
				return p
			}
		}
	}
	return nil
}

// repeated explains t as a value repeated k times along one axis: each
// copy after the last (torch's repeat, or repeat_interleave of a length-1
// axis: a batch of one spread over frames), or each entry k times in turn
// (repeat_interleave: a vector per frame spread over its patches).
func (s *synth) repeated(t *val, vals []*val) *val {
	var cands []*expr
	for _, v := range vals {
		if v.opaque || v.numel() == 0 || t.numel()%v.numel() != 0 || t.numel() == v.numel() || len(v.shape) != len(t.shape) {
			continue
		}
		k := t.numel() / v.numel()
		for ax := range t.shape {
			if t.shape[ax] != k*v.shape[ax] || !equalBut(t.shape, v.shape, ax) {
				continue
			}
			cands = append(cands, &expr{op: program.OpRepeat, attrs: program.Attrs{N: k, Axis: ax}, args: []*val{v}, out: v.format, label: fmt.Sprintf("repeat %d along %d", k, ax)})
			if v.shape[ax] > 1 {
				split := slices.Insert(slices.Clone(v.shape), ax+1, 1)
				r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: k, Axis: ax + 1}, args: []*val{s.reshape(v, split)}, out: v.format, label: "interleaved"})
				if r != nil {
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{r}, out: v.format, label: fmt.Sprintf("repeat_interleave %d along %d", k, ax)})
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	w, _ := s.best(t, cands)
	return w
}

// longerOnOne reports whether a has b's rank and agrees with it on every
// axis but one, where a is longer.
func longerOnOne(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for ax := range a {
		if a[ax] > b[ax] && equalBut(a, b, ax) {
			return true
		}
	}
	return false
}

// cutReshapes reports whether a part of one axis of a value of shape a,
// of another rank, holds the elements of shape b in b's order: the part's
// elements a multiple of the rest of a, b's last axis the axes after the
// cut, its one before a divisor of the part (q split from a map's
// channels and viewed as [B·H, D, H·W]: BoTNet's and HaloNet's queries).
func cutReshapes(a, b []int) bool {
	if len(a) == len(b) || len(b) < 2 {
		return false
	}
	n := exec.Numel(b)
	for ax := range a {
		rest := exec.Numel(a) / a[ax]
		after := exec.Numel(a[ax+1:])
		if rest > 0 && n%rest == 0 && n/rest < a[ax] && after == b[len(b)-1] && (n/rest)%b[len(b)-2] == 0 {
			return true
		}
	}
	return false
}

// equalBut reports whether a and b agree on every axis but ax.
func equalBut(a, b []int, ax int) bool {
	for i := range a {
		if i != ax && a[i] != b[i] {
			return false
		}
	}
	return true
}

// combinedPiece explains t's rows [off, off+n) along ax as a + g·b or a·b
// of values (combined), a mean of one (pooled) or a modulated value, for n
// one (a lone token: lone is true) or each value's length along ax.
func (s *synth) combinedPiece(t *val, sc *scope, ax, off, rest int, vals []*val) (piece *val, lone bool) {
	var lengths []int
	for _, v := range vals {
		if !v.opaque && v.numel()%rest == 0 && !slices.Contains(lengths, v.numel()/rest) {
			lengths = append(lengths, v.numel()/rest)
		}
	}
	fromValues := len(lengths)
	if !slices.Contains(lengths, 1) {
		lengths = append(lengths, 1) // one token (a global or pooled one), whatever the values' lengths
	}
	// the longest piece first: a run of rows one expression makes (tokens
	// joined mid-network, an embedding broadcast over a table) is not read
	// as lone tokens, each a row of the table, which would spend the
	// join's pieces
	order := make([]int, len(lengths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return lengths[b] - lengths[a] })
	for _, i := range order {
		n := lengths[i]
		if n == 0 || n >= t.shape[ax] || n > t.shape[ax]-off {
			continue
		}
		sub := s.part(t, ax, off, off+n)
		shape := sub.shape
		for _, try := range []func(*val, []*val) *val{s.combined, s.pooled, func(t *val, vs []*val) *val { return s.modulated(t, sc, vs) }} {
			if w := try(sub, vals); w != nil && relRMS(sub.format, w.data, sub.data) <= tolerance(t.format) {
				return s.reshape(w, shape), i >= fromValues
			}
		}
	}
	return nil, false
}

// broadcastPiece explains t's entries [off, off+n) along ax as a value
// v with one of t's other axes of length 1 in v, repeated along it; n is
// v's last axis where that is what joins, else (a parameter) the length
// its entries fill.
func (s *synth) broadcastPiece(t *val, ax, off int, vals []*val) *val {
	rest := t.numel() / t.shape[ax]
	for _, v := range vals {
		if v.opaque || v.numel() == 0 || len(v.shape) == 0 {
			continue
		}
		// the value's last axis is what joins; along another axis only a
		// parameter (learned tokens joined after each frame's rows)
		if ax != len(t.shape)-1 && !v.param {
			continue
		}
		for a := range t.shape {
			if a == ax || t.shape[a] < 2 {
				continue
			}
			n := v.shape[len(v.shape)-1]
			if ax != len(t.shape)-1 {
				// as many entries along ax as the value holds once
				// copied along a
				if v.numel()*t.shape[a]%rest != 0 {
					continue
				}
				n = v.numel() * t.shape[a] / rest
			}
			if n < 1 || n >= t.shape[ax] || n > t.shape[ax]-off {
				continue
			}
			sub := s.part(t, ax, off, off+n)
			shape := sub.shape
			one := slices.Clone(shape)
			one[a] = 1
			if exec.Numel(one) != v.numel() {
				continue
			}
			r := s.reshape(v, one)
			if w, _ := s.best(sub, []*expr{{op: program.OpRepeat, attrs: program.Attrs{N: shape[a], Axis: a}, args: []*val{r}, out: v.format, label: "broadcast"}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// constantPiece takes t's entries from off on along ax as a constant of
// the model where they are equal at every captured step and some piece
// before them varies (so the constancy is the model's, not the
// request's); nil otherwise.
func (s *synth) constantPiece(t *val, ax, off int, pieces []*val) *val {
	if !slices.ContainsFunc(pieces, func(p *val) bool { return s.varying([]*val{p}) }) {
		return nil
	}
	shape := slices.Clone(t.shape)
	shape[ax] = t.shape[ax] - off
	at := func(st int) ([]float32, bool) {
		d, ok := s.at(t, st)
		if !ok {
			return nil, false
		}
		return sliceData(&val{shape: t.shape, data: d}, ax, off, t.shape[ax]), true
	}
	if !s.invariant(t.format, at, 0) {
		return nil
	}
	c := &val{shape: shape, data: sliceData(t, ax, off, t.shape[ax]), format: t.format, origin: t.origin + "/table"}
	s.em.constant(c, "equal at every captured step beside values that vary: a table of the model (a buffer it makes), joined to them")
	return c
}

// movedPiece is t's entries from off on along ax as a value of the scope
// with its axes moved (permuted, then reshaped), at every step; nil where
// no value of a whole number of t's slices along ax is.
func (s *synth) movedPiece(t *val, ax, off, rest int, vals []*val) *val {
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.opaque || v.numel()%rest != 0 || len(v.shape) < 2 {
			continue
		}
		n := v.numel() / rest
		if n == 0 || n >= t.shape[ax] || n > t.shape[ax]-off {
			continue
		}
		sub := s.part(t, ax, off, off+n)
		if w := s.moved(sub, []*val{v}); w != nil && w.from != nil && w.from.op != program.OpCast && s.everyStep(w, sub, tol) {
			return w
		}
	}
	return nil
}

// joined explains t as values of the scope joined along one axis (a
// joint sequence, register tokens before the text, sinusoids side by
// side), up to four pieces, each the same tensor as a value (moved).
func (s *synth) joined(t *val, sc *scope, vals []*val) *val { return s.joinedAt(t, sc, vals, 0) }

// joinedAt is joined with pieces that are themselves joins (depth ≤ 1):
// two streams' attention rows joined, then joined with an MLP's columns.
func (s *synth) joinedAt(t *val, sc *scope, vals []*val, depth int) *val {
	tol := tolerance(t.format)
	for ax := range t.shape {
		if t.shape[ax] < 2 {
			continue
		}
		var pieces []*val
		// up to six pieces: an unCLIP prior joins its text rows, three
		// conditioning rows and a learned token; a caption's conditions
		// their valid rows each
		off, made, single := 0, 0, false // made: pieces combinedPiece explained; single: one of them a lone token no value's length gave
		for off < t.shape[ax] && len(pieces) < 6 {
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
				sub := s.part(t, ax, off, off+n)
				if relRMS(t.format, v.data, sub.data) > tol || !s.everyStep(v, sub, tol) {
					continue // a piece holds at every step, not at step 0 alone (1 − σ = 0 beside a table of zeros)
				}
				found = s.reshape(v, sub.shape) // the piece, in t's layout
				break
			}
			if found == nil && depth == 0 {
				// a value where a mask keeps its rows, a learned null
				// vector where it drops them (padded objects' features)
				found = s.nullBlendedPiece(t, ax, off, vals)
			}
			if found == nil {
				// a piece that is a value with its axes moved (a conv's
				// channels-first patches read as rows after a class token)
				found = s.movedPiece(t, ax, off, rest, vals)
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
					sub := s.part(t, ax, off, off+n)
					if w := s.joinedAt(sub, sc, vals, depth+1); w != nil {
						found = w
						break
					}
				}
			}
			if found == nil && depth == 0 {
				// a piece that is the leading part of a value (a caption
				// cut to its length before it joins the image rows)
				found = s.leadingPart(t, ax, off, vals)
			}
			if found == nil && depth == 1 && s.nestedParts {
				// a leading part of a value inside a nested join, or of
				// a window of a value longer on one other axis (the
				// caption rows of a joint block's output)
				if found = s.leadingPart(t, ax, off, vals); found == nil {
					found = s.leadingPart(t, ax, off, s.windows(t, ax, vals))
				}
			}
			if found == nil && depth == 0 && (off > 0 && (s.latePieces || s.nestedParts) || off == 0 && ax == 1 && len(t.shape) == 4) {
				// a later part of a value (two captions' valid rows
				// first, then the padding rows of each; a map's channels
				// split off to start a dense path, DPN's)
				found = s.innerPart(t, ax, off, vals)
			}
			if found == nil && depth == 0 {
				// a proper leading part of a sum of two values (a caption
				// plus its kind's embedding, cut to its valid rows)
				found = s.leadingSumPiece(t, ax, off, vals)
			}
			if found == nil && depth == 0 && (ax < len(t.shape)-1 || s.latePieces) {
				// a piece that is a sum or product of values (a global
				// token made of two embeddings, prepended to the rows),
				// their mean (a pooled token) or a modulated value (each
				// stream modulated by its own vectors, then joined), along
				// the rows
				var lone bool
				if found, lone = s.combinedPiece(t, sc, ax, off, rest, vals); found != nil {
					made++
					single = single || lone
				}
			}
			if found == nil && depth == 0 && ax == 0 {
				// a table of per-position rows averaged over blocks of
				// its grid (brought to a strided convolution's tokens)
				found = s.gridPooledPiece(t, off, vals)
			}
			if found == nil && depth == 0 {
				// a value broadcast over the rows before it joins (a
				// timestep's features beside a table of slot features)
				found = s.broadcastPiece(t, ax, off, vals)
			}
			if found == nil && depth == 0 {
				// cos or sin of a parameter's angles (a class token's
				// row joined before a RoPE table)
				found = s.angleRowsPiece(t, ax, off, vals)
			}
			if found == nil && depth == 0 && ax == len(t.shape)-1 {
				// sinusoids of each entry of a [B, k] value, laid side
				// by side (micro-conditions embedded, then joined)
				found = s.flatSinusoidPiece(t, ax, off, vals)
			}
			if found == nil && depth == 0 && len(pieces) > 0 {
				// the rest, equal at every step while what it joins
				// varies: a table the model makes (a buffer)
				found = s.constantPiece(t, ax, off, pieces)
			}
			if found == nil {
				break
			}
			pieces = append(pieces, found)
			off += found.shape[ax]
		}
		// pieces that are all expressions are a join only where each is as
		// long as a value is (the streams' rows), not an expression cut
		if off != t.shape[ax] || len(pieces) < 2 || made == len(pieces) && single {
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

// scaledByValue explains t as a pointwise form of a value (a norm without
// parameters) times another value of the scope that broadcasts to t's
// shape (a modulation or gate vector per sample, given to the norm as an
// argument of its own): t divided by the multiplier is explained by the
// pointwise forms, and the product must reproduce t at every step. Tried
// once every other form failed.
func (s *synth) scaledByValue(t *val, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) < 2 {
		return nil
	}
	for _, m := range vals {
		if m.opaque || m.numel() <= 1 || m.numel() >= t.numel() || !broadcasts(m.shape, t.shape) {
			continue
		}
		if slices.ContainsFunc(m.data, func(x float32) bool { return math.Abs(float64(x)) < 1e-6 }) {
			continue
		}
		div := func(td, md []float32) []float32 {
			b := broadcastData(md, m.shape, t.shape)
			out := make([]float32, len(td))
			for i := range td {
				out[i] = td[i] / b[i]
			}
			return out
		}
		proxy := &val{shape: t.shape, data: div(t.data, m.data), format: t.format, origin: t.origin, reshapedFrom: true}
		if s.hasSteps(t) {
			proxy.perStep = func(st int) []float32 {
				td, ok1 := s.at(t, st)
				md, ok2 := s.at(m, st)
				if !ok1 || !ok2 || len(td) != t.numel() || len(md) != m.numel() {
					return nil
				}
				return div(td, md)
			}
		}
		var rest []*val
		for _, v := range vals {
			if v != m {
				rest = append(rest, v)
			}
		}
		w := s.pointwise(proxy, rest)
		if w == nil {
			continue
		}
		if p, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{w, m}, out: t.format, label: "scaled by a value"}}); p != nil {
			return p
		}
	}
	return nil
}

// broadcasts reports whether shape a broadcasts to b (the same rank, each
// axis equal or 1).
func broadcasts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && a[i] != 1 {
			return false
		}
	}
	return true
}

// broadcastData lays d (shape a) out over shape b.
func broadcastData(d []float32, a, b []int) []float32 {
	n := 1
	for _, x := range b {
		n *= x
	}
	out := make([]float32, n)
	idx := make([]int, len(b))
	for i := range out {
		off := 0
		for ax := range a {
			off *= a[ax]
			if a[ax] != 1 {
				off += idx[ax]
			}
		}
		out[i] = d[off]
		for ax := len(b) - 1; ax >= 0; ax-- {
			idx[ax]++
			if idx[ax] < b[ax] {
				break
			}
			idx[ax] = 0
		}
	}
	return out
}
