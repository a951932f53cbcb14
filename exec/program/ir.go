package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Op is what a node does: one exec.Backend call, or a host step.
type Op uint8

// The ops. Each reads Node.In in the order its comment gives ("" for an
// absent optional input) and the Attrs fields it names.
const (
	OpLinear          Op = iota + 1 // x, w, b
	OpNorm                          // x, γ, β; Attrs.Norm
	OpModulate                      // x, shift, scale; Attrs.Modulate
	OpGatedResidual                 // x, y, gate; Attrs.Act (the gate function)
	OpRope                          // x, cos, sin; Attrs.Rope
	OpAttention                     // q, k, v, mask, bias, sinks (the last three optional); Attrs.Attention
	OpAct                           // x; Attrs.Act
	OpGLU                           // gate, value; Attrs.Act
	OpAdd                           // a, b
	OpMul                           // a, b
	OpCast                          // x; Attrs.Format
	OpReshape                       // x; Attrs.Shape
	OpSlice                         // x; Attrs.Axis, Start, End
	OpConcat                        // xs...; Attrs.Axis
	OpChunk                         // x; Attrs.N, Axis; one output per piece
	OpTimestepEmbed                 // t; Attrs.Timestep
	OpRopeTable                     // positions; Attrs.RopeTable; outputs cos, sin
	OpGather                        // table, ids: rows of table (host step)
	OpPatchify                      // x [B, C, H, W]; Attrs.Patch: → [B, (H/p)·(W/p), C·p·p]
	OpUnpatchify                    // x [B, (H/p)·(W/p), C·p·p]; Attrs.Patch: → [B, C, H, W]
	OpPermute                       // x; Attrs.Perm: output axis i is input axis Perm[i] (torch.permute)
	OpSub                           // a, b: a − b, rounded once
	OpDiv                           // a, b: a / b, rounded once
	OpRound                         // x: round half to even to an integer (host step; a timestep cast to an integer dtype)
	OpMean                          // x, mask: mean over Attrs.Axis (weighted by mask [.., n] when given: a masked mean); host step
	OpRoute                         // logits [.., E], bias [E] (optional: added for the choice only); Attrs.Route: outputs the top-k weights ([.., k], or [.., E] dense) and their indices [.., k] (host step)
	OpExperts                       // x [T, D], indices [T, k] (optional: absent, the weights are dense), weights [T, k] or [T, E] (both absent: x is [E·T, D], block e through expert e, unsummed), w1 [E, 2I, D], w2 [E, D, I], b1 [E, 2I], b2 [E, D] (biases optional); Attrs.Act, UpFirst, Experts
	OpSoftmax                       // x: softmax over the last axis, in f32, rounded once (host step: a router's scores)
	OpMinimum                       // a, b: min(a, b), NaN where either is (torch.minimum; clamp's upper bound)
	OpMaximum                       // a, b: max(a, b), NaN where either is (torch.maximum; clamp's lower bound)
	OpConv2D                        // x [B, C, H, W], w [O, C/groups, kh, kw], bias [O] (optional); Attrs.Conv: stride 1
	OpLinearAttention               // q [B, N, H·D], k [B, M, H·D], v [B, M, H·Dv], then optionally the numerator's qn, kn; Attrs.LinearAttention (kernelised attention)
	OpRepeat                        // x; Attrs.N, Axis: N copies of x joined along the axis (torch's repeat; repeat_interleave of a length-1 axis)
	OpWhere                         // cond, a, b: a where cond > 0, else b, broadcast together (torch.where(x > 0, a, b): a piecewise activation's choice; host step)
	OpSSMScan                       // x [B, L, H, P], dt [B, L, H], A [H] or [H, N], B, C [B, L, G, N], D [H] (optional): the selective scan (exec.Extended's SSMScan)
	OpRelBucket                     // q [Sq], k [Sk] positions: [Sq, Sk] relative position bucket ids, f32; Attrs.Bucket (host step)
	OpAngular                       // q [B, N, H·D], k [B, M, H·D], v [B, M, H·Dv]; Attrs.Angular: YOSO's expected LSH attention (host step)
	OpDeltaScan                     // q, k [B, L, G, K], v [B, L, H, V], g, beta [B, L, H]: the gated delta-rule scan (exec.Extended's DeltaScan)
	OpMemoryScan                    // q, k [B, L, H, K], v [B, L, H, V], i, f [B, L, H] (log gates); Attrs.Memory: the gated matrix-memory scan (exec.Extended's MemoryScan)
	OpFFT2Real                      // x [.., N, M]: the real part of the 2-D Fourier transform over the last two axes (exec.Extended's FFT2Real)
	OpSinkhorn                      // x [.., n, m]; Attrs.Sinkhorn: alternating column and row normalisations (exec.Extended's Sinkhorn)
	OpMatMul                        // a [.., M, K], b [.., K, N]: the batched product (exec.Extended's MatMul)
	OpSegmentMask                   // bounds [k+1]: the additive mask [1, 1, N, N] of attention within the segments they bound; Attrs.N (host step)
	OpMaxPool2D                     // x [B, C, H, W]; Attrs.Conv: Kernel, Stride, Pad (−∞), Ceil: the largest value of each window (torch's max_pool2d)
	OpRecurrence                    // xg [B, L, G·H], whh [G·H, H], bh [G·H] (optional); Attrs.Recurrence: one direction of a recurrent layer (exec.Extended's Recurrence)
	OpArgMin                        // x [.., n]: the index of each row's first least entry, f32 (host step: a quantizer's nearest codebook row)
	OpQR                            // x [.., m, n], m ≥ n: Q of the reduced QR factorisation, LAPACK's signs (host step, in float64)
	opEnd
)

var opNames = [...]string{"", "linear", "norm", "modulate", "gated_residual", "rope", "attention",
	"act", "glu", "add", "mul", "cast", "reshape", "slice", "concat", "chunk", "timestep_embed",
	"rope_table", "gather", "patchify", "unpatchify", "permute", "sub", "div", "round", "mean", "route", "experts", "softmax", "minimum", "maximum", "conv2d", "linear_attention", "repeat", "where", "ssm_scan", "rel_bucket", "angular_attention", "delta_scan", "memory_scan", "fft2_real", "sinkhorn", "matmul", "segment_mask", "max_pool2d", "recurrence", "argmin", "qr"}

// String is the op's name, as precision rules name it.
func (o Op) String() string {
	if o > 0 && o < opEnd {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// movement reports whether o's outputs may share storage with its input
// (a view): the interpreter keeps the input alive while they live.
func (o Op) movement() bool {
	return o == OpReshape || o == OpSlice || o == OpChunk || o == OpPatchify || o == OpUnpatchify || o == OpPermute
}

// exact reports whether o's outputs are exact whatever the precision plan
// (moved or copied values, integer ids, masks of 0 and −∞): no precision
// rule applies to it.
func (o Op) exact() bool {
	return o.movement() || o == OpConcat || o == OpRepeat || o == OpGather || o == OpRelBucket || o == OpSegmentMask || o == OpMaxPool2D || o == OpArgMin
}

// Attrs are an op's parameters; each op reads the fields its constant names.
type Attrs struct {
	Norm      exec.NormParams
	Modulate  exec.ModulateParams
	Act       exec.ActKind
	Rope      exec.RopeParams
	Attention exec.AttentionParams
	Timestep  exec.TimestepParams
	RopeTable exec.RopeTableParams
	Patch     exec.PatchParams
	Format    precision.Format
	Shape     []int
	Perm      []int // OpPermute
	Axis      int
	Start     int
	End       int
	N         int
	Route     RouteParams   // OpRoute
	UpFirst   bool          // OpExperts: w1 holds up before gate
	Experts   ExpertsParams // OpExperts: clamp, Swish-β, offset of up
	Conv      ConvParams    // OpConv2D, OpMaxPool2D
	// LinearAttention configures OpLinearAttention.
	LinearAttention LinearAttentionParams
	// Bucket configures OpRelBucket.
	Bucket BucketParams
	// Angular configures OpAngular.
	Angular AngularParams
	// Memory configures OpMemoryScan.
	Memory MemoryParams
	// Sinkhorn configures OpSinkhorn.
	Sinkhorn exec.SinkhornParams
	// Recurrence configures OpRecurrence.
	Recurrence exec.RecurrenceParams
}

// Node is one operation.
type Node struct {
	Op    Op
	In    []string // value names; "" for an absent optional input
	Out   []string
	Role  string    // "<address>.<part>", e.g. "blocks.0.image.q": what precision rules match
	Spec  exec.Spec // for ops that round (not movement ops)
	Attrs Attrs
}

// ValueKind says where a value comes from and how long it lives.
type ValueKind uint8

const (
	Weight    ValueKind = iota + 1 // a parameter (Source: its path); lives for the whole run
	Input                          // a request input (Source: its role); lives for the whole run
	StepInput                      // given to each forward (Source: "latents", "timestep", "next_timestep", "index")
	Const                          // host data made by the builder (Data); uploaded once
	Temp                           // an intermediate: freed after its last use
)

func (k ValueKind) String() string {
	switch k {
	case Weight:
		return "weight"
	case Input:
		return "input"
	case StepInput:
		return "step input"
	case Const:
		return "const"
	case Temp:
		return "temp"
	}
	return fmt.Sprintf("ValueKind(%d)", uint8(k))
}

// Tap says that a value is the reference's tensor at a module's port.
type Tap struct {
	Module string
	Port   string
	In     bool // an input port: observed, and overridable, when Module's segment starts
}

// Key is the tap's trace key in step scope s ("s0/<module>/<port>").
func (t Tap) Key(step int) string { return fmt.Sprintf("s%d/%s/%s", step, t.Module, t.Port) }

// Value is a named tensor of the program.
type Value struct {
	Name   string
	Kind   ValueKind
	Source string // Weight: parameter path; Input: role; StepInput: "latents" | "timestep" | "next_timestep" | "index"
	Shape  []int  // static: a program is built for one request's shapes
	Data   []float32
	Format precision.Format // Const: the format Data is uploaded in
	Taps   []Tap
}

// Segment is a run of nodes that computes one component with a reference
// boundary (a block, the final stage, the whole model).
type Segment struct {
	Address    string // "blocks.0", "final", "model"
	Module     string
	Start, End int // nodes [Start, End)
}

// Program is a built model: values, nodes in execution order, segments.
type Program struct {
	Values   map[string]*Value
	Order    []string // value names in creation order
	Nodes    []Node
	Segments []Segment
	Outputs  []string // values one forward returns
	// Passed names the values a partial program passes through an
	// undetermined block (BuildPartial): not computed, so a check skips
	// their taps.
	Passed []string
	// lastUse: value → index of the last node that reads it (Temps only).
	lastUse map[string]int
}

// Value returns the named value.
func (p *Program) Value(name string) (*Value, bool) {
	v, ok := p.Values[name]
	return v, ok
}

// ValuesOf lists the values of a kind, in creation order.
func (p *Program) ValuesOf(k ValueKind) []*Value {
	var out []*Value
	for _, n := range p.Order {
		if v := p.Values[n]; v.Kind == k {
			out = append(out, v)
		}
	}
	return out
}

// SegmentOf returns the segment with the given address.
func (p *Program) SegmentOf(address string) (Segment, bool) {
	for _, s := range p.Segments {
		if s.Address == address {
			return s, true
		}
	}
	return Segment{}, false
}

// finalize checks that every node input exists and is made before it is
// read, and records each Temp's last use.
func (p *Program) finalize() error {
	made := map[string]bool{}
	for _, v := range p.Values {
		if v.Kind != Temp {
			made[v.Name] = true
		}
	}
	p.lastUse = map[string]int{}
	for i, n := range p.Nodes {
		for _, in := range n.In {
			if in == "" {
				continue
			}
			if !made[in] {
				return fmt.Errorf("program: node %d (%s %s) reads %q before it is made", i, n.Op, n.Role, in)
			}
			if p.Values[in].Kind == Temp {
				p.lastUse[in] = i
			}
		}
		for _, out := range n.Out {
			v, ok := p.Values[out]
			if !ok || v.Kind != Temp {
				return fmt.Errorf("program: node %d (%s %s) writes %q, which is not a temp", i, n.Op, n.Role, out)
			}
			if made[out] {
				return fmt.Errorf("program: node %d (%s %s) writes %q a second time", i, n.Op, n.Role, out)
			}
			made[out] = true
		}
	}
	for _, o := range p.Outputs {
		if !made[o] {
			return fmt.Errorf("program: output %q is never made", o)
		}
	}
	return nil
}

// NodeTaps lists the reference boundaries node i's results correspond to.
func (p *Program) NodeTaps(i int) []Tap {
	var out []Tap
	for _, name := range p.Nodes[i].Out {
		out = append(out, p.Values[name].Taps...)
	}
	return out
}

// MemoryParams configure OpMemoryScan: Eps, added to the normaliser
// max(|q·n|, exp(−m)) (exec.Extended's MemoryScan).
type MemoryParams struct {
	Eps float32
}
