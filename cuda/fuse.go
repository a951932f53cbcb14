//go:build linux

package cuda

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// Fusion (exec.Fuser). A linear-headed region runs as the very Linear
// call of the unfused route (the same cuBLASLt plan and output type, so
// the same accumulation order and the same rounding of the accumulator: a
// GEMM writing f32 for the epilogue to round could pick another algorithm
// and sum in another order), then one epilogue kernel for the whole chain
// in place of one zf_elementwise launch a step. A norm-headed region runs
// as one kernel: the norm kernel compiled with the chain applied where it
// would store each value, so the norm's output is never written. The
// chain is rendered from the one pointwise source (kernels.Epilogue) and
// rounds where the unfused kernels store: the result is the unfused one
// bit for bit. cuBLASLt's GELU epilogue is not used: it applies GELU to
// the f32 accumulator, which the unfused route rounds first, and computes
// tanh its own way; its bias epilogue is, inside Linear, as unfused.
//
// A region is chosen by the ops it contains, their formats and shapes.
// Under FusionAuto the first run of each distinct region times both
// routes on the device and keeps fusion only where it was faster.

// Fusion says when the backend fuses a region.
type Fusion uint8

const (
	FusionAuto Fusion = iota // fuse where measured faster (the default)
	FusionOff                // never (ZFLOW_UNFUSED=1): the A/B switch
	FusionOn                 // always, without measuring (ZFLOW_FUSED=1)
)

func (f Fusion) String() string {
	switch f {
	case FusionAuto:
		return "auto"
	case FusionOff:
		return "off"
	case FusionOn:
		return "on"
	}
	return fmt.Sprintf("Fusion(%d)", uint8(f))
}

// fusionFromEnv reads the switches.
func fusionFromEnv() Fusion {
	switch {
	case os.Getenv("ZFLOW_UNFUSED") == "1":
		return FusionOff
	case os.Getenv("ZFLOW_FUSED") == "1":
		return FusionOn
	}
	return FusionAuto
}

// FusionRecord is what decided one region kind: its measurement (device
// time of one run of each route), or why it does not fuse.
type FusionRecord = exec.FusionDecision

// fusionState holds the mode and the decisions so far.
type fusionState struct {
	mu      sync.Mutex
	mode    Fusion
	decided map[string]*FusionRecord
	order   []string
}

// SetFusion sets when regions are fused (tests and A/B runs).
func (b *Backend) SetFusion(f Fusion) {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	b.fuse.mode = f
}

// FusionMode is the switch in force (exec.FusionReporter).
func (b *Backend) FusionMode() string {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	return b.fuse.mode.String()
}

// Fusions lists the measured regions in the order first met
// (exec.FusionReporter).
func (b *Backend) Fusions() []FusionRecord {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	out := make([]FusionRecord, 0, len(b.fuse.order))
	for _, k := range b.fuse.order {
		out = append(out, *b.fuse.decided[k])
	}
	return out
}

// epiPlan is a region translated for the epilogue kernel.
type epiPlan struct {
	epi    kernels.Epilogue
	ops    []*Tensor // operands in chain order (conditioning views reshaped)
	shape  []int     // the head's result, the chain's running value
	params kernels.EpiP
	parts  []partPlan // a norm head (one part) or a join's parts
	key    string     // the region's ops, formats and shapes
	desc   string
	// A join can also run as its parts' plain norms, each writing its rows
	// of the joined value, then the chain's epilogue kernel over it
	// (routeSplit): canSplit where the chain allows it, split when chosen.
	canSplit, split bool
	// A join with no chain: each part (a linear or a norm) writes its rows
	// of the joined value, the concat's copies saved (joinOnly).
	joinOnly bool
}

// The fused forms of a join region, as FusionRecord.Route names them.
const (
	routeInNorm = "chain in the norms"
	routeSplit  = "norms into the join, then the chain"
)

// partPlan is one norm kernel of a norm-headed or join-headed region: it
// writes its rows of the result from element Out on, reading each
// operand from element OpOff[k] on, laid out by params.
type partPlan struct {
	head   exec.Head
	shape  []int
	out    int   // elements into the result
	opOff  []int // elements into each operand
	params kernels.EpiP
}

// stepCodes maps exec's step ops to the kernels' op codes.
var stepCodes = map[exec.StepOp]int32{
	exec.StepAdd: kernels.OpAdd, exec.StepMul: kernels.OpMul, exec.StepSub: kernels.OpSub, exec.StepDiv: kernels.OpDiv,
	exec.StepMinimum: kernels.OpMin, exec.StepMaximum: kernels.OpMax, exec.StepAct: kernels.OpAct, exec.StepCast: kernels.OpCast,
	exec.StepModulate: kernels.OpModulate, exec.StepGatedResidual: kernels.OpGated, exec.StepGLU: kernels.OpGLU,
	exec.StepRope: kernels.OpRope,
}

// headShape is the shape a linear or norm head makes, and the format.
func (b *Backend) headShape(h exec.Head) ([]int, string) {
	x, err := b.get("fuse", "head input", h.In[0])
	if err != nil {
		return nil, err.Error()
	}
	shape := slices.Clone(x.shape)
	if h.Op == exec.HeadLinear {
		w, err := b.get("fuse", "weight", h.In[1])
		if err != nil || len(w.shape) != 2 || len(shape) == 0 {
			return nil, "the linear's weight"
		}
		shape[len(shape)-1] = w.shape[0]
	}
	return shape, ""
}

// headKey is a producer's ops, formats and shapes.
func headKey(key *strings.Builder, h exec.Head) {
	fmt.Fprintf(key, " %v %v %v", h.Op, h.Spec, h.Norm)
	for _, t := range h.In {
		if t != nil {
			fmt.Fprintf(key, " %v%v", t.Format(), t.Shape())
		}
	}
}

// planRegion translates r, or says why it does not fuse (then the
// interpreter runs it op by op, where every refusal is reported).
func (b *Backend) planRegion(r exec.Region) (*epiPlan, string) {
	if err := r.Check(); err != nil {
		return nil, err.Error()
	}
	h := r.Head
	if h.Op == exec.HeadJoin && len(r.Steps) == 0 {
		return b.planJoin(r)
	}
	var key strings.Builder
	fmt.Fprintf(&key, "%v", r)
	// The running value's shape and format, as the head leaves it; a
	// join's parts' shapes and where each starts on the joined axis.
	var shape []int
	in := h.Spec.Out
	var partShapes [][]int
	ax := 0
	if h.Op == exec.HeadJoin {
		formats := make([]precision.Format, len(h.Parts))
		for i, ph := range h.Parts {
			if ph.Op != exec.HeadNorm {
				return nil, "a join of " + ph.Op.String() + " parts"
			}
			sh, why := b.headShape(ph)
			if sh == nil {
				return nil, why
			}
			partShapes, formats[i] = append(partShapes, sh), ph.Spec.Out
			headKey(&key, ph)
		}
		var err error
		if shape, ax, err = exec.ConcatShape(partShapes, formats, h.Axis); err != nil {
			return nil, err.Error()
		}
		if exec.Numel(shape[:ax]) != 1 {
			return nil, "a join whose parts are not one run each of the result"
		}
		in = formats[0]
		fmt.Fprintf(&key, " axis %d", ax)
	} else {
		var why string
		if shape, why = b.headShape(h); shape == nil {
			return nil, why
		}
		headKey(&key, h)
	}
	// A linear's epilogue reads its activation from a table where the
	// chain has a TableStep, the result is large enough for the table's
	// copy into each block's shared memory to pay, and the device has the
	// shared memory (runTable).
	table := h.Op == exec.HeadLinear && exec.Numel(shape) >= b.tableMin && b.smemMax >= tableSmem
	p := &epiPlan{epi: kernels.Epilogue{In: in, Table: table}}
	// Each operand's shape against the layout's (lshape): the running
	// value's shape, or with a rope its last axis split into heads.
	var lshapes [][]int
	var isTable []bool
	ropeHeads := 0
	for i, s := range r.Steps {
		if s.Op != exec.StepCast {
			if err := s.Spec.Check(); err != nil {
				return nil, err.Error()
			}
		}
		st := kernels.Step{Op: stepCodes[s.Op], Out: s.Spec.Out, Math: int32(s.Spec.Math), Arg: s.Arg}
		in := s.In // kernel order below
		switch s.Op {
		case exec.StepCast:
			st.Out, st.Math = s.Format, 0
		case exec.StepAct:
			if s.Spec.Round&exec.RoundEach != 0 {
				return nil, "act with RoundEach has no kernel"
			}
			st.Act = int32(s.Act)
		case exec.StepModulate:
			// Kernel order x, scale, shift; the running value is x.
			if s.Arg != 0 {
				return nil, "modulate of a running scale or shift"
			}
			st.Flags = flags(s.Spec)
			if s.Modulate.PlusOne {
				st.Flags |= kernels.PlusOne
			}
			in = []exec.Tensor{nil, s.In[2]}
			if s.In[1] != nil {
				in = append(in, s.In[1])
				st.Flags |= kernels.HasShift
			}
		case exec.StepGatedResidual, exec.StepGLU:
			st.Act, st.Flags = int32(s.Act), flags(s.Spec)
		case exec.StepRope:
			// Interleaved pairs over whole heads a multiple of 8 wide,
			// as Rope's 8-a-thread path reads them (kernels.HasRope).
			rp := s.Rope
			if s.Arg != 0 || rp.Layout != exec.RopeInterleaved {
				return nil, "a rope other than interleaved pairs of the running value"
			}
			if len(shape) != 3 || rp.Heads <= 0 || shape[2]%rp.Heads != 0 || ropeHeads != 0 && ropeHeads != rp.Heads {
				return nil, fmt.Sprintf("a rope of %d heads over %v", rp.Heads, shape)
			}
			if d := shape[2] / rp.Heads; rp.RotaryDim != 0 && rp.RotaryDim != d || d%8 != 0 {
				return nil, fmt.Sprintf("a rope of rotary dim %d over heads of %d", rp.RotaryDim, d)
			}
			ropeHeads = rp.Heads
			st.Flags = flags(s.Spec) & kernels.RProduct
		}
		if (s.Op == exec.StepAct || s.Op == exec.StepGLU || s.Op == exec.StepGatedResidual) && !s.Act.Kernel() {
			return nil, "function " + s.Act.String()
		}
		if !st.Out.Valid() {
			return nil, "format " + st.Out.String()
		}
		// Operands, viewed as the unfused op views them; the step's
		// result must keep the running value's shape.
		var opShapes [][]int
		for j, t := range in {
			if j == s.Arg {
				continue
			}
			ct, err := b.get("fuse", fmt.Sprintf("step %d input %d", i, j), t)
			if err != nil {
				return nil, err.Error()
			}
			switch {
			case s.Op == exec.StepModulate:
				ct = cond(ct, shape)
			case s.Op == exec.StepGatedResidual && j == 2:
				// The gate, viewed against y as GatedResidual views it.
				yShape := shape
				if s.Arg != 1 {
					yShape = s.In[1].Shape()
				}
				ct = cond(ct, yShape)
			}
			p.ops = append(p.ops, ct)
			fmt.Fprintf(&key, " %v%v", ct.format, ct.shape)
			if s.Op == exec.StepRope {
				// cos, sin: [S, D] or [B, S, D], one format, as Rope takes
				// them; laid [S, 1, D] against [B, S, H, D].
				d := shape[2] / s.Rope.Heads
				ts := ct.shape
				if !(len(ts) == 2 && ts[0] == shape[1] && ts[1] == d || len(ts) == 3 && ts[0] == shape[0] && ts[1] == shape[1] && ts[2] == d) ||
					ct.format != p.ops[len(p.ops)-j].format { // sin's format is cos's
					return nil, fmt.Sprintf("rope tables %v for %v", ts, shape)
				}
				lshapes = append(lshapes, append(slices.Clone(ts[:len(ts)-1]), 1, d))
				isTable = append(isTable, true)
				continue
			}
			opShapes = append(opShapes, ct.shape)
			lshapes, isTable = append(lshapes, ct.shape), append(isTable, false)
		}
		out := shape
		for _, o := range opShapes {
			var err error
			if out, err = exec.Broadcast(out, o); err != nil {
				return nil, err.Error()
			}
		}
		if !slices.Equal(out, shape) {
			return nil, fmt.Sprintf("step %d (%v) broadcasts the running value %v to %v", i, s.Op, shape, out)
		}
		fmt.Fprintf(&key, " %v", s.Spec)
		if s.Op == exec.StepRope {
			fmt.Fprintf(&key, " %+v", s.Rope)
		}
		p.epi.Steps = append(p.epi.Steps, st)
	}
	if err := p.epi.Check(); err != nil {
		return nil, err.Error()
	}
	// The layout: with a rope, the last axis split into heads, and every
	// other operand's with it.
	lshape := shape
	if ropeHeads != 0 && h.Op == exec.HeadJoin && ax == len(shape)-1 {
		return nil, "a rope after a join along the heads' axis"
	}
	if ropeHeads != 0 {
		d := shape[2] / ropeHeads
		lshape = []int{shape[0], shape[1], ropeHeads, d}
		for k, ls := range lshapes {
			if isTable[k] || len(ls) == 0 {
				continue
			}
			last := []int{1, 1}
			if ls[len(ls)-1] != 1 {
				last = []int{ropeHeads, d}
			}
			lshapes[k] = append(slices.Clone(ls[:len(ls)-1]), last...)
		}
	}
	formats := make([]precision.Format, len(p.ops))
	for i, t := range p.ops {
		formats[i] = t.format
	}
	var err error
	if p.params, err = kernels.NewEpiP(lshape, lshapes, formats); err != nil {
		return nil, err.Error()
	}
	p.shape = shape
	rope := p.epi.HasRope()
	switch h.Op {
	case exec.HeadLinear:
		if rope && p.params.Vec == 0 {
			return nil, "a rope after a linear whose epilogue is not 8 elements a thread"
		}
	case exec.HeadNorm:
		partShapes = [][]int{shape}
		h.Parts = []exec.Head{h}
		fallthrough
	case exec.HeadJoin:
		p.canSplit = h.Op == exec.HeadJoin && (!rope || p.params.Vec != 0)
		// One norm kernel a part, each writing its run of the result and
		// reading its run of each operand that spans the joined axis.
		start := 0
		for i, ph := range h.Parts {
			g := ph.Norm.Group
			if g == 0 {
				g = shape[len(shape)-1]
			}
			if rope && g%8 != 0 {
				return nil, fmt.Sprintf("a rope after a norm of groups of %d (not 8 elements a thread)", g)
			}
			ps := partShapes[i]
			pp := partPlan{head: ph, shape: ps, out: start * exec.Numel(shape[ax+1:]), opOff: make([]int, len(p.ops))}
			pl := slices.Clone(lshape)
			pl[ax] = ps[ax]
			pls := make([][]int, len(lshapes))
			for k, ls := range lshapes {
				pls[k] = ls
				j := len(ls) - len(lshape) + ax
				if j < 0 || ls[j] == 1 || len(h.Parts) == 1 {
					continue
				}
				if exec.Numel(ls[:j]) != 1 {
					return nil, fmt.Sprintf("operand %d %v of a join is not one run a part", k, ls)
				}
				pls[k] = slices.Clone(ls)
				pls[k][j] = ps[ax]
				pp.opOff[k] = start * exec.Numel(ls[j+1:])
			}
			if pp.params, err = kernels.NewEpiP(pl, pls, formats); err != nil {
				return nil, err.Error()
			}
			p.parts = append(p.parts, pp)
			start += ps[ax]
		}
	}
	fmt.Fprintf(&key, " → %v%v", p.epi.Out(), shape)
	p.key, p.desc = key.String(), fmt.Sprintf("%v %v→%v", r, shape, p.epi.Out())
	return p, ""
}

// planJoin plans a join with no chain: each part, a linear or a norm,
// writes its rows of the joined value.
func (b *Backend) planJoin(r exec.Region) (*epiPlan, string) {
	h := r.Head
	var key strings.Builder
	fmt.Fprintf(&key, "%v", r)
	var shapes [][]int
	formats := make([]precision.Format, len(h.Parts))
	for i, ph := range h.Parts {
		sh, why := b.headShape(ph)
		if sh == nil {
			return nil, why
		}
		shapes, formats[i] = append(shapes, sh), ph.Spec.Out
		headKey(&key, ph)
	}
	shape, ax, err := exec.ConcatShape(shapes, formats, h.Axis)
	if err != nil {
		return nil, err.Error()
	}
	if exec.Numel(shape[:ax]) != 1 {
		return nil, "a join whose parts are not one run each of the result"
	}
	p := &epiPlan{epi: kernels.Epilogue{In: formats[0]}, shape: shape, joinOnly: true}
	start := 0
	for i, ph := range h.Parts {
		p.parts = append(p.parts, partPlan{head: ph, shape: shapes[i], out: start * exec.Numel(shape[ax+1:])})
		start += shapes[i][ax]
	}
	fmt.Fprintf(&key, " axis %d → %v%v", ax, formats[0], shape)
	p.key, p.desc = key.String(), fmt.Sprintf("%v %v→%v", r, shape, formats[0])
	return p, ""
}

// runJoin runs a join with no chain: a linear part is the unfused route's
// own GEMM call with its result written into its rows of the joined value
// (the same plan, so the same sums), a norm part the plain norm kernel
// writing there.
func (b *Backend) runJoin(p *epiPlan) (exec.Tensor, error) {
	// Each part's launch, checked before anything runs.
	fills := make([]func(view *Tensor) error, len(p.parts))
	for i, pp := range p.parts {
		h := pp.head
		if h.Op == exec.HeadLinear {
			shape, fill, err := b.linearFill(h.In[0], h.In[1], h.In[2], h.Spec)
			if err != nil {
				return nil, fmt.Errorf("cuda: fuse %s: linear: %w", p.desc, err)
			}
			if !slices.Equal(shape, pp.shape) || h.Spec.Out != p.epi.In {
				return nil, fmt.Errorf("cuda: fuse %s: the linear makes %v%v, the plan expects %v%v", p.desc, h.Spec.Out, shape, p.epi.In, pp.shape)
			}
			fills[i] = fill
			continue
		}
		l, err := b.normLaunch(h.In[0], h.In[1], h.In[2], h.Norm, h.Spec)
		if err != nil {
			return nil, fmt.Errorf("cuda: fuse %s: norm: %w", p.desc, err)
		}
		if !slices.Equal(l.x.shape, pp.shape) || l.np.OutFmt != int32(p.epi.In) {
			return nil, fmt.Errorf("cuda: fuse %s: the norm makes %v%v, the plan expects %v%v", p.desc, precision.Format(l.np.OutFmt), l.x.shape, p.epi.In, pp.shape)
		}
		fills[i] = func(view *Tensor) error {
			if l.np.Groups == 0 {
				return nil
			}
			return b.launch("zf_norm", l.grid, block256, 0, view.ptr(), l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params())
		}
	}
	return b.result(p.shape, p.epi.In, func(out *Tensor) error {
		es := uintptr(esize(p.epi.In))
		for i, pp := range p.parts {
			view := &Tensor{shape: pp.shape, format: p.epi.In, buf: out.buf, off: out.off + uintptr(pp.out)*es, b: b}
			if err := fills[i](view); err != nil {
				return err
			}
		}
		return nil
	})
}

// Fuse implements exec.Fuser.
func (b *Backend) Fuse(r exec.Region) (exec.Tensor, bool, error) {
	b.fuse.mu.Lock()
	mode := b.fuse.mode
	b.fuse.mu.Unlock()
	if mode == FusionOff {
		return nil, false, nil
	}
	p, why := b.planRegion(r)
	if p == nil {
		// Declined: the op-by-op route runs and reports any error; the
		// reason is kept for Fusions.
		b.record(r.String()+": "+why, FusionRecord{Region: r.String(), Declined: why})
		return nil, false, nil
	}
	if mode == FusionOn {
		// Forced: nothing measured; a join in the form splitJoins names.
		p.split = p.canSplit && b.splitJoins
		rec := FusionRecord{Region: p.desc, Fused: true}
		if p.canSplit {
			rec.Route = routeInNorm
			if p.split {
				rec.Route = routeSplit
			}
		}
		b.record(p.key+" "+rec.Route, rec)
		t, err := b.runFused(r, p)
		return t, err == nil, err
	}
	b.fuse.mu.Lock()
	rec, seen := b.fuse.decided[p.key]
	b.fuse.mu.Unlock()
	if seen {
		if !rec.Fused {
			return nil, false, nil
		}
		p.split = rec.Route == routeSplit
		t, err := b.runFused(r, p)
		return t, err == nil, err
	}
	return b.measure(r, p)
}

// measure times both routes once each, after a warm-up run of the fused
// one (its compile and the GEMM's plan), keeps the faster, and returns
// the fused result (the same bits either way). A join that can split is
// timed in both fused forms, and the fastest of the three kept.
func (b *Backend) measure(r exec.Region, p *epiPlan) (exec.Tensor, bool, error) {
	t, um, fm, err := b.timeRoutes(r, p)
	if err != nil {
		return nil, false, fmt.Errorf("cuda: fuse %s: measuring: %w", p.desc, err)
	}
	rec := FusionRecord{Region: p.desc, UnfusedMs: um, FusedMs: fm}
	if p.canSplit {
		p.split = true
		ts, um2, fm2, err := b.timeRoutes(r, p)
		if err != nil {
			b.Free(t)
			return nil, false, fmt.Errorf("cuda: fuse %s: measuring: %w", p.desc, err)
		}
		rec.Tried = map[string]float64{routeInNorm: fm, routeSplit: fm2}
		rec.UnfusedMs, rec.Route = min(um, um2), routeInNorm
		if fm2 < fm {
			rec.FusedMs, rec.Route = fm2, routeSplit
		}
		b.Free(t)
		t = ts
	}
	rec.Fused = rec.FusedMs < rec.UnfusedMs
	b.record(p.key, rec)
	return t, true, nil
}

// timeRoutes runs the unfused route then the fused one between events
// and returns the fused result and both device times.
func (b *Backend) timeRoutes(r exec.Region, p *epiPlan) (t exec.Tensor, unfusedMs, fusedMs float64, err error) {
	warm, err := b.runFused(r, p)
	if err != nil {
		return nil, 0, 0, err
	}
	b.Free(warm)
	var ev [3]*Event
	for i := range ev {
		if ev[i], err = b.NewEvent(); err != nil {
			return nil, 0, 0, err
		}
		defer ev[i].Destroy()
	}
	if err := ev[0].Record(); err != nil {
		return nil, 0, 0, err
	}
	u, err := exec.RunUnfused(b, r)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("the unfused route: %w", err)
	}
	b.Free(u)
	if err := ev[1].Record(); err != nil {
		return nil, 0, 0, err
	}
	if t, err = b.runFused(r, p); err != nil {
		return nil, 0, 0, err
	}
	if err = ev[2].Record(); err == nil {
		if unfusedMs, err = ev[1].Since(ev[0]); err == nil {
			fusedMs, err = ev[2].Since(ev[1])
		}
	}
	if err != nil {
		b.Free(t)
		return nil, 0, 0, err
	}
	return t, unfusedMs, fusedMs, nil
}

// record keeps the first record of a region kind.
func (b *Backend) record(key string, rec FusionRecord) {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	if b.fuse.decided == nil {
		b.fuse.decided = map[string]*FusionRecord{}
	}
	if _, ok := b.fuse.decided[key]; !ok {
		b.fuse.decided[key] = &rec
		b.fuse.order = append(b.fuse.order, key)
	}
}

// runFused runs a region: a norm as one kernel (normFused); a linear as
// the unfused route's own Linear call, then the epilogue kernel.
func (b *Backend) runFused(r exec.Region, p *epiPlan) (exec.Tensor, error) {
	h := r.Head
	if p.joinOnly {
		return b.runJoin(p)
	}
	if h.Op != exec.HeadLinear {
		if p.split {
			return b.joinSplit(p)
		}
		return b.normFused(p)
	}
	head, err := b.Linear(h.In[0], h.In[1], h.In[2], h.Spec)
	if err != nil {
		return nil, fmt.Errorf("cuda: fuse %s: %v: %w", p.desc, h.Op, err)
	}
	defer b.Free(head)
	ht := head.(*Tensor)
	if err := p.live(); err != nil {
		return nil, err
	}
	if p.epi.In != ht.format || !slices.Equal(ht.shape, p.shape) {
		return nil, fmt.Errorf("cuda: fuse %s: the head made %v%v, the plan expects %v%v", p.desc, ht.format, ht.shape, p.epi.In, p.shape)
	}
	return b.runEpilogue(p, ht)
}

// runEpilogue runs the chain's kernel over the head's result ht.
func (b *Backend) runEpilogue(p *epiPlan, ht *Tensor) (exec.Tensor, error) {
	if p.epi.TableStep() >= 0 {
		return b.runTable(p, ht)
	}
	params := p.params
	name := p.epi.Name()
	return b.result(ht.shape, p.epi.Out(), func(out *Tensor) error {
		if _, ok := b.fns[name]; !ok {
			src, err := kernels.RenderEpilogues(kernels.CUDA, p.epi)
			if err != nil {
				return err
			}
			if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name}); err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
		}
		if params.N == 0 {
			return nil
		}
		args := append([]any{out.ptr(), ht.ptr()}, p.operands(out)...)
		args = append(args, kernels.Bytes(&params))
		work := int(params.N)
		if params.Vec != 0 {
			work /= 8
		}
		return b.launch(name, b.grid1(work), block256, 0, args...)
	})
}

// live checks that no operand was freed since the plan was made.
func (p *epiPlan) live() error {
	for i, t := range p.ops {
		if t.buf == nil || t.buf.ptr == 0 {
			return fmt.Errorf("cuda: fuse %s: operand %d was freed", p.desc, i)
		}
	}
	return nil
}

// operands are the kernel's eight operand pointers (out's for the unused
// ones, which are never read).
func (p *epiPlan) operands(out *Tensor) []any {
	args := make([]any, kernels.MaxEpiOperands)
	for k := range args {
		args[k] = out.ptr()
		if k < len(p.ops) {
			args[k] = p.ops[k].ptr()
		}
	}
	return args
}

// normFused runs a norm-headed region as one kernel, a join-headed one as
// one a part: the norm kernel compiled with the chain applied to each
// value where it would store it (rounded to the norm's format first, as
// the stored value is), so the norm's output is never written; a join's
// part writes its run of the joined result, and reads its run of each
// operand that spans the joined axis (a rope's tables), so the parts'
// outputs are not written either.
func (b *Backend) normFused(p *epiPlan) (exec.Tensor, error) {
	ls := make([]*normArgs, len(p.parts))
	for i, pp := range p.parts {
		h := pp.head
		l, err := b.normLaunch(h.In[0], h.In[1], h.In[2], h.Norm, h.Spec)
		if err != nil {
			return nil, fmt.Errorf("cuda: fuse %s: norm: %w", p.desc, err)
		}
		if !slices.Equal(l.x.shape, pp.shape) || l.np.OutFmt != int32(p.epi.In) {
			return nil, fmt.Errorf("cuda: fuse %s: the norm makes %v%v, the plan expects %v%v", p.desc, precision.Format(l.np.OutFmt), l.x.shape, p.epi.In, pp.shape)
		}
		ls[i] = l
	}
	if err := p.live(); err != nil {
		return nil, err
	}
	name := p.epi.Name() + "_norm"
	return b.result(p.shape, p.epi.Out(), func(out *Tensor) error {
		if _, ok := b.fns[name]; !ok {
			src, err := normEpilogueSource(p.epi)
			if err != nil {
				return err
			}
			if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name}); err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
		}
		oe := uintptr(esize(p.epi.Out()))
		for i, pp := range p.parts {
			l := ls[i]
			if l.np.Groups == 0 {
				continue
			}
			args := []any{out.ptr() + uintptr(pp.out)*oe, l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params()}
			for k := 0; k < kernels.MaxEpiOperands; k++ {
				ptr := out.ptr()
				if k < len(p.ops) {
					ptr = p.ops[k].ptr() + uintptr(pp.opOff[k]*esize(p.ops[k].format))
				}
				args = append(args, ptr)
			}
			params := pp.params
			args = append(args, kernels.Bytes(&params))
			if err := b.launch(name, l.grid, block256, 0, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// joinSplit runs a join region as its parts' norms, each the plain norm
// kernel writing its rows of the joined value (the concat's copy saved),
// then the chain's epilogue kernel over the joined value.
func (b *Backend) joinSplit(p *epiPlan) (exec.Tensor, error) {
	ls := make([]*normArgs, len(p.parts))
	for i, pp := range p.parts {
		h := pp.head
		l, err := b.normLaunch(h.In[0], h.In[1], h.In[2], h.Norm, h.Spec)
		if err != nil {
			return nil, fmt.Errorf("cuda: fuse %s: norm: %w", p.desc, err)
		}
		if !slices.Equal(l.x.shape, pp.shape) || l.np.OutFmt != int32(p.epi.In) {
			return nil, fmt.Errorf("cuda: fuse %s: the norm makes %v%v, the plan expects %v%v", p.desc, precision.Format(l.np.OutFmt), l.x.shape, p.epi.In, pp.shape)
		}
		ls[i] = l
	}
	if err := p.live(); err != nil {
		return nil, err
	}
	joined, err := b.result(p.shape, p.epi.In, func(out *Tensor) error {
		ie := uintptr(esize(p.epi.In))
		for i, pp := range p.parts {
			l := ls[i]
			if l.np.Groups == 0 {
				continue
			}
			if err := b.launch("zf_norm", l.grid, block256, 0, out.ptr()+uintptr(pp.out)*ie, l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer b.Free(joined)
	return b.runEpilogue(p, joined.(*Tensor))
}

// normEpilogueSource is the chain's functions and the norm kernel, its
// stores routed through them: <Name>_norm(y, x, γ, β, zf_norm_p, o0 … o7,
// zf_epi_p).
func normEpilogueSource(e kernels.Epilogue) (string, error) {
	src, err := kernels.RenderEpilogues(kernels.CUDA, e)
	if err != nil {
		return "", err
	}
	n, out := e.Name(), int(e.Out())
	var params, args strings.Builder
	for k := 0; k < kernels.MaxEpiOperands; k++ {
		fmt.Fprintf(&params, ", const uchar* __restrict__ o%d", k)
		fmt.Fprintf(&args, ", o%d", k)
	}
	defs := fmt.Sprintf(`
#line 1 "cuda/fuse.go"
#define ZF_NORM_NAME %[1]s_norm
#define ZF_NORM_EXTRA %[2]s, const zf_epi_p ep
#define ZF_NORM_STORE8(y, f, i, r) do { \
    _Pragma("unroll") for (int e_ = 0; e_ < 8; e_++) (r)[e_] = zf_round((r)[e_], (f)); \
    %[1]s_eight(ep%[3]s, (i), (r)); \
    zf_store8((y), %[4]d, (i), (r)); \
  } while (0)
#define ZF_NORM_STORE(y, f, i, v) zf_store((y), %[4]d, (i), %[1]s_one(ep%[3]s, (i), zf_round((v), (f))))
`, n, params.String(), args.String(), out)
	return src + defs + normDefs() + normSource, nil
}

// A table epilogue (kernels.Epilogue.TableStep): the step's 2¹⁶ results,
// made once per chain by the chain's own N_tab kernel, are copied into
// each block's shared memory, and the chain reads them there.
const (
	tableSmem     = kernels.TableSize * 2
	tableMinElems = 1 << 20 // below, the copy costs about what the table saves (not measured); tests lower b.tableMin
	tableThreads  = 1024    // one block a multiprocessor (the table's 128 KiB)
)

// runTable runs a table epilogue over the head's result ht: N_tabk, the
// chain's functions in a kernel that first copies the table into shared
// memory, one block of 1024 threads a multiprocessor, two groups of 8
// elements in flight a thread.
func (b *Backend) runTable(p *epiPlan, ht *Tensor) (exec.Tensor, error) {
	params := p.params
	name := p.epi.Name()
	return b.result(ht.shape, p.epi.Out(), func(out *Tensor) error {
		if _, ok := b.fns[name+"_tabk"]; !ok {
			src, err := kernels.RenderEpilogues(kernels.CUDA, p.epi)
			if err != nil {
				return err
			}
			src += tableKernel(p.epi)
			if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name + "_tab", name + "_tabk"}); err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
			fn := b.fns[name+"_tabk"]
			if err := b.d.check("cuFuncSetAttribute", b.d.cuFuncSetAttribute(fn, funcAttrMaxDynamicShared, tableSmem)); err != nil {
				return err
			}
		}
		tab, ok := b.tabs[name]
		if !ok {
			t, err := b.newTensor([]int{kernels.TableSize}, precision.BF16) // 16-bit patterns
			if err != nil {
				return err
			}
			if err := b.launch(name+"_tab", b.grid1(kernels.TableSize), block256, 0, t.ptr()); err != nil {
				b.release(t.buf)
				return err
			}
			if b.tabs == nil {
				b.tabs = map[string]*Tensor{}
			}
			b.tabs[name], tab = t, t
		}
		if params.N == 0 {
			return nil
		}
		work := (int(params.N) + tableThreads - 1) / tableThreads
		if params.Vec != 0 {
			work = (int(params.N)/8 + tableThreads - 1) / tableThreads
		}
		grid := [3]uint32{uint32(max(1, min(work, b.sms))), 1, 1}
		args := append([]any{out.ptr(), ht.ptr()}, p.operands(out)...)
		args = append(args, kernels.Bytes(&params), tab.ptr())
		return b.launch(name+"_tabk", grid, [3]uint32{tableThreads, 1, 1}, tableSmem, args...)
	})
}

// tableKernel is N_tabk(y, x, o0 … o7, zf_epi_p, tab): the chain over x
// with its table in shared memory.
func tableKernel(e kernels.Epilogue) string {
	n := e.Name()
	var params, args strings.Builder
	for k := 0; k < kernels.MaxEpiOperands; k++ {
		fmt.Fprintf(&params, ", const uchar* __restrict__ o%d", k)
		fmt.Fprintf(&args, ", o%d", k)
	}
	return fmt.Sprintf(`
#line 1 "cuda/fuse.go"
extern "C" __global__ void __launch_bounds__(%[5]d, 1) %[1]s_tabk(uchar* __restrict__ y, const uchar* __restrict__ x%[2]s,
                                                          const zf_epi_p p, const uchar* __restrict__ tab) {
  extern __shared__ zf_v4 zf_tab_s[];
  for (int j = (int)threadIdx.x; j < %[6]d / 8; j += (int)blockDim.x) zf_tab_s[j] = ((const zf_v4*)tab)[j];
  __syncthreads();
  const ushort* zt = (const ushort*)zf_tab_s;
  int nth = (int)(blockDim.x * gridDim.x);
  int t0 = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (p.vec != 0) {
    int ng = p.n / 8;
    for (int g = t0; g < ng; g += 2 * nth) {
      int g2 = g + nth;
      float v[8], u[8];
      zf_load8(x, %[3]d, g * 8, 1, v);
      if (g2 < ng) zf_load8(x, %[3]d, g2 * 8, 1, u);
      %[1]s_eight(p, zt%[7]s, g * 8, v);
      zf_store8(y, %[4]d, g * 8, v);
      if (g2 < ng) {
        %[1]s_eight(p, zt%[7]s, g2 * 8, u);
        zf_store8(y, %[4]d, g2 * 8, u);
      }
    }
    return;
  }
  for (int i = t0; i < p.n; i += nth) zf_store(y, %[4]d, i, %[1]s_one(p, zt%[7]s, i, zf_load(x, %[3]d, i)));
}
`, n, params.String(), int(e.In), int(e.Out()), tableThreads, kernels.TableSize, args.String())
}
