package exec

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/precision"
)

// Fusion. A Region is a producer (a linear or a norm, or a join of such
// producers' results) followed by a chain of pointwise steps, each reading
// the previous one's result, whose intermediates nothing else reads. The interpreter (exec/program) offers
// each region it finds to a backend that implements Fuser, which may run
// it its own way (one GEMM and one epilogue kernel) or decline; either way
// the result is RunUnfused's, bit for bit: a fusion may only save launches
// and memory traffic, never change a rounding. Regions are found by the
// ops they contain, never by what a model calls them.

// HeadOp is a region's producer.
type HeadOp uint8

const (
	HeadLinear HeadOp = iota + 1 // Linear(x, w, b)
	HeadNorm                     // Norm(x, γ, β)
	HeadJoin                     // Concat(Parts' results; Axis): each part a linear or norm head
)

func (h HeadOp) String() string {
	switch h {
	case HeadLinear:
		return "linear"
	case HeadNorm:
		return "norm"
	case HeadJoin:
		return "join"
	}
	return fmt.Sprintf("HeadOp(%d)", uint8(h))
}

// Head is a region's producer call. A join's parts are run in order and
// their results concatenated along Axis (In, Norm and Spec unused): the
// steps after it see the joined value, as they would after a Concat node.
// A join is a region even with no steps (its parts may write the joined
// value directly).
type Head struct {
	Op    HeadOp
	In    [3]Tensor // linear: x, w, b; norm: x, γ, β (nil: absent)
	Norm  NormParams
	Spec  Spec
	Parts []Head // join: the producers, each HeadLinear or HeadNorm
	Axis  int    // join: the concatenated axis
}

// StepOp is a pointwise op of the vocabulary a region chains.
type StepOp uint8

const (
	StepAdd           StepOp = iota + 1 // Add(a, b)
	StepMul                             // Mul(a, b): a bias scale, a gate multiply
	StepSub                             // Sub(a, b)
	StepDiv                             // Div(a, b)
	StepMinimum                         // Minimum(a, b)
	StepMaximum                         // Maximum(a, b)
	StepAct                             // Act(x; Act)
	StepCast                            // Cast(x, Format)
	StepModulate                        // Modulate(x, shift, scale; Modulate)
	StepGatedResidual                   // GatedResidual(x, y, gate; Act)
	StepGLU                             // GLU(gate, value; Act)
	StepRope                            // Rope(x, cos, sin; Rope)
	stepEnd
)

var stepNames = [...]string{"", "add", "mul", "sub", "div", "minimum", "maximum", "act", "cast", "modulate", "gated_residual", "glu", "rope"}

func (o StepOp) String() string {
	if o > 0 && o < stepEnd {
		return stepNames[o]
	}
	return fmt.Sprintf("StepOp(%d)", uint8(o))
}

// Inputs is how many inputs the op's Backend method takes.
func (o StepOp) Inputs() int {
	switch o {
	case StepAct, StepCast:
		return 1
	case StepModulate, StepGatedResidual, StepRope:
		return 3
	}
	return 2
}

// Step is one pointwise call of a region: its inputs in the Backend
// method's order, with the running value (the previous call's result) at
// In[Arg], left nil there; Modulate's shift may be nil (absent).
type Step struct {
	Op       StepOp
	In       []Tensor
	Arg      int
	Act      ActKind          // act; GLU's function; gated residual's gate function
	Modulate ModulateParams   // modulate
	Format   precision.Format // cast
	Rope     RopeParams       // rope
	Spec     Spec             // every op but cast
}

// MaxRegionSteps bounds the steps the interpreter chains after a head.
const MaxRegionSteps = 4

// Region is a head and its chain.
type Region struct {
	Head  Head
	Steps []Step
}

// String names the region by its ops ("linear → act(gelu_tanh) →
// gated_residual", "join(norm, norm) → rope").
func (r Region) String() string {
	parts := []string{r.Head.Op.String()}
	if r.Head.Op == HeadJoin {
		ps := make([]string, len(r.Head.Parts))
		for i, h := range r.Head.Parts {
			ps[i] = h.Op.String()
		}
		parts[0] = "join(" + strings.Join(ps, ", ") + ")"
	}
	for _, s := range r.Steps {
		switch s.Op {
		case StepAct, StepGLU, StepGatedResidual:
			parts = append(parts, fmt.Sprintf("%v(%v)", s.Op, s.Act))
		case StepCast:
			parts = append(parts, fmt.Sprintf("cast(%v)", s.Format))
		default:
			parts = append(parts, s.Op.String())
		}
	}
	return strings.Join(parts, " → ")
}

// checkProducer validates a linear or norm head.
func (h Head) checkProducer(r Region) error {
	if h.Op != HeadLinear && h.Op != HeadNorm {
		return fmt.Errorf("exec: region: head %v", h.Op)
	}
	if h.In[0] == nil || h.Op == HeadLinear && h.In[1] == nil {
		return fmt.Errorf("exec: region %v: the head's input or weight is nil", r)
	}
	return nil
}

// Check validates a region's structure (each op checks its own arguments
// when it runs).
func (r Region) Check() error {
	if r.Head.Op == HeadJoin {
		if len(r.Head.Parts) == 0 {
			return fmt.Errorf("exec: region %v: a join of no parts", r)
		}
		for _, h := range r.Head.Parts {
			if err := h.checkProducer(r); err != nil {
				return err
			}
		}
	} else if err := r.Head.checkProducer(r); err != nil {
		return err
	}
	if len(r.Steps) == 0 && r.Head.Op != HeadJoin {
		return fmt.Errorf("exec: region %v: no steps", r)
	}
	for i, s := range r.Steps {
		if s.Op == 0 || s.Op >= stepEnd {
			return fmt.Errorf("exec: region %v: step %d: op %v", r, i, s.Op)
		}
		if len(s.In) != s.Op.Inputs() || s.Arg < 0 || s.Arg >= len(s.In) || s.In[s.Arg] != nil {
			return fmt.Errorf("exec: region %v: step %d (%v): %d inputs with the running value at %d", r, i, s.Op, len(s.In), s.Arg)
		}
		for j, t := range s.In {
			if t == nil && j != s.Arg && !(s.Op == StepModulate && j == 1) {
				return fmt.Errorf("exec: region %v: step %d (%v): input %d is nil", r, i, s.Op, j)
			}
		}
	}
	return nil
}

// Fuser is implemented by a backend that can run a region its own way.
type Fuser interface {
	// Fuse runs r and returns exactly what RunUnfused(b, r) would, bit for
	// bit, or ok false (and nothing run) when it does not fuse r.
	Fuse(r Region) (t Tensor, ok bool, err error)
}

// FusionDecision is what decided one kind of region (its ops, formats and
// shapes): both routes' device times, or why it does not fuse.
type FusionDecision struct {
	Region    string  `json:"region"` // Region.String, with shapes and formats
	UnfusedMs float64 `json:"unfused_ms,omitempty"`
	FusedMs   float64 `json:"fused_ms,omitempty"`
	Fused     bool    `json:"fused"`              // the fused route is the one run
	Declined  string  `json:"declined,omitempty"` // not fusable: why (nothing measured)
	// Route names the fused form kept where a backend has several (FusedMs
	// is that form's time), and Tried each form's time.
	Route string             `json:"route,omitempty"`
	Tried map[string]float64 `json:"tried_ms,omitempty"`
}

// FusionReporter is implemented by a Fuser that can say what it decided,
// for a run's report.
type FusionReporter interface {
	// FusionMode is the switch in force: auto (measured), off or on.
	FusionMode() string
	// Fusions lists the decisions in the order the regions were first met.
	Fusions() []FusionDecision
}

// RunUnfused runs a region op by op, freeing each intermediate after the
// step that reads it: the route a fusion must reproduce.
func RunUnfused(b Backend, r Region) (Tensor, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	cur, err := RunHead(b, r.Head)
	if err != nil {
		return nil, fmt.Errorf("region %v: %w", r, err)
	}
	for i, s := range r.Steps {
		next, err := RunStep(b, s, cur)
		b.Free(cur)
		if err != nil {
			return nil, fmt.Errorf("region %v: step %d (%v): %w", r, i, s.Op, err)
		}
		cur = next
	}
	return cur, nil
}

// RunHead runs a region's producer: a linear, a norm, or a join (its
// parts in order, each freed once joined).
func RunHead(b Backend, h Head) (Tensor, error) {
	switch h.Op {
	case HeadLinear:
		t, err := b.Linear(h.In[0], h.In[1], h.In[2], h.Spec)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", h.Op, err)
		}
		return t, nil
	case HeadNorm:
		t, err := b.Norm(h.In[0], h.In[1], h.In[2], h.Norm, h.Spec)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", h.Op, err)
		}
		return t, nil
	case HeadJoin:
		parts := make([]Tensor, 0, len(h.Parts))
		defer func() {
			for _, t := range parts {
				b.Free(t)
			}
		}()
		for i, p := range h.Parts {
			if p.Op == HeadJoin {
				return nil, fmt.Errorf("join: part %d is a join", i)
			}
			t, err := RunHead(b, p)
			if err != nil {
				return nil, fmt.Errorf("join: part %d: %w", i, err)
			}
			parts = append(parts, t)
		}
		t, err := b.Concat(parts, h.Axis)
		if err != nil {
			return nil, fmt.Errorf("join: concat: %w", err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("exec: head op %v", h.Op)
}

// RunStep runs one step on the running value v.
func RunStep(b Backend, s Step, v Tensor) (Tensor, error) {
	in := append([]Tensor(nil), s.In...)
	in[s.Arg] = v
	switch s.Op {
	case StepAdd:
		return b.Add(in[0], in[1], s.Spec)
	case StepMul:
		return b.Mul(in[0], in[1], s.Spec)
	case StepSub:
		return b.Sub(in[0], in[1], s.Spec)
	case StepDiv:
		return b.Div(in[0], in[1], s.Spec)
	case StepMinimum:
		return b.Minimum(in[0], in[1], s.Spec)
	case StepMaximum:
		return b.Maximum(in[0], in[1], s.Spec)
	case StepAct:
		return b.Act(in[0], s.Act, s.Spec)
	case StepCast:
		return b.Cast(in[0], s.Format)
	case StepModulate:
		return b.Modulate(in[0], in[1], in[2], s.Modulate, s.Spec)
	case StepGatedResidual:
		return b.GatedResidual(in[0], in[1], in[2], s.Act, s.Spec)
	case StepGLU:
		return b.GLU(in[0], in[1], s.Act, s.Spec)
	case StepRope:
		return b.Rope(in[0], in[1], in[2], s.Rope, s.Spec)
	}
	return nil, fmt.Errorf("exec: step op %v", s.Op)
}
