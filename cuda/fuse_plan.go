//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

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
	// The fused norm is zf_norm's arithmetic; a Welford layer norm runs its
	// own kernel (norm_welford.go), unfused.
	for _, ph := range append([]exec.Head{h}, h.Parts...) {
		if ph.Op == exec.HeadNorm && ph.Spec.Math&exec.MathWelford != 0 {
			return nil, "a Welford layer norm (a kernel of its own)"
		}
		if ph.Op == exec.HeadNorm && ph.Spec.Round&exec.RoundMoments != 0 {
			return nil, "a norm whose statistics are rounded (no kernel yet: run op by op, which says so)"
		}
	}
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
