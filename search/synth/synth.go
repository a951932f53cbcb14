package synth

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/readoff"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

var f32 = precision.F32

// synth is the state of one discovery.
type synth struct {
	ctx context.Context // cancelled: the search stops at the next call
	// hurry done: boundaries not yet explained are taken from the trace
	// without a search (their glue is skipped, a running one cut short),
	// so that the walk ends with a partial program before ctx does.
	hurry context.Context
	// late: the glue search's second pass over a target every form of the
	// first (the reshaped readings included) failed to explain, where the
	// forms added for state-space mixers and multipliers are tried too
	// (glue): a target the older forms explain never costs them.
	late bool
	// unitScale: unscaledAttention's scan, every choice at scale 1
	unitScale bool
	// qkScale: the scale of attention over a q padded to the values' head
	// width (unequalHeads), by that q; qkWidth: that head width.
	qkScale map[*val]float32
	// columns: each value's per-column range (attentionHeld), memoised
	columns map[*val][]span
	qkWidth map[*val]int
	// narrowing: narrowValues' padded search is running (it does not nest).
	narrowing bool
	// wideRefine: the attention search refines its six best first-stage
	// choices, not three (widerAttention, a late form: a temperature far
	// from 1/√d can rank the right operands fourth)
	wideRefine bool
	// peeling: peeledAdd is explaining t − b (glue tries its first forms
	// only, and no peel inside the peel)
	peeling bool
	// inserting: insertedRows is explaining t with a value's rows taken
	// out (no insertion inside it)
	inserting bool
	// sharedKV: sharedKVAttention's scan, keys and values one value of
	// the scope (v as it is, or rotated as k is)
	sharedKV bool
	// splitting: classRowsApart or firstFrameApart is explaining a first
	// row or frame, or the rest
	// (no split inside it)
	splitting bool
	// rowsApart: classRowsApart is explaining a first row or the rest:
	// the target's rows are token rows, so no reading of it as a map laid
	// out channels first (mapsAttention) applies
	rowsApart bool
	// grid: the grid gridAttention read its target's rows from (nil:
	// none), for the biases made on it (queryPositionBiases)
	grid []int
	// relConsts: the offset patterns and resamplings those biases made
	relConsts map[string]*val
	// convClips: the clip each 3-D convolution module last convolved,
	// padded as its fit read it, by module path without the call's
	// ordinal: the past a later call may join before its own frames (a
	// causal convolution keeping its last padded frames on the module
	// between calls: EasyAnimate's VAE)
	convClips map[string]*val
	tr        *trace.Trace
	ev        *evaluator
	em        *emitter
	params    map[string]*val
	// freqsRead: sinusoid frequency entries read off captures so far, by
	// table (readTable), for sinusoids whose own captures do not decide
	freqsRead map[freqKey]map[int]float32
	opaque    []*val
	// carried: values of calls that have returned, newest last, for a
	// later call's arguments to read (carried.go)
	carried      []*val
	carriedSeen  map[*val]bool
	attn         []attnRecord
	relShifts    []relShiftRecord     // how each relative-position attention's terms were found
	disentangled []disentangledRecord // what each disentangled attention's terms and scale were
	lambdas      []lambdaRecord       // how each differential attention's λ was explained
	temperatures []temperatureRecord  // how each cosine attention's temperature was made
	mlps         []mlpRecord
	ropes        []ropeRecord
	// coordRopes: RoPE tables made from float coordinates (fitCoordRope)
	coordRopes []coordRopeRecord
	// ropeSplits are the axis splits RoPE tables were fitted with, in
	// order (an exact tie of splits goes to one of these).
	ropeSplits [][]int
	linearAttn []linearAttnRecord
	scans      []ssmRecord // selective scans (ssm_scan), for ssm_skip
	// recurrents: recurrent layers (recurrence), for recurrent_cell and
	// recurrent_batch_first
	recurrents []*recurrentRecord
	// calledParams are the parameters some call of the trace holds (made
	// once, on the first attention-pool attempt).
	calledParams map[string]bool
	mods         []modRecord
	sinusoids    []sinusoidRecord
	// positionTables: sinusoid tables of positions + an offset output by
	// a call of their own (fitPositionSinusoid)
	positionTables []sinusoidRecord
	// angular: YOSO's expected LSH attentions (angularAttention)
	angular []angularRecord
	// sinkhorns: doubly stochastic mixing matrices (mixSinkhorn)
	sinkhorns []sinkhornRecord
	norms     []normRecord
	// batchNorms: batch norms read with their initial statistics
	batchNorms []batchNormRecord
	// readerParams: the call whose argument is being explained holds
	// parameters (a module computes with it, as talking heads' linears
	// read attention scores)
	readerParams bool
	// readingArg: the target being explained is an argument of a child
	// call (where a value kept from an earlier call comes in)
	readingArg bool
	// bilinear: corner ids read as a bilinear resampling (bilinearSum)
	bilinear []bilinearRecord
	scopeOf  string // the module of the call being explained
	linears  []*val
	gates    []gateRecord
	seq      int
	// steps memoises values recomputed at other steps.
	steps map[*val]map[int][]float32
	// patchRows is the image stream's rows (the latents' patches), 0 when
	// the latents are not patched; patchLayouts where (c, ph, pw) patches
	// were found.
	patchRows    int
	patchLayouts []string
	// latentsIn is where the latents sit in the model argument that joins
	// them with a condition (nil: an argument is the latents as they are).
	latentsIn *latentsPart
	// guidance is where the model's argument repeats the latents for
	// classifier-free guidance (nil: it does not)
	guidance *guidanceAxis
	// callResults are the first results of a step's model calls, in
	// order (a prompt's and a negative prompt's calls, for guidance)
	callResults []*val
	// joins are the joined sequences of two streams the search found.
	joins []joinRecord
	// latents is the request input the driving bound as the flow loop's
	// latents.
	latents *val
	// lats: every latents of the flow loop, in the order of their roles
	// (latents, latents.1, …), with the argument port that takes each
	lats []latentsArg
	// sigma is σ_i, the step input every timestep argument is made from;
	// sigmaNext σ_{i+1}, bound where an argument is made from it.
	sigma, sigmaNext *val
	// stepIndex is the model call's index i (stepIndexValue), bound where
	// a module is switched by step; stepped: the run is a sampling loop,
	// whose program the runner gives i at each call.
	stepIndex *val
	stepped   bool
	// replay: what glue found in the first of repeated calls (replay.go);
	// nil: every target searched afresh (Options.Afresh)
	replay *replays
	// headsAxis: each per-sample score bias [B, Sq or 1, Sk] given a heads
	// axis (scoreBiases), made once
	headsAxis map[*val]*val
	// joint memoises joined attentions (two streams' rows of one node).
	joint map[string]*val
	// latePieces: a join's pieces may be combined values along the last
	// axis, or later parts of values (set while joinedWide searches).
	latePieces bool
	// nestedParts: a join's piece that is itself a join may hold leading
	// parts of values (set while joinedOfParts searches).
	nestedParts bool
	// progress is Options.Progress; calls counts the calls of step 0
	// explained of callsTotal.
	progress          func(phase string, done, total int)
	calls, callsTotal int
	// logf is Options.Log (nil: no log).
	logf func(format string, args ...any)
	// fault is Options.Fault (nil: a panic goes on).
	fault func(boundary string, err error)
}

// Options configure Discover.
type Options struct {
	// Progress, when set, is told the search's progress: PhaseCalls
	// counts the calls of step 0 explained (a call once everything inside
	// it is) up to all of them; PhaseSampler, without a counter, is the
	// sampler around the model and the factors read from the program.
	Progress func(phase string, done, total int)
	// Log, when set, is told each boundary the search explains, with its
	// time and how it ended: a developer's view of where a slow or
	// failing search spends itself (zflow reads ZFLOW_SEARCH_LOG).
	Log func(format string, args ...any)
	// Fault, when set, is told of a panic while explaining one boundary
	// (a bug), which then leaves that boundary unexplained, so that the
	// document is written, incomplete, rather than none at all; unset,
	// the panic goes on (tests).
	Fault func(boundary string, err error)
	// Afresh, when set, searches every target of a repeated call anew
	// instead of first replaying what the first call of its shape found
	// (replay.go): slower, for measuring what the replay changes.
	Afresh bool
	// Hurry, when set and done before Discover's context, ends the search
	// for expressions: the boundaries left are taken from the trace (and
	// listed as such) while the rest of the walk, the sampler and the
	// factors still run, so that a search out of time still writes a
	// partial document.
	Hurry context.Context
}

// The phases Options.Progress names.
const (
	PhaseCalls   = "calls of step 0"
	PhaseSampler = "sampler and factors"
)

func (s *synth) report(phase string, done, total int) {
	if s.progress != nil {
		s.progress(phase, done, total)
	}
}

// attnRecord is one attention the search explained, for the factors.
type attnRecord struct {
	choice     attnChoice
	joint      string // the joint order of a joined attention, "" otherwise
	scope      string
	boundary   string
	candidates []semantics.Candidate
}

// Result is a discovered program document and what could not be
// explained.
type Result struct {
	Doc *semantics.Document
	// Opaque lists the boundaries no expression explains ("<module>/<port>").
	Opaque []string
	// Unexplained lists every boundary, in the order the search met them,
	// that no expression explains (needed by the output or not).
	Unexplained []string
	// Unsearched counts the unexplained boundaries left without a search
	// because Options.Hurry ended it.
	Unsearched int
	Evals      int
}

// Complete reports whether the program makes its output from the request
// alone (no boundary taken from the trace).
func (r *Result) Complete() bool { return len(r.Opaque) == 0 }

// Discover recovers the model's program from the trace: every call of
// step 0 explained from its arguments (leaves fitted from shapes and
// values, the glue between calls searched as expressions of the op
// vocabulary), then the sampler around it. The document it returns is
// version 2; it is not yet checked (the caller runs the teacher-forced
// check).
func Discover(ctx context.Context, tr *trace.Trace, path string, o Options) (*Result, error) {
	roots := stepRoots(tr, 0)
	if len(roots) == 0 {
		return nil, fmt.Errorf("synth: step 0 has no root call")
	}
	root := roots[0]
	act := tr.ActivationFormat()
	if act != precision.BF16 && act != precision.F16 {
		act = precision.F32 // a float64 reference is searched in f32
	}
	hurry := o.Hurry
	if hurry == nil {
		hurry = ctx
	}
	s := &synth{ctx: ctx, hurry: hurry, tr: tr, ev: &evaluator{b: cpu.New(1), ctx: hurry}, em: newEmitter(act), params: map[string]*val{}, steps: map[*val]map[int][]float32{}, joint: map[string]*val{},
		progress: o.Progress, logf: o.Log, fault: o.Fault}
	if !o.Afresh {
		s.replay = newReplays()
	}
	for _, r := range roots {
		s.callsTotal += subtreeSize(tr, r)
	}
	drive, err := s.driving(root)
	if err != nil {
		return nil, err
	}
	s.report(PhaseCalls, 0, s.callsTotal)
	if err := s.beforeLoop(drive); err != nil {
		return nil, err
	}
	outs, err := s.call(root, drive.args)
	if err != nil {
		return nil, err
	}
	// later model calls of the step (a ControlNet's UNet): their arguments
	// the request's, as the first call's were bound, or results of the
	// calls before them; the step's result is the last call's
	pool := valuesInOrder(drive.args)
	s.callResults = []*val{outs[drive.outPort]}
	for _, r := range roots[1:] {
		pool = append(pool, valuesInOrder(outs)...)
		args, err := s.chainedArgs(r, pool, func(target *val) *val { return s.requestFor(drive, target) })
		if err != nil {
			return nil, err
		}
		if outs, err = s.call(r, args); err != nil {
			return nil, err
		}
		if drive.outPort = firstResult(r); drive.outPort == "" {
			return nil, fmt.Errorf("synth: the model call %s has no tensor result", r.Module)
		}
		s.callResults = append(s.callResults, outs[drive.outPort])
	}
	s.ev.ctx = ctx // the sampler and the factors evaluate past a hurry
	s.report(PhaseSampler, 0, 0)
	out, ok := outs[drive.outPort]
	if !ok {
		return nil, fmt.Errorf("synth: the model call has no result %q", drive.outPort)
	}
	finals := []*val{out}
	var factors []semantics.Factor
	switch {
	case drive.run == "flow_euler" && len(s.lats) > 1:
		// several latents: each stepped by its own result of the call
		vs, f, err := s.velocities(outs, drive.structure.Outputs)
		if err != nil {
			return nil, err
		}
		finals = vs
		factors = append(factors, f)
	case drive.run == "flow_euler":
		v, f, err := s.velocity(root, out)
		if err != nil {
			return nil, err
		}
		finals[0] = v
		factors = append(factors, f)
	}
	s.em.p.Outputs = nil
	for _, final := range finals {
		if final.opaque || s.needsOpaque(final) {
			// an output the program cannot make: still a document, incomplete
			final.opaque = true
		}
		name, err := s.em.emit(final, "model")
		if err != nil {
			return nil, err
		}
		s.em.p.Outputs = append(s.em.p.Outputs, name)
	}
	factors = append(factors, s.readFactors()...)
	if drive.run == "flow_euler" {
		// the program's timestep input is σ_i in f32: it makes the model's
		// timestep argument itself
		s.em.rules = append(s.em.rules, semantics.PrecisionRule{Op: "cast", Role: "sampler.timestep", Out: "f32", Pinned: true})
	}
	prog := s.programDoc()
	// what the program shows that no fit recorded (forms added later)
	factors = append(factors, readoff.Missing(prog, factors)...)
	factors = append(factors, readoff.Absent(s.tableRopes(), factors)...)
	doc := &semantics.Document{
		Format: semantics.FormatName, Version: semantics.ProgramVersion,
		Source:    semantics.Source{Trace: path, Producer: tr.Manifest.Producer},
		Structure: drive.structure,
		Program:   prog,
		Factors:   factors,
		Precision: semantics.Precision{Status: "placeholder", Activations: act.String(), Rules: s.em.rules},
	}
	if doc.Source.SHA256, err = tr.SHA256(); err != nil {
		return nil, err
	}
	res := &Result{Doc: doc, Evals: s.ev.evals}
	for _, v := range s.opaque {
		res.Unexplained = append(res.Unexplained, v.origin)
	}
	taken := map[string]bool{}
	for _, v := range s.em.consts {
		taken[v.origin] = true
	}
	for _, v := range s.opaque {
		if !taken[v.origin] {
			taken[v.origin] = true
			doc.Undetermined = append(doc.Undetermined, semantics.Undetermined{Name: semantics.UndeterminedNotComputed, Scope: "model",
				Reason: fmt.Sprintf("%s: %s; the program makes its output without reading it, so it does not compute it (not compared)", v.origin, whyOpaque(v))})
		}
	}
	for _, v := range s.em.consts {
		res.Opaque = append(res.Opaque, v.origin)
		doc.Undetermined = append(doc.Undetermined, semantics.Undetermined{Name: "value", Scope: "model",
			Reason: fmt.Sprintf("%s: %s from the request; the program takes it from the trace (step 0) as a constant", v.origin, whyOpaque(v))})
	}
	if n := countUnsearched(s.opaque); n > 0 {
		res.Unsearched = n
	}
	return res, nil
}

// whyOpaque says why no expression explains v: none of the vocabulary's,
// or none searched for before the search's time ran out.
func whyOpaque(v *val) string {
	if v.beforeLoop != "" {
		return "the result of " + v.beforeLoop + ", called before the sampling loop, which the program does not run; no expression makes it"
	}
	if v.unsearched {
		return "not searched: the search's time ran out before it (a larger budget may explain it)"
	}
	return "no expression of the vocabulary makes it"
}

// countUnsearched counts the values left unexplained for want of time.
func countUnsearched(vs []*val) int {
	n := 0
	for _, v := range vs {
		if v.unsearched {
			n++
		}
	}
	return n
}

// hurried reports whether the search for expressions has ended (Options.Hurry).
func (s *synth) hurried() bool {
	return s.hurry != nil && s.hurry.Err() != nil
}

// subtreeSize counts c and the calls inside it: the calls call visits.
func subtreeSize(tr *trace.Trace, c trace.Call) int {
	n := 1
	for _, id := range tr.Tree().Children(c.ID) {
		if ch, ok := tr.Tree().Call(id); ok {
			n += subtreeSize(tr, ch)
		}
	}
	return n
}

// chainedArgs binds a later model call's tensor arguments to the values
// of pool (the request's bound inputs, the results of the calls before
// it) that hold them exactly, else to a request input no call before took
// (request); an argument none holds is an error naming it.
func (s *synth) chainedArgs(c trace.Call, pool []*val, request func(*val) *val) (map[string]*val, error) {
	args := map[string]*val{}
	for _, p := range c.Tensors {
		if trace.IsResult(p.Name) {
			continue
		}
		target, err := s.capture(p.Key)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(pool, func(v *val) bool {
			return v != nil && !v.opaque && v.numel() == target.numel() && v.format == target.format && slices.Equal(v.data, target.data)
		})
		if i < 0 {
			// a request input the first call did not take (an SD3
			// ControlNet is given zeros for the pooled text the
			// transformer then reads)
			if in := request(target); in != nil {
				args[p.Name] = adopt(target, s.reshape(in, target.shape))
				continue
			}
			return nil, fmt.Errorf("synth: the model call %s: argument %s is neither an input of the request nor a result of the calls before it", c.Module, p.Name)
		}
		args[p.Name] = adopt(target, s.reshape(pool[i], target.shape))
	}
	return args, nil
}

// valuesInOrder are m's values in the order of their keys.
func valuesInOrder(m map[string]*val) []*val {
	var out []*val
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// firstResult is the name of c's first tensor result, "" for none.
func firstResult(c trace.Call) string {
	for _, p := range c.Tensors {
		if trace.IsResult(p.Name) {
			return p.Name
		}
	}
	return ""
}

// stepRoots are the calls of a step without a parent.
func stepRoots(tr *trace.Trace, step int) []trace.Call {
	var out []trace.Call
	for _, c := range tr.Manifest.Calls {
		if c.Parent == nil && c.Step != nil && *c.Step == step {
			out = append(out, c)
		}
	}
	return out
}

// programDoc is the program in the document's form, with the notes of its
// constants.
func (s *synth) programDoc() *semantics.Program {
	s.em.dropUnusedConsts()
	dp := program.ToDoc(s.em.p)
	for i := range dp.Values {
		if n, ok := s.em.notes[dp.Values[i].Name]; ok {
			dp.Values[i].Note = n
		}
		dp.Values[i].FromTrace = s.em.fromTrace[dp.Values[i].Name]
	}
	return dp
}

// laterInput binds the request input that holds target's values exactly
// (same format, same entries) and that no model call took before, as an
// input of the document under its own name; nil where none does.
func (s *synth) laterInput(d *drive, target *val) *val {
	m := s.tr.Manifest
	for _, name := range slices.Sorted(maps.Keys(m.Inputs)) {
		if slices.ContainsFunc(d.structure.Inputs, func(in semantics.Input) bool { return in.Name == name || in.Role == name }) {
			continue
		}
		in, err := s.capture(m.Inputs[name])
		if err != nil || in.numel() != target.numel() || in.format != target.format || !slices.Equal(in.data, target.data) {
			continue
		}
		s.em.bindLeaf(in, program.Input, program.InputValue(name), name)
		d.structure.Inputs = append(d.structure.Inputs, semantics.Input{Role: name, Name: name, Shape: slices.Clone(in.shape)})
		return in
	}
	return nil
}

// laterJoined is target made of two or more request inputs joined along
// one axis, each bound as an input (a pipeline's cat([negative, prompt])
// before a call outside the loop: unCLIP's text projection); nil where no
// such join holds it.
func (s *synth) laterJoined(d *drive, target *val) *val {
	inputs := map[string]*val{}
	for name, key := range s.tr.Manifest.Inputs {
		if in, err := s.capture(key); err == nil && in.format == target.format {
			inputs[name] = in
		}
	}
	for ax := range target.shape {
		parts := s.joinedInputs(target, ax, 0, target.shape[ax], inputs, nil)
		if len(parts) < 2 {
			continue
		}
		args := make([]*val, len(parts))
		for i, p := range parts {
			s.em.bindLeaf(p.in, program.Input, program.InputValue(p.name), p.name)
			if !slices.ContainsFunc(d.structure.Inputs, func(in semantics.Input) bool { return in.Name == p.name }) {
				d.structure.Inputs = append(d.structure.Inputs, semantics.Input{Role: p.name, Name: p.name, Shape: slices.Clone(p.in.shape)})
			}
			args[i] = p.in
		}
		if j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: args, out: target.format, label: "request inputs joined"}); j != nil {
			return j
		}
	}
	return nil
}

// requestFor is a later call's argument made from the request: one input
// no call before took (laterInput), or several joined (laterJoined).
func (s *synth) requestFor(d *drive, target *val) *val {
	if in := s.laterInput(d, target); in != nil {
		return in
	}
	return s.laterJoined(d, target)
}
